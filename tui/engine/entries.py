"""What a memory file is made of: its entries, its lines, and the text edits the store makes.

Pure functions over a file's text, no I/O: :class:`~tui.engine.store.MemoryStore` reads and
writes the files and hands their text here. Lines are split on ``\\n`` only and every edit
keeps each byte it does not touch (CRLF, a BOM, U+2028 inside a line).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .fileio import printable
from .markdown import is_fence, is_heading, match_bullet
from .memory_lines import memory_lines
from .metadata import EntryMeta, split_meta, with_meta
from .workspace import MEMORY_FILE
from .written_text import clean_written_text

MEMORY_TEMPLATE = "# Long-term Memory\n\n"


@dataclass(frozen=True)
class MemoryEntry:
    """One entry of a memory file: a bullet with its indented continuation lines, or a plain line.

    ``start``/``end`` are 1-based line numbers; ``raw`` the lines as written (with metadata);
    ``text`` the visible text, bullet marker removed, lines joined by newlines.
    """

    path: str
    start: int
    end: int
    raw: tuple[str, ...]
    text: str
    meta: EntryMeta | None = None

    @property
    def active(self) -> bool:
        """False once forgotten or superseded."""
        return self.meta is None or self.meta.active

    @property
    def entry_id(self) -> str | None:
        return self.meta.id if self.meta else None


def split_lines(text: str) -> list[str]:
    """Lines of ``text`` with their endings: split on ``\\n`` only (a CR before it and U+2028
    inside a line stay part of the line), so joining them gives ``text`` back exactly."""
    pieces = text.split("\n")
    lines = [piece + "\n" for piece in pieces[:-1]]
    return lines + [pieces[-1]] if pieces[-1] else lines


def line_body(line: str) -> str:
    """A line from :func:`split_lines` without its ending (``\\n`` or ``\\r\\n``)."""
    line = line[:-1] if line.endswith("\n") else line
    return line[:-1] if line.endswith("\r") else line


def file_lines(text: str) -> list[str]:
    """The lines entries are numbered by (:func:`parse_entries`): split on ``\\n`` only."""
    return [line_body(line) for line in split_lines(text)]


def parse_entries(text: str, path: str = "MEMORY.md") -> list[MemoryEntry]:
    """Split a memory file into entries (headings, blank lines, fenced code and lines that say
    nothing, see :mod:`tui.engine.memory_lines`, are not entries).

    Lines are split on ``\\n`` only; ``raw`` keeps each line's bytes as decoded (see
    :func:`tui.engine.fileio.decode_exact`), ``text`` is safe to show and send.
    """
    entries: list[MemoryEntry] = []
    lines = file_lines(text)
    read = list(memory_lines(lines))
    index = 0
    in_fence = False
    while index < len(lines):
        raw = lines[index]
        visible, meta = read[index].text, read[index].meta
        if is_fence(visible):
            in_fence = not in_fence
            index += 1
            continue
        if in_fence or not visible.strip() or is_heading(visible):
            index += 1
            continue
        bullet = match_bullet(visible)
        block = [raw]
        texts = [visible[bullet.end() :] if bullet else visible.strip()]
        if bullet:
            indent = len(bullet.group(1))
            while index + 1 < len(lines):
                nxt = lines[index + 1]
                nxt_visible = read[index + 1].text
                nxt_indent = len(nxt_visible) - len(nxt_visible.lstrip())
                if not nxt_visible.strip() or nxt_indent <= indent:
                    break
                if match_bullet(nxt_visible) and nxt_indent <= indent:
                    break
                block.append(nxt)
                texts.append(nxt_visible.strip())
                index += 1
        start = index - len(block) + 2
        text_shown = printable("\n".join(texts).strip())
        entries.append(MemoryEntry(path, start, index + 1, tuple(block), text_shown, meta))
        index += 1
    return entries


def normalize_entry_text(text: str) -> str:
    """Lower-cased words only: how entries are compared for duplicates."""
    return " ".join(re.findall(r"\w+", text.lower()))


def format_entry(content: str, meta: EntryMeta) -> str:
    """A MEMORY.md bullet carrying ``meta``; extra lines of ``content`` become indented
    continuations. ``content`` (from a client or the model) goes through
    :func:`clean_written_text` first."""
    cleaned = clean_written_text(content).text
    lines = [line.rstrip() for line in cleaned.strip().splitlines() if line.strip()]
    first = lines[0].lstrip("-*+ ").strip() if lines else ""
    return "- " + with_meta(first, meta) + "".join(f"\n  {line.strip()}" for line in lines[1:])


def has_tag(text: str, key: str, value: str) -> bool:
    """True when a line of ``text`` carries metadata with ``key=value``."""
    if value not in text:
        return False
    for line in text.splitlines():
        _, meta = split_meta(line)
        if meta is not None and meta.extra.get(key) == value:
            return True
    return False


def append_entries(text: str, entries: Sequence[str]) -> str:
    """``text`` with ``entries`` added at the end, in the file's own line endings."""
    base = text if text.strip() else MEMORY_TEMPLATE
    newline = newline_of(base)
    if not base.endswith("\n"):
        base += newline
    return base + "".join(entry.replace("\n", newline) + newline for entry in entries)


def newline_of(text: str) -> str:
    """The line ending most of ``text``'s lines have."""
    crlf = text.count("\r\n")
    return "\r\n" if crlf > text.count("\n") - crlf else "\n"


def insert_lines(
    text: str, lines: list[str], at: int, new: Sequence[str], *, unterminated: bool = False
) -> str:
    """``text`` (split as ``lines``) with the line bodies ``new`` inserted before line ``at``,
    in the file's own line endings; every other byte is kept. ``unterminated``: the last new
    line gets no line ending when it ends a file that ends with one (as it was written)."""
    newline = newline_of(text)
    added = [body + newline for body in new]
    if unterminated and at == len(lines) and (not text or text.endswith("\n")):
        added[-1] = new[-1]
    lines = list(lines)
    if at == len(lines) and lines and not lines[-1].endswith("\n"):
        lines[-1] += newline  # the last line had no ending: the entry goes on a line of its own
    if at == 0 and lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]  # the byte-order mark stays at the very start
        added[0] = "\ufeff" + added[0]
    return "".join([*lines[:at], *added, *lines[at:]])


def find_block(lines: list[str], entry: MemoryEntry) -> int | None:
    """Where ``entry.raw`` is in ``lines`` (bodies) now: its recorded place, else the nearest match."""
    size = len(entry.raw)
    expected = entry.start - 1
    if lines[expected : expected + size] == list(entry.raw):
        return expected
    matches = [i for i in range(len(lines) - size + 1) if lines[i : i + size] == list(entry.raw)]
    return min(matches, key=lambda i: abs(i - expected)) if matches else None


def retire_in_text(
    text: str, chosen: Sequence[MemoryEntry], state: str, done: list[MemoryEntry]
) -> str:
    """Remove MEMORY.md entries, or mark daily-log entries ``state=...``; ``done`` gets those found.

    Only the lines of the chosen entries change; every other byte is kept.
    """
    done.clear()
    lines = split_lines(text)
    bodies = [line_body(line) for line in lines]
    for entry in sorted(chosen, key=lambda e: -e.start):
        at = find_block(bodies, entry)
        if at is None:
            continue
        done.append(entry)
        if entry.path == MEMORY_FILE:
            del lines[at : at + len(entry.raw)]
            del bodies[at : at + len(entry.raw)]
        else:
            for offset, raw in enumerate(entry.raw):
                ending = lines[at + offset][len(raw) :]
                lines[at + offset] = mark_line(raw, state) + ending
                bodies[at + offset] = line_body(lines[at + offset])
    return "".join(lines)


def mark_line(raw: str, state: str) -> str:
    """``raw`` with its metadata's state set (a comment is added to lines without one)."""
    visible, meta = split_meta(raw)
    if not visible.strip():
        return raw
    return with_meta(visible, (meta or EntryMeta()).with_state(state))
