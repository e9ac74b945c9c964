"""Shared pytest fixtures."""

from collections.abc import Iterator

import pytest
from fakeopenai import FakeOpenAI


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started fake OpenAI server (empty queue, echo default); stopped after the test."""
    with FakeOpenAI() as server:
        yield server
