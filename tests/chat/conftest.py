"""Fixtures shared by the chat tests: the fake server and a chat engine talking to it.

A test module overrides ``responder`` (what the server answers with when nothing is queued)
or ``engine`` (other config or clock) by defining a fixture of the same name.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.chat_support import make_config, make_engine
from support.fakeopenai import FakeOpenAI, Responder

from tui.chat.chat import ChatEngine


@pytest.fixture
def responder() -> Responder | None:
    """No responder: queued replies, then the server's echo default."""
    return None


@pytest.fixture
def server(responder: Responder | None) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=responder) as fake:
        yield fake


@pytest.fixture
def engine(tmp_path: Path, server: FakeOpenAI) -> Iterator[ChatEngine]:
    chat = make_engine(tmp_path, make_config(tmp_path, server))
    yield chat
    chat.close()
