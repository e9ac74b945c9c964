"""The in-RAM vector mirror answers as an exact scan over the vectors it was given, whatever
the order of writes, removals and searches (rows appended in place, or the mirror rebuilt)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tui.engine.vectors as vectors_module
from tui.engine.vectors import SPLIT_FROM, VectorMirror, columns_of_blobs

DIMS = 16


def unit(rng: np.random.Generator, rows: int) -> np.ndarray:
    vectors = rng.standard_normal((rows, DIMS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def scan(truth: dict[int, np.ndarray], query: np.ndarray, k: int) -> list[int]:
    """The ``k`` nearest ids by an exact scan over ``truth``."""
    ranked = sorted(truth, key=lambda i: (-float(truth[i] @ query), i))
    return ranked[:k]


def test_knn_matches_an_exact_scan_through_appends_removals_and_rebuilds() -> None:
    rng = np.random.default_rng(7)
    mirror = VectorMirror(DIMS)
    start = unit(rng, 200)
    mirror.load(np.arange(200), start)
    truth = {i: start[i] for i in range(200)}
    next_id = 200
    views = []
    for step in range(40):
        if step % 3 == 0:  # a batch of new chunks (appended in place)
            batch = unit(rng, int(rng.integers(1, 40)))
            ids = list(range(next_id, next_id + len(batch)))
            next_id += len(batch)
            mirror.upsert(ids, batch)
            truth.update(zip(ids, batch, strict=True))
        elif step % 3 == 1:  # chunks rewritten (their old rows die) and some deleted
            changed = [int(i) for i in rng.choice(sorted(truth), 5, replace=False)]
            vectors = unit(rng, 5)
            mirror.upsert(changed, vectors)
            truth.update(zip(changed, vectors, strict=True))
            gone = [int(i) for i in rng.choice(sorted(truth), 8, replace=False)]
            mirror.remove(gone)
            for chunk_id in gone:
                del truth[chunk_id]
        query = unit(rng, 1)[0]
        found = mirror.knn(query, 10, exact=True)
        assert [chunk_id for chunk_id, _ in found] == scan(truth, query, 10), f"step {step}"
        for chunk_id, score in found:
            assert abs(score - float(truth[chunk_id] @ query)) < 1e-5
        assert len(mirror) == len(truth)
        views.append((query, mirror.knn(query, 5, exact=True)))
    stored = mirror.vectors_for(truth)
    assert stored.keys() == truth.keys()
    for chunk_id, vector in stored.items():
        np.testing.assert_array_equal(vector, truth[chunk_id])
    above = {chunk_id for chunk_id, _ in mirror.above(views[-1][0], 0.3)}
    assert above == {i for i, v in truth.items() if float(v @ views[-1][0]) >= 0.3}


def test_appended_rows_leave_a_reader_s_earlier_view_as_it_was() -> None:
    rng = np.random.default_rng(3)
    mirror = VectorMirror(DIMS)
    mirror.load(np.arange(50), unit(rng, 50))
    mirror.upsert(range(50, 60), unit(rng, 10))
    mirror.knn(unit(rng, 1)[0], 3)  # merged: the buffer now has room
    before = mirror._columns
    frozen = before.copy()
    mirror.upsert(range(60, 62), unit(rng, 2))
    mirror.knn(unit(rng, 1)[0], 3)
    np.testing.assert_array_equal(before, frozen)
    assert mirror._columns.shape == (DIMS, 62)
    assert np.shares_memory(mirror._columns, before), "the vectors there were were copied"


def test_sign_bit_preselection_finds_appended_rows() -> None:
    rng = np.random.default_rng(11)
    mirror = VectorMirror(DIMS)
    mirror.load(np.arange(500), unit(rng, 500))
    target = unit(rng, 1)
    mirror.upsert([999], target)
    found = mirror.knn(target[0], 1, exact=False)
    assert found[0][0] == 999 and abs(found[0][1] - 1.0) < 1e-5


def test_a_large_mirror_s_product_split_in_two_answers_as_one_product() -> None:
    rng = np.random.default_rng(5)
    rows = SPLIT_FROM * 2 + 37  # halves of unequal blocks
    vectors = unit(rng, rows)
    mirror = VectorMirror(DIMS)
    mirror.load(np.arange(rows), vectors)
    mirror.remove([3, rows - 1])
    alive = {i: vectors[i] for i in range(rows) if i not in (3, rows - 1)}
    for _ in range(5):
        query = unit(rng, 1)[0]
        found = mirror.knn(query, 24, exact=True)
        assert [chunk_id for chunk_id, _ in found] == scan(alive, query, 24)
        whole = vectors @ query
        for chunk_id, score in found:
            assert abs(score - float(whole[chunk_id])) < 1e-5
        above = {chunk_id for chunk_id, _ in mirror.above(query, 0.5)}
        assert above == {i for i in alive if whole[i] >= 0.5}
    assert any(t.name.startswith("memdeck-knn") for t in threading.enumerate())


def test_vectors_loaded_from_blobs_in_blocks_are_the_vectors_stored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(vectors_module, "LOAD_BLOCK", 7)
    rng = np.random.default_rng(5)
    vectors = unit(rng, 30)
    blobs = [(100 + i, vector.tobytes()) for i, vector in enumerate(vectors)]
    ids, columns = columns_of_blobs(iter(blobs), 25, DIMS)  # rows written after the count
    assert ids.tolist() == list(range(100, 125))
    np.testing.assert_array_equal(columns.T, vectors[:25])
    ids, columns = columns_of_blobs(iter(blobs[:3]), 5, DIMS)  # rows deleted after it
    assert ids.tolist() == [100, 101, 102]
    mirror = VectorMirror(DIMS)
    mirror.load_columns(ids, columns)
    mirror.upsert([200], vectors[20:21])  # appended after the loaded columns
    assert [chunk_id for chunk_id, _ in mirror.knn(vectors[1], 1)] == [101]
    assert [chunk_id for chunk_id, _ in mirror.knn(vectors[20], 1)] == [200]
    np.testing.assert_array_equal(mirror.vectors_for([102, 200, 7])[102], vectors[2])


def test_sign_bit_preselection_keeps_the_nearest_of_many() -> None:
    """More vectors than the pre-selection keeps: the Hamming distances must choose."""
    rng = np.random.default_rng(13)
    dims = 64
    stored = rng.standard_normal((9000, dims)).astype(np.float32)
    stored /= np.linalg.norm(stored, axis=1, keepdims=True)
    mirror = VectorMirror(dims)
    mirror.load(np.arange(9000), stored)
    for target in rng.choice(9000, 20, replace=False):
        query = stored[target] + 0.05 * rng.standard_normal(dims).astype(np.float32)
        query /= np.linalg.norm(query)
        assert mirror.knn(query, 1, exact=False)[0][0] == target


def test_a_query_s_cosines_are_read_from_its_product_and_stay_right_after_writes() -> None:
    rng = np.random.default_rng(17)
    vectors = unit(rng, 120)
    mirror = VectorMirror(DIMS)
    mirror.load(np.arange(100), vectors[:100])
    query = unit(rng, 1)[0]
    found = mirror.nearest(query, 5, None)
    assert list(found.hits) == scan(dict(enumerate(vectors[:100])), query, 5)
    asked = [42, 7, 999, 3, 7]  # 999 has no vector; 7 asked twice
    cosines = found.of(asked)
    assert list(cosines) == [42, 7, 3]
    for chunk_id, cosine in cosines.items():
        assert abs(cosine - float(vectors[chunk_id] @ query)) < 1e-5
    mirror.upsert(range(100, 110), vectors[100:110])  # appended after the product
    mirror.upsert([3], vectors[110:111])  # rewritten: its old vector dies
    mirror.remove([42])
    after = found.of([42, 3, 105, 7])
    assert list(after) == [3, 105, 7]
    assert abs(after[3] - float(vectors[110] @ query)) < 1e-5
    assert abs(after[105] - float(vectors[105] @ query)) < 1e-5
    mirror.remove(range(50, 100))  # most of it gone: the mirror is rebuilt
    rebuilt = found.of([7, 105])
    assert abs(rebuilt[7] - float(vectors[7] @ query)) < 1e-5
    assert abs(rebuilt[105] - float(vectors[105] @ query)) < 1e-5
    above = mirror.nearest(query, 5, 0.0)
    assert all(cosine >= 0.0 for cosine in above.hits.values())
    assert abs(above.of([105])[105] - float(vectors[105] @ query)) < 1e-5


def test_sign_bits_are_numpy_s_packed_signs_for_any_width() -> None:
    rng = np.random.default_rng(19)
    for dims in (13, 64, 100):
        rows = rng.standard_normal((5000, dims)).astype(np.float32)
        mean = 0.1 * rng.standard_normal(dims).astype(np.float32)
        expected = np.zeros((5000, (dims + 63) // 64 * 8), dtype=np.uint8)
        packed = np.packbits(rows - mean > 0, axis=1)
        expected[:, : packed.shape[1]] = packed
        got = vectors_module._sign_bits(np.ascontiguousarray(rows.T), mean)
        np.testing.assert_array_equal(got, expected.view(np.uint64))
