"""The embedding cache is bounded: least recently used first, never an entry still in use."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.counting_embedder import DIMS, CountingEmbedder, count_words, write_log

from tui.engine.index import CACHE_MAX_ENTRIES, MemoryIndex
from tui.engine.index_db import connect
from tui.engine.workspace import Workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    return Workspace.open(root)


def open_index(
    workspace: Workspace, embedder: CountingEmbedder, cache_max_entries: int = CACHE_MAX_ENTRIES
) -> MemoryIndex:
    return MemoryIndex(workspace, embedder, count_words, cache_max_entries=cache_max_entries)


def cache_hashes(index: MemoryIndex) -> set[str]:
    return {row[0] for row in index._reader().execute("SELECT hash FROM embedding_cache")}


def live_hashes(index: MemoryIndex) -> set[str]:
    return {row[0] for row in index._reader().execute("SELECT hash FROM chunks")}


def test_default_bound_is_openclaws(workspace: Workspace) -> None:
    index = open_index(workspace, CountingEmbedder())
    assert CACHE_MAX_ENTRIES == 10_000
    assert index.stats()["cache_max_entries"] == 10_000
    index.close()


def test_edits_evict_the_least_recently_used_and_keep_what_chunks_use(
    workspace: Workspace,
) -> None:
    embedder = CountingEmbedder()
    index = open_index(workspace, embedder, cache_max_entries=5)
    root = workspace.root
    write_log(root, "2026-11-01", [f"Fact {i} about the garden" for i in range(3)])
    index.sync()
    assert index.stats()["cache_entries"] == 3
    # Each edit replaces the three texts: the old ones stay cached until the bound is reached.
    evicted = []
    for version in range(1, 5):
        write_log(
            root, "2026-11-01", [f"Fact {i} about the garden, version {version}" for i in range(3)]
        )
        evicted.append(index.sync().cache_evicted)
        assert index.stats()["cache_entries"] == 5
        assert live_hashes(index) <= cache_hashes(index)  # what the chunks use is never evicted
    assert evicted == [1, 3, 3, 3]
    # The two survivors beside the live entries are the most recently used: version 3's.
    write_log(root, "2026-11-01", [f"Fact {i} about the garden, version 3" for i in range(3)])
    report = index.sync()
    assert (report.cache_hits, report.embedded) == (2, 1)
    index.close()


def test_a_reused_entry_is_fresh_again(workspace: Workspace) -> None:
    embedder = CountingEmbedder()
    index = open_index(workspace, embedder, cache_max_entries=2)
    root = workspace.root
    write_log(root, "2026-11-01", ["Alpha text here"])
    index.sync()
    write_log(root, "2026-11-01", ["Beta text here"])
    index.sync()
    write_log(root, "2026-11-01", ["Alpha text here"])  # reverted: a cache hit, alpha is fresh
    report = index.sync()
    assert report.cache_hits == 1 and report.embedded == 0
    write_log(root, "2026-11-01", ["Gamma text here"])
    report = index.sync()
    assert report.cache_evicted == 1  # beta, the least recently used; alpha was just reused
    write_log(root, "2026-11-01", ["Alpha text here"])
    embedder.embedded.clear()
    report = index.sync()
    assert report.cache_hits == 1 and embedder.embedded == []
    index.close()


def test_chunks_in_use_are_kept_beyond_the_bound(workspace: Workspace) -> None:
    embedder = CountingEmbedder()
    index = open_index(workspace, embedder, cache_max_entries=2)
    write_log(workspace.root, "2026-11-01", [f"Note {i} on trains" for i in range(6)])
    index.sync()
    assert index.stats()["cache_entries"] == 6 == len(live_hashes(index))
    index.close()


def test_a_rebuild_keeps_every_entry_it_needs(workspace: Workspace) -> None:
    embedder = CountingEmbedder()
    index = open_index(workspace, embedder, cache_max_entries=4)
    root = workspace.root
    write_log(root, "2026-11-01", [f"Old note {i} about bikes" for i in range(4)])
    index.sync()
    write_log(root, "2026-11-01", [f"New note {i} about bikes" for i in range(4)])
    index.sync()  # 8 entries, 4 in use: the 4 old ones are evicted
    assert index.stats()["cache_entries"] == 4
    embedder.embedded.clear()
    report = index.rebuild()
    assert embedder.embedded == []  # every vector came from the cache
    assert report.cache_hits == 4 and report.cache_evicted == 0
    assert index.stats()["cache_entries"] == 4 and index.stats()["embedded"] == 4
    index.close()


def test_a_rebuild_evicts_unused_entries_only_after_all_chunks_are_in(
    workspace: Workspace,
) -> None:
    embedder = CountingEmbedder()
    index = open_index(workspace, embedder, cache_max_entries=100)
    root = workspace.root
    for day in range(1, 4):
        write_log(root, f"2026-11-0{day}", [f"Day {day} note {i}" for i in range(3)])
    write_log(root, "2026-11-09", ["Edited away soon"])
    index.sync()
    write_log(root, "2026-11-09", ["Edited text now"])
    index.sync()
    index.close()
    # Reopen with a tight bound: the rebuild reuses all 10 live vectors, drops the one stale.
    index = open_index(workspace, embedder, cache_max_entries=3)
    embedder.embedded.clear()
    report = index.rebuild()
    assert embedder.embedded == []
    assert report.cache_evicted == 1
    assert cache_hashes(index) == live_hashes(index)
    index.close()


def test_an_older_index_gains_the_recency_column(workspace: Workspace) -> None:
    path = workspace.index_path
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = connect(path)
    conn.execute(
        """CREATE TABLE embedding_cache (model TEXT NOT NULL, hash TEXT NOT NULL,
           embedding BLOB NOT NULL, PRIMARY KEY (model, hash))"""
    )
    conn.execute(
        "INSERT INTO embedding_cache VALUES ('old-model', 'h', ?)",
        (np.zeros(DIMS, np.float32).tobytes(),),
    )
    conn.close()
    embedder = CountingEmbedder()
    index = open_index(workspace, embedder, cache_max_entries=0)
    columns = {row[1] for row in index._reader().execute("PRAGMA table_info(embedding_cache)")}
    assert "last_used" in columns
    write_log(workspace.root, "2026-11-01", ["Something new"])
    report = index.sync()
    assert report.cache_evicted == 1  # the other model's entry: never in use
    assert index.stats()["cache_entries"] == 1
    index.close()


def test_negative_bound_is_refused(workspace: Workspace) -> None:
    with pytest.raises(ValueError):
        open_index(workspace, CountingEmbedder(), cache_max_entries=-1)
