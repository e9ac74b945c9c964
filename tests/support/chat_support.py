"""Helpers shared by the ``test_chat_*`` tests: a real engine on a tmp workspace, a config
pointing at the fake server, summary replies, and running the ``memdeck`` CLI as a process."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from support.fakeopenai import FakeOpenAI, Reply

from tui.chat.chat import ChatEngine
from tui.chat.config import Config, load_config
from tui.chat.sessions import SessionStore
from tui.engine.engine import MemoryEngine
from tui.engine.workspace import Workspace

#: "Today" for the memory tools the ``tools`` fixture (tests/conftest.py) builds.
TOOLS_TODAY = date(2026, 11, 22)

ROOT = Path(__file__).resolve().parents[2]
SUMMARY_MARKER = "memory extraction assistant"


def make_config(
    tmp_path: Path,
    server: FakeOpenAI | None = None,
    env: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Config:
    """A config that reads no user file: the fake server (if any), no retries, short timeouts."""
    environment = dict(env or {})
    if server is not None:
        environment.setdefault("OPENAI_BASE_URL", server.base_url)
        environment.setdefault("MEMDECK_MODEL", "fake-model")
    overrides.setdefault("max_retries", 0)
    overrides.setdefault("request_timeout", 5.0)
    return load_config(tmp_path / "no-config.toml", env=environment, overrides=overrides)


class FakeClock:
    """A settable clock for the trigger timers (local, timezone-aware)."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


def make_engine(
    tmp_path: Path, config: Config, clock: Callable[[], datetime] | None = None
) -> ChatEngine:
    """A ChatEngine over a fresh workspace in ``tmp_path/ws`` (BM25 only: no model load)."""
    workspace = Workspace.open(tmp_path / "ws")
    memory = MemoryEngine(
        workspace,
        search_options=config.search_options(),
        injection_options=config.injection_options(),
    )
    kwargs: dict[str, Any] = {"clock": clock} if clock is not None else {}
    return ChatEngine(config, memory, sessions=SessionStore(workspace), **kwargs)


def is_summary_request(body: dict[str, Any]) -> bool:
    """True for a daily-log flush request (its system prompt names the extractor)."""
    return any(
        m.get("role") == "system" and SUMMARY_MARKER in str(m.get("content"))
        for m in body.get("messages", [])
    )


class SummaryResponder:
    """Answers flush requests with a numbered summary and fact; counts them."""

    def __init__(self, facts: Sequence[str] | None = None, summary: str | None = None) -> None:
        """``summary``: the daily summary's bullet (default: a numbered one)."""
        self.count = 0
        self.facts = facts
        self.summary = summary
        self._numbers = itertools.count(1)

    def __call__(self, body: dict[str, Any]) -> Reply | None:
        if not is_summary_request(body):
            return None
        number = next(self._numbers)
        self.count = number
        facts = self.facts if self.facts is not None else [f"Summary fact number {number}"]
        fact_lines = "\n".join(f"- {f}" for f in facts) or "None"
        summary = self.summary or f"Summary number {number} of the chat."
        return FakeOpenAI.text(
            f"## Daily Summary\n- {summary}\n\n## Long-term Facts\n{fact_lines}\n"
        )


def add_messages(store: SessionStore, session_id: str, count: int, start: int = 1) -> list[str]:
    """Append ``count`` alternating user/assistant messages; return their ids."""
    ids = []
    for number in range(start, start + count):
        role = "user" if number % 2 else "assistant"
        ids.append(store.append_message(session_id, role, f"message {number} about topic{number}"))
    return ids


def memdeck_env(server: FakeOpenAI | None, tmp_path: Path, **extra: str) -> dict[str, str]:
    """Environment for a ``memdeck`` subprocess: the fake server, no user config, no keys."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "MEMDECK_")) or k == "MEMDECK_TEST"
    }
    env["MEMDECK_CONFIG"] = str(tmp_path / "no-config.toml")
    env["MEMDECK_MAX_RETRIES"] = "0"
    env["MEMDECK_REQUEST_TIMEOUT"] = "10"
    if server is not None:
        env["OPENAI_BASE_URL"] = server.base_url
        env["MEMDECK_MODEL"] = "fake-model"
    env.update(extra)
    return env


def run_memdeck(
    args: Sequence[str], env: Mapping[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the ``memdeck`` entry point in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-c", "import sys; from tui.cli import main; sys.exit(main())", *args],
        env=dict(env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_memdeck(args: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[str]:
    """Start the ``memdeck`` entry point without waiting."""
    return subprocess.Popen(
        [sys.executable, "-c", "import sys; from tui.cli import main; sys.exit(main())", *args],
        env=dict(env),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
