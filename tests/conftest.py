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


#: Seconds before pytest-timeout's limit at which a hung test's asyncio tasks are printed
#: (pytest-timeout prints the threads; a hang in an event loop shows only as a poll).
TASK_DUMP_LEAD_S = 15


@pytest.fixture(autouse=True)
def _print_asyncio_tasks_before_a_timeout(request: pytest.FixtureRequest) -> Iterator[None]:
    """When a test is about to time out, print every running loop's tasks and where each
    waits: what a hang in an app test is stuck on."""
    import gc
    import sys
    import threading

    limit = float(request.config.getini("timeout") or 0)
    if limit <= TASK_DUMP_LEAD_S:
        yield
        return

    def dump() -> None:
        import asyncio

        loops = [o for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop)]
        for loop in loops:
            if not loop.is_running():
                continue
            print(f"\n~~~ asyncio tasks of {loop!r} ~~~", file=sys.stderr)
            for task in list(asyncio.all_tasks(loop)):
                print(f"- {task.get_name()}: {task.get_coro()!r}", file=sys.stderr)
                for frame in task.get_stack(limit=12):
                    code = frame.f_code
                    print(
                        f"    {code.co_filename}:{frame.f_lineno} {code.co_name}", file=sys.stderr
                    )

    timer = threading.Timer(limit - TASK_DUMP_LEAD_S, dump)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
