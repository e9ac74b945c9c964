"""Chunk reads of the index: the stored chunks as :class:`ChunkRow` values, by id, by date
window, or all of them in file order (what search and the panels show)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

import sqlean as sqlite3

#: ``date`` under another name, for a field beside one called ``date``.
Day = date


@dataclass(frozen=True)
class ChunkRow:
    """A chunk as stored in the index."""

    id: int
    path: str
    start_line: int
    end_line: int
    heading: str
    text: str
    date: date | None
    confidence: str
    #: When the entry was written or last changed, as its metadata says (``at=``).
    written: Day | None = None

    @property
    def location(self) -> str:
        """``path#Lstart-end``."""
        return f"{self.path}#L{self.start_line}-{self.end_line}"


_ROW_COLUMNS = "id, path, start_line, end_line, heading, text, date, confidence, written"


def _chunk_row(r: Sequence[Any]) -> ChunkRow:
    """A :class:`ChunkRow` from a row of :data:`_ROW_COLUMNS`."""
    return ChunkRow(
        r[0],
        r[1],
        r[2],
        r[3],
        r[4],
        r[5],
        date.fromisoformat(r[6]) if r[6] else None,
        r[7],
        date.fromisoformat(r[8]) if r[8] else None,
    )


class ChunkReads:
    """The chunk-reading part of :class:`~tui.engine.index.MemoryIndex` (a mixin over its
    connections: ``_reader`` gives each thread its own)."""

    _local: threading.local

    def _reader(self) -> sqlite3.Connection:
        raise NotImplementedError

    def chunks_by_id(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        """Stored chunks by id (missing ids are left out)."""
        if not ids:
            return {}
        rows = self._reader().execute(
            f"""SELECT {_ROW_COLUMNS} FROM chunks
                WHERE state = 'active' AND id IN ({",".join("?" * len(ids))})""",
            list(ids),
        )
        return {r[0]: _chunk_row(r) for r in rows}

    def contexts(self, ids: Sequence[int]) -> dict[int, str]:
        """The context each chunk is full-text indexed with (the entries before it in a daily
        log; "" for none), by id."""
        if not ids:
            return {}
        rows = self._reader().execute(
            f"SELECT id, context FROM chunks WHERE id IN ({','.join('?' * len(ids))})", list(ids)
        )
        return {r[0]: r[1] for r in rows}

    def chunk_ids_between(self, start: date, end: date, *, limit: int) -> list[int]:
        """Active chunks of daily logs dated ``start``..``end`` (inclusive), newest first."""
        rows = self._reader().execute(
            """SELECT id FROM chunks WHERE state = 'active' AND date BETWEEN ? AND ?
               ORDER BY date DESC, start_line LIMIT ?""",
            (start.isoformat(), end.isoformat(), int(limit)),
        )
        return [row[0] for row in rows]

    def iter_chunks(self, path: str | None = None) -> Iterator[ChunkRow]:
        """Every active chunk, or those of one file, in file order."""
        sql = f"SELECT {_ROW_COLUMNS} FROM chunks WHERE state = 'active'"
        args: tuple[str, ...] = ()
        if path is not None:
            sql += " AND path = ?"
            args = (path,)
        for r in self._reader().execute(sql + " ORDER BY path, start_line", args):
            yield _chunk_row(r)
