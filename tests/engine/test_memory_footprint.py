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


def _sqlite_memory_used() -> int:
    """Bytes SQLite holds in this process (``sqlite3_memory_used``, from the module's own
    SQLite: the one every connection of the index uses)."""
    import ctypes
    import sys

    library = ctypes.CDLL(sys.modules["sqlean._sqlite3"].__file__)
    memory_used = library.sqlite3_memory_used
    memory_used.restype = ctypes.c_int64
    return int(memory_used())


def test_release_memory_gives_the_readers_page_caches_back_while_they_read(
    tmp_path: Path,
) -> None:
    """Pool threads keep their readers, each with the pages it read (up to ~2 MB): at a quiet
    moment they are given back, from another thread, even while a reader is reading."""
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    for day in range(1, 29):
        write_log(
            root,
            f"2026-11-{day:02d}",
            [f"Entry {day}-{n} about Lisbon trains and the dog Luna " * 12 for n in range(20)],
        )
    index = MemoryIndex(Workspace.open(root), CountingEmbedder(), count_words)
    index.sync()
    expected = index.fts_candidates("Lisbon Luna", 50)
    stop = threading.Event()
    errors: list[BaseException] = []

    def keep_reading() -> None:  # a pool thread: it lives on, and so does its reader
        while not stop.is_set():
            try:
                assert index.fts_candidates("Lisbon Luna", 50) == expected
                index.chunks_by_id(list(range(1, 400)))
            except BaseException as exc:  # noqa: BLE001 (reported by the assertion below)
                errors.append(exc)
                return

    readers = [threading.Thread(target=keep_reading) for _ in range(3)]
    for reader in readers:
        reader.start()
    try:
        for _ in range(30):
            index.release_memory()
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    assert errors == []
    held = _sqlite_memory_used()
    index.release_memory()
    released = _sqlite_memory_used()
    assert released < held - 500_000, (held, released)  # the readers' pages: MBs, not KBs
    assert index.fts_candidates("Lisbon Luna", 50) == expected  # read again as needed
    index.close()
