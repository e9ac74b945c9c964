"""What keeps the process small: no connection left behind by ended threads, lean model load."""

from __future__ import annotations

import threading
from pathlib import Path

from support.counting_embedder import CountingEmbedder, count_words, write_log

from tui.engine.index import MemoryIndex
from tui.engine.workspace import Workspace


def test_readers_of_ended_threads_are_closed(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    write_log(root, "2026-11-01", ["Booked the train to Lisbon", "The dog is called Luna"])
    index = MemoryIndex(Workspace.open(root), CountingEmbedder(), count_words)
    index.sync()

    def read() -> None:
        assert index.fts_candidates("Lisbon", 5)
        assert index.stats()["chunks"] == 2

    for _ in range(20):  # the app runs each worker in a new thread
        worker = threading.Thread(target=read)
        worker.start()
        worker.join()
    read()  # this thread's reader; at most one ended thread's reader is still open
    assert len(index._connections) <= 3  # the writer, this thread's, the last worker's
    living = threading.Event()
    done = threading.Event()

    def hold() -> None:
        read()
        living.set()
        done.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    living.wait(5)
    worker = threading.Thread(target=read)
    worker.start()
    worker.join()
    assert any(t is holder for t, _ in index._reader_threads)  # a live thread keeps its reader
    done.set()
    holder.join()
    index.close()
    assert index._connections == [] and index._reader_threads == []
