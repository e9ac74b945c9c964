"""Shared pytest fixtures."""

from collections.abc import Iterator
from pathlib import Path

from tui.engine.heap import tune_process

tune_process()  # as the `memdeck` entry point does, before numpy loads

import os  # noqa: E402

import textual.constants  # noqa: E402

# No animations in the test apps: Pilot's press waits for running animations to finish, and one
# started as the app quits (the MEMORY.md tab's underline narrowing when its ● goes on save)
# never finishes once the app has stopped, so the test hung until pytest-timeout. Every App
# reads this at construction; the environment variable reaches the apps tests start in a pty.
textual.constants.TEXTUAL_ANIMATIONS = "none"  # type: ignore[misc]  # Final, read at each App()
os.environ["TEXTUAL_ANIMATIONS"] = "none"

import pytest  # noqa: E402
from support.chat_support import TOOLS_TODAY  # noqa: E402
from support.fakeopenai import FakeOpenAI  # noqa: E402

from tui.chat.tools import MemoryTools  # noqa: E402
from tui.engine.embeddings import Embedder  # noqa: E402
from tui.engine.engine import MemoryEngine  # noqa: E402
from tui.engine.workspace import Workspace  # noqa: E402


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started fake OpenAI server (empty queue, echo default); stopped after the test."""
    with FakeOpenAI() as server:
        yield server


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real embedding model, loaded once per test session."""
    model = Embedder()
    model.load()
    return model


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemoryEngine]:
    """A memory engine over a fresh workspace (BM25 until a test loads the model)."""
    engine = MemoryEngine(Workspace.open(tmp_path / "ws"))
    yield engine
    engine.close()


@pytest.fixture
def tools(memory: MemoryEngine) -> MemoryTools:
    """The model's memory tools over ``memory``, with today fixed to :data:`TOOLS_TODAY`."""
    return MemoryTools(memory, today=lambda: TOOLS_TODAY)


#: Seconds before pytest-timeout's limit at which a hung test's asyncio tasks are printed
#: (pytest-timeout prints the threads; a hang in an event loop shows only as a poll).
TASK_DUMP_LEAD_S = 15


@pytest.fixture(autouse=True)
def _print_asyncio_tasks_before_a_timeout(request: pytest.FixtureRequest) -> Iterator[None]:
    """When a test is about to time out, print every running loop's tasks and where each
    waits: what a hang in an app test is stuck on."""
    import asyncio
    import sys
    import threading
    from types import FrameType

    limit = float(request.config.getini("timeout") or 0)
    if limit <= TASK_DUMP_LEAD_S:
        yield
        return

    def running_loops() -> list[asyncio.AbstractEventLoop]:
        """The loops running in any thread, found on the threads' stacks (the app freezes
        its objects out of ``gc.get_objects``)."""
        loops: list[asyncio.AbstractEventLoop] = []
        for top in sys._current_frames().values():
            frame: FrameType | None = top
            while frame is not None:
                candidate = frame.f_locals.get("self")
                if isinstance(candidate, asyncio.AbstractEventLoop) and candidate not in loops:
                    loops.append(candidate)
                frame = frame.f_back
        return loops

    def dump() -> None:

        lines: list[str] = []
        for loop in running_loops():
            lines.append(f"~~~ asyncio tasks of {loop!r} ~~~")
            for task in list(asyncio.all_tasks(loop)):
                lines.append(f"- {task.get_name()}: {task.get_coro()!r}")
                for frame in task.get_stack(limit=12):
                    lines.append(f"    {frame.f_code.co_filename}:{frame.f_lineno}")
        # the real stderr: a running Textual app redirects sys.stderr
        stream = sys.__stderr__
        if stream is not None:
            stream.write("\n".join(lines) + "\n")
            stream.flush()

    timer = threading.Timer(limit - TASK_DUMP_LEAD_S, dump)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
