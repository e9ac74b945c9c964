"""Shared pytest fixtures."""

from collections.abc import Iterator

import pytest
from support.chat_support import TOOLS_TODAY
from support.fakeopenai import FakeOpenAI

from tui.chat.tools import MemoryTools
from tui.engine.engine import MemoryEngine
from tui.engine.workspace import Workspace


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started fake OpenAI server (empty queue, echo default); stopped after the test."""
    with FakeOpenAI() as server:
        yield server


@pytest.fixture(scope="session")
def embedder():
    """The real embedding model, loaded once per test session."""
    from tui.engine.embeddings import Embedder

    model = Embedder()
    model.load()
    return model


@pytest.fixture
def memory(tmp_path) -> Iterator[MemoryEngine]:
    """A memory engine over a fresh workspace (BM25 until a test loads the model)."""
    engine = MemoryEngine(Workspace.open(tmp_path / "ws"))
    yield engine
    engine.close()


@pytest.fixture
def tools(memory: MemoryEngine) -> MemoryTools:
    """The model's memory tools over ``memory``, with today fixed to :data:`TOOLS_TODAY`."""
    return MemoryTools(memory, today=lambda: TOOLS_TODAY)
