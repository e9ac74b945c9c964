"""Pilot helpers shared by the app tests."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from textual.pilot import Pilot

#: Upper bound for anything the app does in the background (a bound, not a speed test).
WAIT_S = 60.0


async def wait_until(pilot: Pilot, condition: Callable[[], bool], what: str) -> None:
    """Let the app run until ``condition`` holds; fail after :data:`WAIT_S`."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await pilot.pause(0.02)
