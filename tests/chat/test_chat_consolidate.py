"""Consolidation ("hippocampus"): a proposal from the summary model against the fake server,
its diff and checks, accept (atomic write, audit trail, re-index), stale refusal, reject, the
schedule, errors, and ``memdeck consolidate`` as a process."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support.chat_support import FakeClock, make_config, make_engine, memdeck_env, run_memdeck
from support.fakeopenai import FakeOpenAI, Reply

from tui.chat.chat import ChatEngine
from tui.chat.config import load_config
from tui.chat.consolidation import (
    ConsolidationError,
    NothingToConsolidate,
    ProposalRefused,
    StaleProposalError,
    unified_diff,
)
from tui.engine.fileio import sha256_bytes

MARKER = "memory consolidation assistant"
NOW = datetime(2026, 11, 22, 12, 0).astimezone()
TODAY = NOW.date()

MEMORY = """\
# Long-term Memory

## About me
- My dog is Max
- I live in Lyon
- Prefers tea <!-- mem id=aa1111 conf=high src=user at=2026-11-01 -->
- prefers tea. <!-- mem id=bb2222 conf=medium src=auto at=2026-11-03 -->
- Uses vim <!-- mem  conf=medium id=cc3333 src=auto at=2026-11-02 -->
- Old project is Zephyr <!-- mem id=dd4444 conf=medium src=auto at=2026-10-01 -->
"""

#: The model's answer: Max superseded (hand-written, marked), a duplicate merged, vim reworded
#: (comment kept), Zephyr dropped, Luna and Rust added, the comment of "Prefers tea" dropped.
ANSWER = """\
# Long-term Memory

## About me
- My dog is Max <!-- mem state=superseded -->
- My dog is Luna
- I live in Lyon
- Prefers tea
- Uses neovim <!-- mem id=cc3333 conf=medium src=auto at=2026-11-02 -->
- Writes Rust at work
"""

DAILY = """\
# 2026-11-21

## 10:00 · chat · messages 1–4 <!-- mem src=auto flush=f1 session=s1 -->

- Adopted a new dog, Luna; Max lives with the neighbours now.
- Switched from vim to neovim.
- Old secret note <!-- mem state=forgotten -->
"""


class ConsolidationResponder:
    """Answers consolidation requests with ``answer`` (or a scripted reply); counts them."""

    def __init__(self, answer: str | Reply = ANSWER) -> None:
        self.answer = answer
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Reply | None:
        system = " ".join(
            str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "system"
        )
        if MARKER not in system:
            return None
        self.bodies.append(body)
        return self.answer if isinstance(self.answer, Reply) else FakeOpenAI.text(self.answer)


@pytest.fixture
def responder() -> ConsolidationResponder:
    return ConsolidationResponder()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def engine(tmp_path: Path, server: FakeOpenAI, clock: FakeClock) -> Iterator[ChatEngine]:
    chat = make_engine(
        tmp_path, make_config(tmp_path, server, summary_model="fake-summary"), clock=clock
    )
    root = chat.memory.workspace.root
    (root / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    (root / "memory").mkdir(exist_ok=True)
    (root / "memory" / "2026-11-21.md").write_text(DAILY, encoding="utf-8")
    (root / "memory" / "2026-10-01.md").write_text("# 2026-10-01\n\n- Too old to read\n")
    yield chat
    chat.close()


def history(root: Path) -> list[dict[str, Any]]:
    path = root / ".memdeck" / "history.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def memory_hits(engine: ChatEngine, query: str) -> list[str]:
    results = engine.memory.search(query, min_score=0.0, now=TODAY).results
    return [r.text for r in results if r.path == "MEMORY.md"]


def test_proposal_text_diff_and_stats(
    engine: ChatEngine, server: FakeOpenAI, responder: ConsolidationResponder
) -> None:
    root = engine.memory.workspace.root
    proposal = engine.consolidator.propose()

    # One non-streamed request to the summary model with MEMORY.md and the daily logs.
    assert len(responder.bodies) == 1
    request = server.chat_requests[-1]
    assert request.model == "fake-summary" and not request.stream
    prompt = request.messages[-1]["content"]
    assert "- Prefers tea <!-- mem id=aa1111" in prompt  # MEMORY.md verbatim
    assert "Adopted a new dog, Luna" in prompt and "memory/2026-11-21.md" in prompt
    assert "flush=f1" not in prompt and "Old secret note" not in prompt  # no metadata, no forgotten
    assert "Too old to read" not in prompt  # outside the default window (7 days)
    assert "superseded" in request.system_prompt + prompt and "Newer facts win" in prompt

    assert proposal.base_hash == sha256_bytes((root / "MEMORY.md").read_bytes())
    assert proposal.base_text == MEMORY and proposal.sources == ("memory/2026-11-21.md",)
    assert (proposal.window_start, proposal.window_end) == (TODAY - timedelta(days=6), TODAY)
    text = proposal.text
    # Kept entries keep their comments exactly as written (restored when the model dropped one).
    assert "- Prefers tea <!-- mem id=aa1111 conf=high src=user at=2026-11-01 -->" in text
    assert "- Uses neovim <!-- mem  conf=medium id=cc3333 src=auto at=2026-11-02 -->" in text
    assert "- I live in Lyon\n" in text  # hand-written, no comment added
    # New facts get metadata naming the consolidation; superseded, merged, dropped are gone.
    assert f"conf=medium src=auto at={TODAY.isoformat()} consolidation={proposal.id} -->" in text
    assert "- My dog is Luna <!-- mem id=" in text and "- Writes Rust at work <!-- mem" in text
    for gone in ("Max", "prefers tea.", "Zephyr", "state=superseded"):
        assert gone not in text
    assert proposal.diff == unified_diff(MEMORY, text)
    assert proposal.diff.startswith("--- a/MEMORY.md\n+++ b/MEMORY.md\n")
    assert "-- My dog is Max\n" in proposal.diff and "+- Writes Rust at work" in proposal.diff

    stats = proposal.stats
    assert (stats.added, stats.changed, stats.removed) == (2, 1, 3)
    assert (stats.superseded, stats.merged, stats.kept) == (1, 1, 2)
    kinds = {(c.kind, c.before.text if c.before else c.after) for c in proposal.changes}
    assert kinds == {
        ("superseded", "My dog is Max"),
        ("merged", "prefers tea."),
        ("changed", "Uses vim"),
        ("removed", "Old project is Zephyr"),
        ("added", "My dog is Luna"),
        ("added", "Writes Rust at work"),
    }
    as_json = json.loads(json.dumps(proposal.to_json()))
    assert as_json["stats"]["added"] == 2 and as_json["base_hash"] == proposal.base_hash

    # Proposing writes nothing.
    assert (root / "MEMORY.md").read_text() == MEMORY and history(root) == []
    assert engine.consolidator.last_consolidated is None


def test_accept_writes_records_history_and_reindexes(engine: ChatEngine) -> None:
    root = engine.memory.workspace.root
    engine.memory.sync()
    assert memory_hits(engine, "dog Max") and not memory_hits(engine, "Luna")
    consolidator = engine.consolidator
    assert consolidator.is_due(NOW)
    proposal = consolidator.propose()

    result = consolidator.accept(proposal)

    assert (root / "MEMORY.md").read_text(encoding="utf-8") == proposal.text
    assert result.written and result.before_hash == proposal.base_hash
    assert result.after_hash == sha256_bytes((root / "MEMORY.md").read_bytes())
    events = history(root)
    consolidation = [e for e in events if e["event"] == "consolidation"]
    assert len(consolidation) == 1
    assert consolidation[0]["id"] == proposal.id and consolidation[0]["diff"] == proposal.diff
    assert consolidation[0]["before_hash"] == proposal.base_hash
    assert consolidation[0]["after_hash"] == result.after_hash
    retired = {e["text"]: e for e in events if e["event"] == "superseded"}
    assert set(retired) == {"My dog is Max", "prefers tea.", "Uses vim", "Old project is Zephyr"}
    assert retired["Uses vim"]["replaced_by"] == "cc3333"
    assert retired["Old project is Zephyr"]["entry_id"] == "dd4444"
    assert all(e["consolidation"] == proposal.id for e in retired.values())
    assert "my dog is max" in engine.memory.store.retired_texts()

    # Re-indexed: the new fact is found in MEMORY.md, the superseded one is not.
    assert any("Luna" in hit for hit in memory_hits(engine, "Luna"))
    assert not any("Max" in hit for hit in memory_hits(engine, "dog Max"))
    assert not memory_hits(engine, "Zephyr")

    assert consolidator.last_consolidated == TODAY
    assert not consolidator.is_due(NOW)
    # Tomorrow it is due again only if a daily log changed since.
    assert not consolidator.is_due(NOW + timedelta(days=1))
    later = root / "memory" / "2026-11-23.md"
    later.write_text("# 2026-11-23\n\n- Bought a bike\n")
    stamp = (NOW + timedelta(days=1)).timestamp()
    os.utime(later, (stamp, stamp))
    assert consolidator.is_due(NOW + timedelta(days=1))
    # The next window starts at the last consolidation.
    assert consolidator.window(today=TODAY + timedelta(days=3))[0] == TODAY


def test_hand_edit_between_proposal_and_accept_is_refused(engine: ChatEngine) -> None:
    root = engine.memory.workspace.root
    proposal = engine.consolidator.propose()
    edited = MEMORY + "- Allergic to peanuts\n"
    (root / "MEMORY.md").write_text(edited, encoding="utf-8")

    with pytest.raises(StaleProposalError) as caught:
        engine.consolidator.accept(proposal)

    assert str(caught.value) == "MEMORY.md changed since the proposal; run consolidate again"
    assert (root / "MEMORY.md").read_text(encoding="utf-8") == edited
    assert not [e for e in history(root) if e["event"] in ("consolidation", "superseded")]
    assert engine.consolidator.last_consolidated is None


def test_reject_leaves_everything_as_is(engine: ChatEngine) -> None:
    root = engine.memory.workspace.root
    engine.memory.sync()
    state = root / ".memdeck" / "state.json"
    state_before = state.read_bytes() if state.exists() else None
    proposal = engine.consolidator.propose()

    engine.consolidator.reject(proposal, reason="not now")

    assert (root / "MEMORY.md").read_text(encoding="utf-8") == MEMORY
    assert (state.read_bytes() if state.exists() else None) == state_before
    assert memory_hits(engine, "dog Max") and not memory_hits(engine, "Luna")
    events = history(root)
    assert [e["event"] for e in events] == ["consolidation_rejected"]
    assert events[0]["id"] == proposal.id and events[0]["reason"] == "not now"
    assert engine.consolidator.last_consolidated is None
    # Not offered again the same day; offered again the next day.
    assert not engine.consolidator.is_due(NOW)
    assert engine.consolidator.is_due(NOW + timedelta(days=1))


def test_metadata_duplicates_and_retired_facts(engine: ChatEngine) -> None:
    consolidator = engine.consolidator
    engine.memory.store.record_history("forgotten", path="MEMORY.md", text="Hates mornings")
    answer = (
        "```markdown\n"
        + MEMORY.replace("- My dog is Max\n", "- My dog is Max <!-- mem state=superseded -->\n")
        + "- Hates mornings\n- Hates mornings\n- Likes jazz\n- Likes jazz\n```\n"
    )
    proposal = consolidator.build_proposal(MEMORY, "hash", answer, window=(TODAY, TODAY), model="m")
    assert proposal.text.count("Likes jazz") == 1 and "Hates mornings" not in proposal.text
    assert any("forgotten or superseded before" in note for note in proposal.notes)
    assert "```" not in proposal.text and proposal.stats.added == 1
    # Chatter before the document is ignored, not added as a fact.
    chatty = "Here is the updated MEMORY.md:\n\n" + MEMORY
    proposal = consolidator.build_proposal(MEMORY, "hash", chatty, window=(TODAY, TODAY))
    assert proposal.unchanged and any("ignored text" in note for note in proposal.notes)
    # A comment the model altered comes back as it was.
    altered = MEMORY.replace("conf=high src=user", "conf=low src=model")
    proposal = consolidator.build_proposal(MEMORY, "hash", altered, window=(TODAY, TODAY))
    assert proposal.unchanged and proposal.diff == ""


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("", "empty answer"),
        ("   \n\n", "empty answer"),
        ('{"memory": ["My dog is Luna"]}', "JSON, not Markdown"),
        ("Sure! I updated your memory as requested.", "no Markdown headings or list items"),
        ("# Long-term Memory\n\n- My dog is Luna\n", "keeps 2 of MEMORY.md's 8 non-blank lines"),
        (MEMORY.replace("- I live in Lyon\n", ""), "deletes 1 line you wrote by hand"),
    ],
)
def test_validation_refusals(
    engine: ChatEngine, responder: ConsolidationResponder, answer: str, reason: str
) -> None:
    root = engine.memory.workspace.root
    responder.answer = answer
    with pytest.raises(ProposalRefused) as caught:
        engine.consolidator.propose()
    assert reason in str(caught.value) and caught.value.kind == "refused"
    assert (root / "MEMORY.md").read_text(encoding="utf-8") == MEMORY and history(root) == []


def test_endpoint_down_and_no_model_write_nothing(tmp_path: Path, clock: FakeClock) -> None:
    with FakeOpenAI() as gone:
        url = gone.base_url
    config = make_config(tmp_path, env={"OPENAI_BASE_URL": url, "MEMDECK_MODEL": "m"})
    engine = make_engine(tmp_path, config, clock=clock)
    try:
        root = engine.memory.workspace.root
        (root / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
        with pytest.raises(ConsolidationError) as caught:
            engine.consolidator.propose()
        assert caught.value.kind == "connection" and "could not connect" in str(caught.value)

        engine.reconfigure(make_config(tmp_path, env={}))
        with pytest.raises(ConsolidationError) as caught:
            engine.consolidator.propose()
        assert caught.value.kind == "config" and "no LLM configured" in str(caught.value)
        assert (root / "MEMORY.md").read_text(encoding="utf-8") == MEMORY
        assert history(root) == [] and engine.consolidator.last_consolidated is None
    finally:
        engine.close()


def test_schedule_knob_window_and_nothing_to_do(
    engine: ChatEngine, responder: ConsolidationResponder, tmp_path: Path
) -> None:
    consolidator = engine.consolidator
    assert consolidator.is_due(NOW) and consolidator.is_due(TODAY)
    assert consolidator.window(days=2, today=TODAY) == (TODAY - timedelta(days=1), TODAY)
    assert consolidator.window(days=60, today=TODAY)[0] == date(2026, 9, 24)
    # --days 60 reaches the 2026-10-01 log that the default window (7 days) leaves out.
    proposal = consolidator.propose(days=60)
    assert "Too old to read" in responder.bodies[-1]["messages"][-1]["content"]
    assert proposal.sources == ("memory/2026-10-01.md", "memory/2026-11-21.md")

    root = engine.memory.workspace.root
    (root / "MEMORY.md").write_text("# Long-term Memory\n", encoding="utf-8")
    for path in (root / "memory").glob("*.md"):
        path.unlink()
    with pytest.raises(NothingToConsolidate):
        consolidator.propose()
    assert not consolidator.is_due(NOW)  # nothing new to consolidate

    assert load_config(tmp_path / "none.toml", env={}).consolidate_every_days == 1
    config = load_config(tmp_path / "none.toml", env={"MEMDECK_CONSOLIDATE_EVERY_DAYS": "0"})
    assert config.consolidate_every_days == 0 and config.consolidate_max_days == 7
    (root / "memory" / "2026-11-22.md").write_text("# 2026-11-22\n\n- Something new\n")
    assert consolidator.is_due(NOW)
    engine.reconfigure(config)
    assert not consolidator.is_due(NOW)  # 0 disables the schedule (on demand still works)


def test_cli_yes_applies_and_non_tty_only_prints(tmp_path: Path) -> None:
    responder = ConsolidationResponder()
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    today = date.today()
    (workspace / "memory" / f"{today.isoformat()}.md").write_text(DAILY, encoding="utf-8")
    with FakeOpenAI(responder=responder) as server:
        env = memdeck_env(server, tmp_path)
        args = ["--workspace", str(workspace), "consolidate"]

        printed = run_memdeck(args, env)
        assert printed.returncode == 0, printed.stderr
        assert "-- My dog is Max" in printed.stdout and "+- Writes Rust at work" in printed.stdout
        assert "not applied" in printed.stderr and "--yes" in printed.stderr
        assert (workspace / "MEMORY.md").read_text(encoding="utf-8") == MEMORY

        applied = run_memdeck([*args, "--json", "--yes"], env)
        assert applied.returncode == 0, applied.stderr
        payload = json.loads(applied.stdout)
        assert payload["applied"] is True and payload["stats"]["added"] == 2
        assert (
            payload["diff"].startswith("--- a/MEMORY.md") and "+- My dog is Luna" in payload["diff"]
        )
        text = (workspace / "MEMORY.md").read_text(encoding="utf-8")
        assert text == payload["text"] and "My dog is Luna <!-- mem id=" in text
        assert "Max" not in text
        assert any(e["event"] == "consolidation" for e in history(workspace))
        state = json.loads((workspace / ".memdeck" / "state.json").read_text())
        assert state["consolidation"]["last_date"] == today.isoformat()

    down = run_memdeck([*args, "--yes"], memdeck_env(None, tmp_path))
    assert down.returncode == 2 and "no LLM configured" in down.stderr
    assert (workspace / "MEMORY.md").read_text(encoding="utf-8") == text


def test_cli_asks_on_a_tty(tmp_path: Path) -> None:
    import pty
    import subprocess
    import sys

    from support.chat_support import ROOT

    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    (workspace / "memory" / f"{date.today().isoformat()}.md").write_text(DAILY, encoding="utf-8")
    with FakeOpenAI(responder=ConsolidationResponder()) as server:
        env = memdeck_env(server, tmp_path)
        for answer in ("n", "y"):
            master, slave = pty.openpty()
            try:
                os.write(master, f"{answer}\n".encode())
                result = subprocess.run(
                    [sys.executable, "-c", "import sys; from tui.cli import main; sys.exit(main())"]
                    + ["--workspace", str(workspace), "consolidate"],
                    env=env,
                    cwd=ROOT,
                    stdin=slave,
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
            finally:
                os.close(slave)
                os.close(master)
            assert result.returncode == 0, result.stderr
            assert "Apply? [y/N]" in result.stderr and "-- My dog is Max" in result.stdout
            text = (workspace / "MEMORY.md").read_text(encoding="utf-8")
            events = [e["event"] for e in history(workspace)]
            if answer == "n":
                assert text == MEMORY and events == ["consolidation_rejected"]
            else:
                assert "My dog is Luna" in text and "consolidation" in events


def test_a_due_consolidation_is_offered_once_per_reason(engine: ChatEngine) -> None:
    """The start-up notice came back at every start: it is said once until a log in the window
    changes (or a consolidation is accepted or rejected)."""
    root = engine.memory.workspace.root
    consolidator = engine.consolidator
    assert consolidator.is_due(NOW)
    assert consolidator.offer(NOW)
    assert not consolidator.offer(NOW)  # the next start: already said
    assert consolidator.is_due(NOW)  # still due: the palette's command still offers it
    log = root / "memory" / "2026-11-21.md"  # in the window
    with log.open("a", encoding="utf-8") as handle:
        handle.write("\n- One more thing worth keeping\n")
    os.utime(log, ns=(log.stat().st_atime_ns, log.stat().st_mtime_ns + 1_000_000_000))
    assert consolidator.offer(NOW)  # a new reason
