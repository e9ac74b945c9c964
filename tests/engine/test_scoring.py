"""Search scoring arithmetic: decay and the hybrid merge."""

from __future__ import annotations

from datetime import date

import pytest

from tui.engine.options import SearchOptions
from tui.engine.search import decay_factor, hybrid_score


def test_decay_halves_every_half_life_and_spares_evergreen() -> None:
    now = date(2026, 11, 22)
    assert decay_factor(None, now, 30) == 1.0
    assert decay_factor(now, now, 30) == 1.0
    assert decay_factor(date(2026, 10, 23), now, 30) == pytest.approx(0.5)
    assert decay_factor(date(2026, 9, 23), now, 30) == pytest.approx(0.25)
    assert decay_factor(date(2027, 1, 1), now, 30) == 1.0  # future-dated logs are not boosted


def test_hybrid_weights_are_normalised() -> None:
    options = SearchOptions(vector_weight=7, text_weight=3)
    assert hybrid_score(1.0, 0.0, options) == pytest.approx(0.7)
    assert hybrid_score(0.5, 0.5, options) == pytest.approx(0.5)
    assert hybrid_score(None, 0.4, options) == pytest.approx(0.4)  # BM25-only mode
