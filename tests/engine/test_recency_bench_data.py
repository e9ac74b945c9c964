"""The recency benchmark's case data is sound (no model: data checks only).

``tests/bench/recency.py`` runs the same :func:`validate` before it measures anything; this test
keeps a broken edit of the data from reaching a benchmark run.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from collections import Counter
from datetime import date
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "recency.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("recency_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


recency = _load()


@pytest.fixture(scope="module")
def files() -> dict[str, dict[str, str]]:
    return {p.name: recency.build_files(p) for p in recency.PERSONAS}


def test_the_data_validates() -> None:
    assert recency.validate() == []


def test_case_counts() -> None:
    cases = recency.all_cases()
    assert len(cases) >= 40
    counts = Counter(case.category for _, case in cases)
    assert counts[recency.CURRENT] >= 16
    assert counts[recency.HISTORY] >= 12
    assert counts[recency.TIME] >= 12
    assert set(counts) <= set(recency.CATEGORIES)
    assert len({case.id for _, case in cases}) == len(cases)


def test_every_marker_is_found_exactly_once(files: dict[str, dict[str, str]]) -> None:
    for persona, case in recency.all_cases():
        for marker in case.targets + case.rivals:
            hits = recency.locate(files[persona.name], marker)
            assert len(hits) == 1, (case.id, marker, hits)


def test_dates_are_valid_and_before_now(files: dict[str, dict[str, str]]) -> None:
    for persona in recency.PERSONAS:
        for rel, text in files[persona.name].items():
            if rel == "MEMORY.md":
                continue
            match = re.fullmatch(r"memory/(\d{4}-\d{2}-\d{2})\.md", rel)
            assert match, rel
            day = date.fromisoformat(match.group(1))
            assert persona.start <= day < persona.now, rel
            assert text.startswith(f"# {day.isoformat()}\n"), rel
        for case in persona.cases:
            if case.window:
                lo, hi = case.window
                assert lo <= hi < persona.now, case.id


def test_workspaces_are_realistic(files: dict[str, dict[str, str]]) -> None:
    """A year or so of logs, ~100-300+ entries, most of them filler."""
    for persona in recency.PERSONAS:
        entries = sum(
            t.count("\n- ") for rel, t in files[persona.name].items() if rel != "MEMORY.md"
        )
        assert 100 <= entries <= 350, (persona.name, entries)
        assert (persona.now - persona.start).days >= 360, persona.name
        assert entries >= 5 * len(persona.stories), persona.name


def test_generation_is_deterministic(files: dict[str, dict[str, str]]) -> None:
    for persona in recency.PERSONAS:
        assert recency.build_files(persona) == files[persona.name]


def test_keyword_overlap_is_mixed(files: dict[str, dict[str, str]]) -> None:
    """About half the current-state cases: the newer entry shares no more keywords than the older."""
    newer_more = []
    for persona, case in recency.all_cases():
        if case.category != recency.CURRENT:
            continue
        newer = recency.locate(files[persona.name], case.targets[0])[0].text
        older = recency.locate(files[persona.name], case.rivals[0])[0].text
        newer_more.append(
            len(recency.shared_terms(case.question, newer))
            > len(recency.shared_terms(case.question, older))
        )
    share = sum(newer_more) / len(newer_more)
    assert 0.3 <= share <= 0.7, share


def test_validate_catches_bad_data() -> None:
    persona = recency.PERSONAS[0]
    case = next(c for c in persona.cases if c.category == recency.CURRENT)
    memory = next(c for c in persona.cases if c.category == recency.MEMORY_VS_LOG)
    broken = dataclasses.replace(
        persona,
        cases=(
            dataclasses.replace(case, targets=("no such marker anywhere",)),
            dataclasses.replace(case, id="swapped", targets=case.rivals, rivals=case.targets),
            dataclasses.replace(memory, id="mswap", targets=memory.rivals, rivals=memory.targets),
        ),
    )
    problems = recency.validate([broken])
    assert any("found 0 times" in p for p in problems)
    assert any("swapped" in p and "not newer" in p for p in problems)
    assert any("mswap" in p and "must be in dated logs" in p for p in problems)
    assert any("mswap" in p and "must be in MEMORY.md" in p for p in problems)
