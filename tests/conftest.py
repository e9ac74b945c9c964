"""Shared pytest fixtures."""

from collections.abc import Iterator

from tui.engine.heap import tune_process

tune_process()  # as the `memdeck` entry point does, before numpy loads

import pytest  # noqa: E402
from support.chat_support import TOOLS_TODAY  # noqa: E402
from support.fakeopenai import FakeOpenAI  # noqa: E402

from tui.chat.tools import MemoryTools  # noqa: E402
from tui.engine.engine import MemoryEngine  # noqa: E402
from tui.engine.workspace import Workspace  # noqa: E402


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
