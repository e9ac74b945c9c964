"""Fixtures of the app-level fault tests: the fake server and a chat engine over a small
workspace (a module with other needs defines its own ``server`` / ``engine``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from support.fakeopenai import FakeOpenAI
from support.pilot import APP_MEMORY, close_chat_engine, open_chat_engine

from tui.chat.chat import ChatEngine


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
async def engine(tmp_path: Path, server: FakeOpenAI) -> AsyncIterator[ChatEngine]:
    chat = open_chat_engine(tmp_path, server, APP_MEMORY)
    yield chat
    await close_chat_engine(chat)
