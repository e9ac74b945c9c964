"""Issue 29 item 21: a huge paste is the user's own input, measured in tokens, never cut.

A message over what the model's context leaves for it is refused before anything is stored or
sent, with its size in tokens; one that fits reaches the model whole (the question at its end
included), never through the answer's ``max_answer_chars`` truncation. The app keeps a refused
draft in the composer, shows a long draft's size under it and folds it to its head and tail
only when asked; ``memdeck ask`` says one line and exits non-zero. Real engine, real session
files, the loopback fake server; the app under Pilot; the CLI as a process.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from subprocess import CompletedProcess

from support.chat_support import ROOT, make_config, make_engine, memdeck_env
from support.fakeopenai import FakeOpenAI
from support.pilot import paste, sent_message, small_app, wait_until

from tui.app.app import MemdeckApp
from tui.chat.chat import ChatEngine
from tui.chat.context_window import FOLD_MARKER
from tui.chat.events import CompactionStarted, TurnDone, TurnError
from tui.engine.embeddings import count_tokens

QUESTION = "Which of these lines shows the failure?"
#: How the answer's truncation note begins: a user message must never carry it.
ANSWER_NOTE = "[memdeck: answer truncated"
FOLD_NOTE = FOLD_MARKER.split("{")[0].strip()


def log_paste(lines: int) -> str:
    """A pasted log of ``lines`` lines (~59 characters each) with the question at its end."""
    body = "\n".join(
        f"2026-11-26 10:{n % 60:02d}:{n % 7:02d} worker-{n % 13} processed batch {n} in {n % 97} ms"
        for n in range(lines)
    )
    return f"{body}\n{QUESTION}"


#: ~443 KB, ~100k tokens: far over the default context window (32,768 tokens).
HUGE_PASTE = log_paste(7_500)


# -- the engine ------------------------------------------------------------------------------


async def test_a_message_over_the_context_is_refused_before_anything_is_stored_or_sent(
    tmp_path: Path,
) -> None:
    assert len(HUGE_PASTE) > 400_000
    with FakeOpenAI() as server:
        engine = make_engine(tmp_path, make_config(tmp_path, server))
        session = engine.sessions.create().id
        events = [e async for e in engine.run_turn(session, HUGE_PASTE)]
        assert len(events) == 1 and isinstance(events[0], TurnError)
        refusal = events[0]
        assert refusal.kind == "too_large"
        tokens = count_tokens(HUGE_PASTE)
        assert f"~{tokens:,} tokens" in refusal.message
        assert f"leaves {engine.message_room():,}" in refusal.message
        assert "\n" not in refusal.message
        assert server.chat_requests == []
        assert engine.sessions.load(session).messages == []
        engine.close()


async def test_a_long_message_that_fits_reaches_the_model_whole_on_every_turn(
    tmp_path: Path,
) -> None:
    # Longer than max_answer_chars (200,000): a user message is not an answer to cut.
    paste = log_paste(3_500)
    assert len(paste) > 200_000
    with FakeOpenAI() as server:
        config = make_config(tmp_path, server, context_window=1_000_000)
        engine = make_engine(tmp_path, config)
        session = engine.sessions.create().id
        server.enqueue(FakeOpenAI.text("Line 7."), FakeOpenAI.text("You are welcome."))
        first = [e async for e in engine.run_turn(session, paste)]
        assert isinstance(first[-1], TurnDone)
        assert server.chat_requests[-1].last_user_message == paste
        second = [e async for e in engine.run_turn(session, "thanks")]
        assert isinstance(second[-1], TurnDone)
        replayed = [m["content"] for m in server.chat_requests[-1].messages if m["role"] == "user"]
        assert replayed == [paste, "thanks"]
        assert ANSWER_NOTE not in json.dumps(server.chat_requests[-1].messages)
        engine.close()


async def test_an_older_oversized_message_is_replayed_as_head_and_tail_within_the_context(
    tmp_path: Path,
) -> None:
    # A transcript written before the size check holds the whole paste.
    with FakeOpenAI() as server:
        engine = make_engine(tmp_path, make_config(tmp_path, server))
        session = engine.sessions.create().id
        engine.sessions.append_message(session, "user", HUGE_PASTE)
        engine.sessions.append_message(session, "assistant", "That is a lot of log.")
        server.enqueue(FakeOpenAI.text("Sure."))
        events = [e async for e in engine.run_turn(session, "and now?")]
        assert isinstance(events[-1], TurnDone)
        assert not any(isinstance(e, CompactionStarted) for e in events)
        request = server.chat_requests[-1]
        old = next(m["content"] for m in request.messages if m["role"] == "user")
        assert FOLD_NOTE in old and ANSWER_NOTE not in old
        assert old.startswith(HUGE_PASTE[:1000]) and old.endswith(QUESTION)
        assert count_tokens(old) <= engine.message_room()
        engine.close()


def test_a_folded_message_keeps_its_head_and_tail_and_says_what_was_left_out(
    tmp_path: Path,
) -> None:
    engine = make_engine(tmp_path, make_config(tmp_path))
    folded = engine.fit_message(HUGE_PASTE)
    assert engine.measure_message(folded).fits
    assert count_tokens(folded) > engine.message_room() * 0.8  # the room is used, not wasted
    marker = r"([\d,]+)".join(re.escape(part) for part in re.split(r"\{\w+:,\}", FOLD_MARKER))
    head, lines, chars, tail = re.split(marker, folded)
    assert HUGE_PASTE.startswith(head + "\n") and HUGE_PASTE.endswith("\n" + tail)
    assert tail.endswith(QUESTION)
    assert len(head) + 1 + int(chars.replace(",", "")) + len(tail) == len(HUGE_PASTE)
    kept_lines = len(head.splitlines()) + len(tail.splitlines())
    assert kept_lines + int(lines.replace(",", "")) == len(HUGE_PASTE.splitlines())
    short = "What is the capital of France?"
    assert engine.fit_message(short) == short
    engine.close()


# -- the app ---------------------------------------------------------------------------------

SIZE = (120, 36)


def notes(app: MemdeckApp) -> list[str]:
    """The notifications shown so far."""
    return [str(n.message) for n in app._notifications]


async def test_a_paste_too_long_for_the_context_is_refused_and_stays_in_the_box(
    engine: ChatEngine, server: FakeOpenAI, tmp_path: Path
) -> None:
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        box = await paste(pilot, HUGE_PASTE)
        lines = f"{len(HUGE_PASTE.splitlines()):,} lines"
        await wait_until(pilot, lambda: "tokens" in box.size_note, "the draft's size")
        tokens = count_tokens(HUGE_PASTE)
        assert box.size_note == f"~{tokens:,} tokens: too long · ctrl+g folds · {lines}"
        pane = app.main_screen.chat_pane
        await pilot.press("enter")
        await wait_until(pilot, lambda: bool(notes(app)), "the refusal")
        refusal = notes(app)[-1]
        assert refusal.startswith(f"message not sent: it is ~{tokens:,} tokens")
        assert "ctrl+g" in refusal
        await pilot.pause()
        assert box.text == HUGE_PASTE  # typed text is never lost
        assert pane.messages == [] and not pane.busy
        assert server.chat_requests == []
        assert all(not engine.sessions.load(i.id).messages for i in engine.sessions.list())


async def test_ctrl_g_folds_a_long_paste_to_its_head_and_tail_which_is_then_sent(
    engine: ChatEngine, server: FakeOpenAI, tmp_path: Path
) -> None:
    server.enqueue(FakeOpenAI.text("Line 7."))
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        box = await paste(pilot, HUGE_PASTE)
        await pilot.press("ctrl+g")
        await wait_until(pilot, lambda: FOLD_NOTE in box.text, "the fold")
        folded = box.text
        assert folded.endswith(QUESTION) and engine.measure_message(folded).fits
        fits = f"{len(folded.splitlines()):,} lines · ~{count_tokens(folded):,} tokens"
        await wait_until(pilot, lambda: box.size_note == fits, "the new size")
        await pilot.press("ctrl+z")  # the fold is an edit: the whole text comes back
        await wait_until(pilot, lambda: box.text == HUGE_PASTE, "the undo")
        await pilot.press("ctrl+g")
        await wait_until(pilot, lambda: FOLD_NOTE in box.text, "the fold")
        await pilot.press("enter")
        assert await sent_message(pilot, server) == folded.strip()
        assert box.text == ""


async def test_a_long_paste_that_fits_shows_its_size_and_is_sent_whole(
    engine: ChatEngine, server: FakeOpenAI, tmp_path: Path
) -> None:
    server.enqueue(FakeOpenAI.text("Line 7."))
    text = log_paste(300)  # ~18 KB, ~4,000 tokens: fits the default context
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        box = await paste(pilot, text)
        await wait_until(pilot, lambda: "tokens" in box.size_note, "the draft's size")
        assert box.size_note == f"301 lines · ~{count_tokens(text):,} tokens"
        assert box.border_subtitle  # shown on the box's edge
        await pilot.press("enter")
        assert await sent_message(pilot, server) == text
        assert box.size_note == "" and not box.border_subtitle


async def test_a_short_draft_shows_no_size(
    engine: ChatEngine, server: FakeOpenAI, tmp_path: Path
) -> None:
    app = small_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        box = await paste(pilot, "line one\nline two\nWhat changed?")
        await pilot.pause()
        assert box.size_note == "" and not box.border_subtitle


# -- memdeck ask -----------------------------------------------------------------------------


def ask(tmp_path: Path, server: FakeOpenAI, *args: str, stdin: str = "") -> CompletedProcess[str]:
    """``memdeck ask`` as a process over ``tmp_path/ws``, the question piped on stdin."""
    return subprocess.run(
        [sys.executable, "-c", "import sys; from tui.cli import main; sys.exit(main())"]
        + ["--workspace", str(tmp_path / "ws"), "ask", "--bm25", *args],
        env=memdeck_env(server, tmp_path),
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_ask_refuses_a_question_over_the_context_in_one_line_and_sends_nothing(
    tmp_path: Path,
) -> None:
    with FakeOpenAI() as server:
        done = ask(tmp_path, server, "-", stdin=HUGE_PASTE)
        assert done.returncode != 0
        error = done.stderr.strip()
        assert "\n" not in error and "Traceback" not in error
        tokens = count_tokens(HUGE_PASTE)
        assert error.startswith(f"memdeck: error: message not sent: it is ~{tokens:,} tokens")
        assert error.endswith("shorten it, or add --fold to send its head and tail")
        assert server.chat_requests == [] and done.stdout == ""
        assert (tmp_path / "ws").is_dir()  # the workspace was opened: no session was made in it
        assert not list((tmp_path / "ws" / "sessions").glob("*"))


def test_ask_sends_a_long_question_whole_and_a_folded_one_with_its_question(
    tmp_path: Path,
) -> None:
    paste = log_paste(300)
    with FakeOpenAI() as server:
        server.enqueue(FakeOpenAI.text("Line 7."), FakeOpenAI.text("Line 9."))
        done = ask(tmp_path, server, "-", stdin=paste)
        assert done.returncode == 0, done.stderr
        assert server.chat_requests[-1].last_user_message == paste
        done = ask(tmp_path, server, "--fold", "-", stdin=HUGE_PASTE)
        assert done.returncode == 0, done.stderr
        assert "only its head and tail are sent" in done.stderr
        sent = server.chat_requests[-1].last_user_message
        assert sent is not None and FOLD_NOTE in sent and sent.endswith(QUESTION)
        assert done.stdout.strip() == "Line 9."
