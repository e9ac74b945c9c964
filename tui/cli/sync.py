"""``memdeck sync``: pull and push the memory's history to the configured remote."""

from __future__ import annotations

from .registry import Command

COMMANDS: dict[str, Command] = {}
