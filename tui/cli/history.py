"""``memdeck history`` and ``memdeck revert``: the memory's git history from a shell."""

from __future__ import annotations

from .registry import Command

COMMANDS: dict[str, Command] = {}
