"""A fresh ``memdeck`` app in a process of its own, reporting what it imported and where.

    python tests/support/fresh_app_probe.py WORKSPACE BASE_URL

The app opens ``WORKSPACE`` as ``memdeck`` opens it (the embedding model in its helper
process) with ``BASE_URL`` as its model server, headless. Once it is idle (index synced, model
loaded, first preview shown), the modules of :data:`WATCHED` it has imported are printed as one
JSON line (``{"idle": [...]}``); then one key is typed, the chat client's warm-up awaited, the
message sent and its answer awaited, and the thread that imported ``openai`` is printed
(``{"openai_imported_on": ..., "answered": ...}``). Run by ``tests/app/test_lazy_imports.py``:
only a fresh interpreter tells what the app itself imports.
"""

from __future__ import annotations

import asyncio
import importlib.abc
import importlib.machinery
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

#: Libraries the idle app does not need: each is imported when its feature is first used
#: (pygit2 when a memory file is not as last committed, tokenizers when a text is counted).
WATCHED = (
    "openai",
    "httpx",
    "httpx2",
    "mcp",
    "jsonschema",
    "numpy",
    "onnxruntime",
    "pygit2",
    "tokenizers",
)

imported_on: dict[str, str] = {}


class ImportSpy(importlib.abc.MetaPathFinder):
    """Notes the thread that first imports each watched top-level package."""

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name in WATCHED and name not in imported_on:
            imported_on[name] = threading.current_thread().name
        return None


sys.meta_path.insert(0, ImportSpy())


async def until(condition: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:.0f} s for {what}")
        await asyncio.sleep(0.02)


async def probe(workspace: Path, base_url: str) -> None:
    from textual import events

    from tui.app.app import MemdeckApp
    from tui.app.main import open_engine
    from tui.chat.config import load_config

    config_file = workspace.parent / "no-config.toml"
    env = {"OPENAI_BASE_URL": base_url, "MEMDECK_MODEL": "fake-model"}
    config = load_config(config_file, env=env, overrides={"max_retries": 0})
    app = MemdeckApp(
        config=config, open_engine=lambda: open_engine(config, workspace), config_file=config_file
    )
    async with app.run_test(size=(120, 40)):
        await until(lambda: app.ready, "the engine")
        main = app.main_screen
        await until(lambda: main.header.model_state == "loaded", "the model", 120)
        await until(
            lambda: main.header.chunks is not None and not main.header.progress, "the index"
        )
        await until(lambda: main.memory_panels.injection_panel.injection is not None, "preview")
        print(json.dumps({"idle": sorted(m for m in WATCHED if m in sys.modules)}), flush=True)
        chat = main.chat_pane
        chat.chat_input.focus()
        app.post_message(events.Key("h", "h"))
        await until(lambda: chat.chat_input.value == "h", "the key")
        await until(
            lambda: not any(w.group == "llm-sdk" and not w.is_finished for w in main.workers),
            "the chat client's warm-up",
        )
        app.post_message(events.Key("enter", "\r"))
        await until(lambda: chat.turns_finished > 0, "the answer")
        answer = chat.messages[-1]
        print(
            json.dumps(
                {
                    "openai_imported_on": imported_on.get("openai"),
                    "answered": answer.role == "assistant" and bool(answer.text),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root))
    asyncio.run(probe(Path(sys.argv[1]), sys.argv[2]))
