"""Shared pytest fixtures."""

from collections.abc import Iterator

import pytest
from support.fakeopenai import FakeOpenAI


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
