"""Compaction: silent memory-flush turn, pre-compaction flush, summary line, shorter requests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.chat_support import SummaryResponder, make_config, make_engine
from support.fakeopenai import FakeOpenAI, Reply

from tui.chat.compaction import SILENT_FLUSH_PROMPT
from tui.chat.context_window import SUMMARY_HEADING
from tui.chat.events import (
    Compacted,
    CompactionFailed,
    CompactionStarted,
    ToolCallStarted,
    TriggerEvent,
    TriggerListenerEvent,
    TurnDone,
)

LONG = " ".join(f"word{n}" for n in range(120))


class Scripted:
    """Daily summaries, compaction summaries, the silent turn, and echo for the rest."""

    def __init__(self) -> None:
        self.summaries = SummaryResponder(facts=[])
        self.compactions = 0

    def __call__(self, body: dict[str, Any]) -> Reply | None:
        messages = body["messages"]
        system = str(messages[0].get("content")) if messages else ""
        if self.summaries(body) is not None:
            return self.summaries(body)
        if "You compress conversations" in system:
            self.compactions += 1
            return FakeOpenAI.text(
                f"- summary {self.compactions}: the user talked about topics 1-3"
            )
        if any(SILENT_FLUSH_PROMPT in str(m.get("content")) for m in messages):
            if messages[-1]["role"] == "tool":
                return FakeOpenAI.text("NO_REPLY")
            return FakeOpenAI.tool_call("save_memory", {"content": "Likes long walks"})
        return None


async def test_compaction_flow(tmp_path: Path) -> None:
    script = Scripted()
    with FakeOpenAI(responder=script) as server:
        config = make_config(tmp_path, server, context_window=10**6, compaction_keep_messages=2)
        engine = make_engine(tmp_path, config)
        heard: list[TriggerListenerEvent] = []
        engine.triggers.add_listener(heard.append)
        session = engine.sessions.create().id
        for n in range(1, 4):
            events = [e async for e in engine.run_turn(session, f"topic{n} {LONG}")]
            assert isinstance(events[-1], TurnDone)
        transcript = engine.sessions.load(session)
        current = engine.estimate_tokens(
            [{"role": "system", "content": engine.system_prompt("")}]
            + engine.context_messages(transcript),
            engine.tools.definitions(),
        )
        engine.config = config.model_copy(
            update={"context_window": current + 60, "compaction_reserve": 0}
        )
        requests_before = len(server.chat_requests)

        events = [e async for e in engine.run_turn(session, f"topic4 {LONG}")]
        kinds = [type(e).__name__ for e in events]
        assert kinds.index("CompactionStarted") < kinds.index("Compacted") < kinds.index("TurnDone")
        started = next(e for e in events if isinstance(e, CompactionStarted))
        assert started.estimated_tokens >= started.limit
        silent_calls = [e for e in events if isinstance(e, ToolCallStarted)]
        assert [(c.name, c.silent) for c in silent_calls] == [("save_memory", True)]
        assert not any(isinstance(e, CompactionFailed) for e in events)
        compacted = next(e for e in events if isinstance(e, Compacted))
        assert compacted.tokens_after < compacted.tokens_before

        new_requests = server.chat_requests[requests_before:]
        silent = [r for r in new_requests if SILENT_FLUSH_PROMPT in json.dumps(r.messages)]
        assert silent and "append_daily_log" in silent[0].tool_names
        assert "Likes long walks" in engine.memory.workspace.memory_file.read_text()
        pre = [e for e in heard if isinstance(e, TriggerEvent) and e.trigger == "pre_compaction"]
        assert pre and pre[0].outcome.status == "flushed" and pre[0].outcome.messages == 7

        final = new_requests[-1]
        assert final.system_prompt is not None
        assert SUMMARY_HEADING in final.system_prompt and "summary 1" in final.system_prompt
        contents = [str(m.get("content")) for m in final.messages[1:]]
        assert not any(c.startswith("topic1") for c in contents)
        assert not any(SILENT_FLUSH_PROMPT in c for c in contents)
        assert contents[-1].startswith("topic4")

        # The next turn still carries the summary and the recent turns only.
        engine.config = config.model_copy(update={"context_window": 10**6})
        await_events = [e async for e in engine.run_turn(session, "and now?")]
        assert isinstance(await_events[-1], TurnDone)
        latest = server.chat_requests[-1]
        assert "summary 1" in (latest.system_prompt or "")
        assert [m["role"] for m in latest.messages].count("user") == 3

        # The JSONL keeps everything.
        lines = [json.loads(x) for x in engine.sessions.path(session).read_text().splitlines()]
        user_texts = [x["content"] for x in lines if x.get("role") == "user"]
        assert sum(t.startswith("topic") for t in user_texts) == 4
        compaction = [x for x in lines if x["type"] == "compaction"]
        assert len(compaction) == 1 and compaction[0]["dropped_messages"] >= 4
        engine.close()


async def test_compaction_failure_does_not_lose_the_turn(tmp_path: Path) -> None:
    def responder(body: dict[str, Any]) -> Reply | None:
        system = str(body["messages"][0].get("content"))
        if "You compress conversations" in system or "memory extraction" in system:
            return FakeOpenAI.error(500)
        return None

    with FakeOpenAI(responder=responder) as server:
        engine = make_engine(
            tmp_path,
            make_config(
                tmp_path,
                server,
                context_window=2000,
                compaction_reserve=0,
                compaction_keep_messages=2,
            ),
        )
        session = engine.sessions.create().id
        for n in range(3):
            engine.sessions.append_message(session, "user", f"q{n} {LONG}")
            engine.sessions.append_message(session, "assistant", f"a{n} {LONG}")
        events = [e async for e in engine.run_turn(session, "still there?")]
        failed = [e for e in events if isinstance(e, CompactionFailed)]
        assert failed and failed[-1].kind == "server"
        assert isinstance(events[-1], TurnDone) and events[-1].text == "still there?"
        assert engine.sessions.load(session).last_compaction is None
        engine.close()
