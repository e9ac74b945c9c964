"""The code stays in pieces a reader can hold: issue 30's limits, kept by a test."""

from __future__ import annotations

from support.chat_support import ROOT

#: No module of the package is longer than this (lines).
MODULE_LIMIT = 600
#: The main screen composes the desk and mirrors its state; its work lives elsewhere.
MAIN_SCREEN_LIMIT = 500


def line_count(relative: str) -> int:
    return len((ROOT / relative).read_text(encoding="utf-8").splitlines())


def test_no_module_is_over_the_limit() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in (ROOT / "tui").rglob("*.py")
    }
    assert len(sizes) > 50  # the whole package was read
    assert {path: n for path, n in sizes.items() if n > MODULE_LIMIT} == {}


def test_the_main_screen_is_under_its_limit() -> None:
    assert line_count("tui/app/screens/main_screen.py") <= MAIN_SCREEN_LIMIT
