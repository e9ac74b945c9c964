"""The usage ledger: one JSON line per model call in ``.memdeck/usage.jsonl``.

Every chat turn, flush, consolidation and remote embedding request appends a record::

    {"time": "2026-11-23T07:50:00+00:00", "purpose": "chat", "model": "gpt-4o-mini",
     "session": "2026-11-23-abc", "prompt_tokens": 812, "completion_tokens": 64}

A server that reports no usage is recorded with ``null`` token counts (unknown, not zero).
The file is append-only; :func:`summary` totals it per purpose and model for today and this
month, with a cost where a price per million tokens is known for the model.
"""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from .fileio import open_own_file, open_own_reader
from .workspace import STATE_DIR

__all__ = ["LEDGER_FILE", "ledger_path", "read", "read_counted", "record", "summary"]

LEDGER_FILE = "usage.jsonl"


def ledger_path(root: Path | str) -> Path:
    """The ledger of the workspace at ``root``."""
    return Path(root) / STATE_DIR / LEDGER_FILE


def _tokens(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def record(
    root: Path | str,
    *,
    purpose: str,
    model: str | None,
    prompt_tokens: int | None,
    completion_tokens: int | None,
    session: str | None = None,
    when: datetime | None = None,
) -> dict[str, Any]:
    """Append one call to the ledger of the workspace at ``root`` and return the record.

    ``None`` token counts mean the server did not say. Never raises for an I/O problem: usage
    accounting must not break a chat turn (the record is still returned).
    """
    entry = {
        "time": (when or datetime.now().astimezone()).isoformat(timespec="seconds"),
        "purpose": purpose,
        "model": model,
        "session": session,
        "prompt_tokens": _tokens(prompt_tokens),
        "completion_tokens": _tokens(completion_tokens),
    }
    path = ledger_path(root)
    line = (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_own_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, line)  # one write with O_APPEND: lines never interleave
        finally:
            os.close(fd)
    except OSError:
        pass
    return entry


#: Token counts above this are not a real call (a corrupt or hand-edited line).
MAX_TOKENS = 10**12


def read(root: Path | str) -> Iterator[dict[str, Any]]:
    """The ledger's valid records, oldest first (see :func:`read_counted`)."""
    records, _skipped = read_counted(root)
    yield from records


def read_counted(root: Path | str) -> tuple[list[dict[str, Any]], int]:
    """The ledger's records, oldest first, and how many lines were skipped: lines that are not
    JSON objects, with a time that is no date (or out of range in local time), or with token
    counts that are not finite non-negative numbers (``Infinity``, ``NaN``, ``1e400``)."""
    path = ledger_path(root)
    try:
        handle = io.TextIOWrapper(open_own_reader(path), encoding="utf-8", errors="replace")
    except OSError:
        return [], 0
    records: list[dict[str, Any]] = []
    skipped = 0
    with handle:
        for line in handle:
            if not line.strip():
                continue
            item = _checked(line)
            if item is None:
                skipped += 1
            else:
                records.append(item)
    return records, skipped


def _checked(line: str) -> dict[str, Any] | None:
    try:
        item = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(item, dict) or not isinstance(item.get("time"), str):
        return None
    if _parse_time(item["time"]) is None:
        return None
    for key in ("prompt_tokens", "completion_tokens"):
        value = item.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if not (math.isfinite(value) and 0 <= value <= MAX_TOKENS):
            return None
    return item


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text).astimezone()  # a naive time is taken as local
    except (ValueError, OverflowError, OSError):  # year 1 or 9999 shifted out of range
        return None


def _add(total: dict[str, Any], item: Mapping[str, Any]) -> None:
    total["calls"] += 1
    prompt, completion = _tokens(item.get("prompt_tokens")), _tokens(item.get("completion_tokens"))
    if prompt is None and completion is None:
        total["unknown_calls"] += 1
    for key, value in (("prompt_tokens", prompt), ("completion_tokens", completion)):
        if value is not None:
            total[key] = (total[key] or 0) + value


def _cost(row: dict[str, Any], prices: Mapping[str, Mapping[str, float]]) -> float | None:
    price = prices.get(row["model"] or "")
    if not price or row["prompt_tokens"] is None and row["completion_tokens"] is None:
        return None
    return (
        (row["prompt_tokens"] or 0) * float(price.get("input", 0.0))
        + (row["completion_tokens"] or 0) * float(price.get("output", 0.0))
    ) / 1_000_000


def summary(
    root: Path | str,
    *,
    now: datetime | None = None,
    prices: Mapping[str, Mapping[str, float]] | None = None,
) -> dict[str, Any]:
    """Totals for ``today`` and this ``month`` (local time): each a list of rows per purpose
    and model (``calls``, ``prompt_tokens``, ``completion_tokens`` — ``None`` when no call
    reported any —, ``unknown_calls``, ``cost`` or ``None``) and a ``total`` row; ``skipped``
    counts the ledger lines that could not be read."""
    now = (now or datetime.now()).astimezone()
    prices = prices or {}
    periods: dict[str, dict[tuple[str, str], dict[str, Any]]] = {"today": {}, "month": {}}
    totals = {name: _empty("*", "*") for name in periods}
    records, skipped = read_counted(root)
    for item in records:
        when = _parse_time(item["time"])
        if when is None:
            continue
        key = (str(item.get("purpose") or "?"), str(item.get("model") or "?"))
        for name, matches in (
            ("today", when.date() == now.date()),
            ("month", (when.year, when.month) == (now.year, now.month)),
        ):
            if not matches:
                continue
            _add(periods[name].setdefault(key, _empty(*key)), item)
            _add(totals[name], item)
    out: dict[str, Any] = {
        "date": now.date().isoformat(),
        "month_label": f"{now:%Y-%m}",  # "month" holds the month's rows and total
        "skipped": skipped,
    }
    for name, rows in periods.items():
        listed = [rows[k] for k in sorted(rows)]
        costs = [c for c in (_cost(r, prices) for r in listed) if c is not None]
        for row in listed:
            row["cost"] = _cost(row, prices)
        total = totals[name]
        total["cost"] = sum(costs) if costs else None
        out[name] = {"rows": listed, "total": total}
    return out


def _empty(purpose: str, model: str) -> dict[str, Any]:
    return {
        "purpose": purpose,
        "model": model,
        "calls": 0,
        "prompt_tokens": None,
        "completion_tokens": None,
        "unknown_calls": 0,
    }
