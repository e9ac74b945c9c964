"""Fixtures of the app tests: the fake server (flushes answered by a summary responder) and a
chat engine over the deck workspace, with a model configured or without one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from support.chat_support import SummaryResponder, make_config
from support.fakeopenai import FakeOpenAI
from support.pilot import SHOWN_CONFIG, build_engine, close_chat_engine

from tui.chat.chat import ChatEngine
from tui.engine.embeddings import Embedder


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    """The fake server; flush (summary) requests are answered by a SummaryResponder."""
    with FakeOpenAI(responder=SummaryResponder()) as fake:
        yield fake


@pytest.fixture
async def engine(
    tmp_path: Path, server: FakeOpenAI, embedder: Embedder
) -> AsyncIterator[ChatEngine]:
    """Hybrid search (the real model), the fake server as the LLM, a 0.2 s trigger tick."""
    chat = build_engine(tmp_path, make_config(tmp_path, server, tick_seconds=0.2), embedder)
    yield chat
    await close_chat_engine(chat)


@pytest.fixture
async def no_llm_engine(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[ChatEngine]:
    """No model configured: the app explains the set-up; memory still works."""
    monkeypatch.setenv("MEMDECK_CONFIG", SHOWN_CONFIG)
    config = make_config(tmp_path, None)
    assert config.llm_problem()
    chat = build_engine(tmp_path, config, embedder)
    yield chat
    await close_chat_engine(chat)
