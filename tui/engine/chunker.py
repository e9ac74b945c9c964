"""Markdown-aware chunking into memory units sized for the embedding model's window.

A file is split on headings, then into entries: a bullet with its nested lines, a paragraph, a
code fence. By default every entry is its own retrievable **unit** (``ChunkParams.units``):
embedded and full-text indexed with its heading path (whose first level in a daily log is its
date), pointing at its own lines. A daily-log unit is also full-text indexed with the entry
before it (its ``context``, in a column of its own that bm25 weighs less: the entry that holds
the words ranks above the one after it), never embedded with it. An entry longer than ``target_tokens`` word-pieces
is split by lines, and a line longer than that by words. A heading with nothing under it is a
unit of its own. With ``units=False`` entries are packed into ~``target_tokens`` windows with
~16% overlap instead (kept for the benchmarks' comparison).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date

from .markdown import is_fence, match_bullet, parse_heading
from .memory_lines import memory_lines
from .metadata import CONFIDENCE_LEVELS, EntryMeta
from .workspace import date_for_path

#: ``date`` under another name, for a field beside one called ``date``.
Day = date

TokenCounter = Callable[[Sequence[str]], list[int]]


@dataclass(frozen=True)
class ChunkParams:
    """Chunk size and overlap in word-pieces. all-MiniLM-L6-v2 reads 256 including [CLS]/[SEP]."""

    target_tokens: int = 200
    overlap_tokens: int = 32
    #: One unit per entry (True) or entries packed into overlapping windows (False).
    units: bool = True
    #: Units of daily logs: how many preceding entries of the same section are full-text
    #: indexed with a unit, weighed by ``SearchOptions.context_weight`` (a log is a narrative;
    #: MEMORY.md's entries stand alone).
    context_entries: int = 1

    @property
    def fingerprint(self) -> str:
        if self.units:
            return f"md-units-v5:{self.target_tokens}/{self.context_entries}"
        return f"md-v2:{self.target_tokens}/{self.overlap_tokens}"


@dataclass(frozen=True)
class Chunk:
    """A searchable piece of a memory file."""

    path: str
    start_line: int
    end_line: int
    heading: str
    text: str
    date: date | None
    confidence: str
    entry_ids: tuple[str, ...] = ()
    #: Text that is full-text indexed with the unit (at a lower weight) but is not part of it,
    #: nor of its embedding: the entries before it in a daily log.
    context: str = ""
    #: When its entry was written or last changed, as its metadata says (``at=``): what dates
    #: a MEMORY.md entry, which ``date`` leaves evergreen.
    written: Day | None = None

    @property
    def embed_text(self) -> str:
        """What is embedded, and full-text indexed as the unit's own words (see
        :func:`embed_text`); :attr:`context` is indexed beside it."""
        return embed_text(self.heading, self.text)


def embed_text(heading: str, text: str) -> str:
    """A unit's text with its heading path in front.

    A chunk that starts with its own heading only needs the parent headings in front.
    """
    path = heading
    if text.lstrip().startswith("#"):
        path = " > ".join(heading.split(" > ")[:-1])
    return "\n".join(part for part in (path, text) if part)


@dataclass
class _Block:
    start: int
    end: int
    lines: list[str]
    heading: str
    confidence: str | None = None
    entry_ids: list[str] = field(default_factory=list)
    is_heading: bool = False
    #: A heading's level (1-6); 0 for other blocks.
    level: int = 0
    tokens: int = 0
    #: The newest ``at=`` of the entries' metadata.
    written: date | None = None

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def _newest(a: date | None, b: date | None) -> date | None:
    return b if a is None else a if b is None else max(a, b)


def _max_confidence(a: str | None, b: str | None) -> str | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b, key=CONFIDENCE_LEVELS.index)


def _meta_confidence(meta: EntryMeta | None) -> str | None:
    """What metadata says of an entry's confidence: its ``conf``, else medium when an app
    extracted it (``src=auto``), else nothing (a line the user wrote)."""
    if meta is None:
        return None
    if meta.confidence:
        return meta.confidence
    return "medium" if meta.source and meta.source != "user" else None


def _parse_blocks(text: str, default_confidence: str) -> list[_Block]:
    """Blocks of a file. An entry without metadata is the user's (``default_confidence``),
    unless it sits under a heading whose metadata says an app wrote the section."""
    blocks: list[_Block] = []
    #: The open headings: (level, title, confidence their metadata gives their section).
    headings: list[tuple[int, str, str | None]] = []
    current: _Block | None = None
    bullet_indent = -1
    in_fence = False

    def heading_path() -> str:
        return " > ".join(title for _, title, _ in headings)

    def section_confidence() -> str | None:
        return headings[-1][2] if headings else None

    def close() -> None:
        nonlocal current, bullet_indent
        if current is not None and current.lines:
            blocks.append(current)
        current = None
        bullet_indent = -1

    for number, line in enumerate(memory_lines(text.splitlines()), start=1):
        visible, meta = line.text, line.meta
        if meta is not None and not meta.active:
            # Forgotten or superseded entries are kept in the file for the record but never indexed.
            continue
        if in_fence:
            assert current is not None
            current.lines.append(visible)
            current.end = number
            if is_fence(visible):
                in_fence = False
                close()
            continue
        if not visible.strip():
            close()
            continue
        heading = parse_heading(visible)
        if heading:
            close()
            level, title = heading
            headings[:] = [h for h in headings if h[0] < level]
            headings.append((level, title, _meta_confidence(meta) or section_confidence()))
            blocks.append(
                _Block(
                    number,
                    number,
                    [visible],
                    heading_path(),
                    confidence=section_confidence(),
                    is_heading=True,
                    level=level,
                )
            )
            continue
        if is_fence(visible):
            close()
            current = _Block(
                number, number, [visible], heading_path(), confidence=section_confidence()
            )
            in_fence = True
            continue
        bullet = match_bullet(visible)
        indent = len(visible) - len(visible.lstrip())
        starts_block = current is None or (
            bullet is not None and (bullet_indent < 0 or indent <= bullet_indent)
        )
        if starts_block:
            close()
            current = _Block(number, number, [], heading_path(), confidence=section_confidence())
            bullet_indent = indent if bullet is not None else -1
        assert current is not None
        current.lines.append(visible)
        current.end = number
        if meta is not None:
            own = _meta_confidence(meta)
            if own is not None:
                first_line = len(current.lines) == 1
                current.confidence = own if first_line else _max_confidence(current.confidence, own)
            if meta.id:
                current.entry_ids.append(meta.id)
            if meta.at is not None:
                current.written = _newest(current.written, meta.at)
    close()
    for block in blocks:
        if block.confidence is None:
            block.confidence = default_confidence
    return blocks


def _split_oversized(block: _Block, count: TokenCounter, target: int) -> list[_Block]:
    """Split a block bigger than the target by lines, and a line bigger than it by words."""
    pieces: list[_Block] = []
    line_tokens = count(block.lines)
    current: _Block | None = None
    for offset, (line, tokens) in enumerate(zip(block.lines, line_tokens, strict=True)):
        number = block.start + offset
        if tokens > target:
            if current is not None:
                pieces.append(current)
                current = None
            for part in _split_line(line, count, target):
                pieces.append(
                    _Block(
                        number,
                        number,
                        [part],
                        block.heading,
                        block.confidence,
                        list(block.entry_ids),
                        written=block.written,
                    )
                )
            continue
        if current is not None and current.tokens + tokens > target:
            pieces.append(current)
            current = None
        if current is None:
            current = _Block(
                number,
                number,
                [],
                block.heading,
                block.confidence,
                list(block.entry_ids),
                written=block.written,
            )
        current.lines.append(line)
        current.end = number
        current.tokens += tokens
    if current is not None:
        pieces.append(current)
    for piece in pieces:
        piece.tokens = count([piece.text])[0]
    return pieces


def _split_line(line: str, count: TokenCounter, target: int) -> list[str]:
    # Whitespace-free scripts (CJK) fall back to characters.
    words = line.split(" ") if " " in line.strip() else list(line)
    joiner = " " if " " in line.strip() else ""
    parts: list[str] = []
    lo = 0
    while lo < len(words):
        # Grow a window by doubling, then bisect, so a huge line costs O(log n) counts per part.
        hi = lo + 1
        step = 16
        while (
            hi < len(words)
            and count([joiner.join(words[lo : min(hi + step, len(words))])])[0] <= target
        ):
            hi = min(hi + step, len(words))
            step *= 2
        low, high = hi, min(hi + step, len(words))
        while low < high:
            mid = (low + high + 1) // 2
            if count([joiner.join(words[lo:mid])])[0] <= target:
                low = mid
            else:
                high = mid - 1
        hi = max(low, lo + 1)
        parts.append(joiner.join(words[lo:hi]))
        lo = hi
    return parts


def chunk_markdown(
    text: str,
    path: str,
    count: TokenCounter,
    params: ChunkParams = ChunkParams(),
) -> list[Chunk]:
    """Chunk one Markdown file. ``path`` is workspace-relative; ``count`` counts word-pieces."""
    default_confidence = "high"
    blocks = _parse_blocks(text, default_confidence)
    if not blocks:
        return []
    for block, tokens in zip(blocks, count([b.text for b in blocks]), strict=True):
        block.tokens = tokens
    day = date_for_path(path)
    target = params.target_tokens

    sized: list[_Block] = []
    for block in blocks:
        sized.extend(_split_oversized(block, count, target) if block.tokens > target else [block])
    if params.units:
        return _units(sized, path, day, default_confidence, params)

    chunks: list[Chunk] = []
    group: list[_Block] = []
    new_since_emit = False

    def emit() -> None:
        if not group or not new_since_emit:
            return
        confidence = None
        written: date | None = None
        ids: list[str] = []
        content = [b for b in group if not b.is_heading] or group
        for block in content:
            confidence = _max_confidence(confidence, block.confidence)
            written = _newest(written, block.written)
            ids.extend(i for i in block.entry_ids if i not in ids)
        chunks.append(
            Chunk(
                path=path,
                start_line=group[0].start,
                end_line=group[-1].end,
                heading=group[-1].heading,
                text="\n".join(block.text for block in group),
                date=day,
                confidence=confidence or default_confidence,
                entry_ids=tuple(ids),
                written=written,
            )
        )

    for block in sized:
        if block.is_heading:
            if group and all(b.is_heading for b in group):
                group.append(block)  # "# Title" then "## Pets": one chunk covers both headings
                continue
            emit()
            group = [block]
            new_since_emit = False
            continue
        total = sum(b.tokens for b in group)
        # Headings alone stay with the block under them, even past the target: emitting
        # nothing and carrying no heading would leave them in no chunk.
        if group and total + block.tokens > target and not all(b.is_heading for b in group):
            emit()
            # Carry trailing blocks as overlap, but only whole blocks and never past the budget.
            carried: list[_Block] = []
            budget = params.overlap_tokens
            for previous in reversed(group):
                if previous.is_heading or previous.tokens > budget:
                    break
                carried.insert(0, previous)
                budget -= previous.tokens
            group = carried
            while group and sum(b.tokens for b in group) + block.tokens > target:
                group.pop(0)
        group.append(block)
        new_since_emit = True
    if group and all(b.is_heading for b in group):
        new_since_emit = True  # trailing headings with nothing under them still deserve a chunk
    emit()
    return chunks


def _has_content(blocks: list[_Block], position: int) -> bool:
    """True when an entry or a deeper heading follows the heading at ``position``."""
    level = blocks[position].level
    for block in blocks[position + 1 :]:
        if not block.is_heading:
            return True
        if block.level <= level:
            return False
    return False


def _units(
    blocks: list[_Block],
    path: str,
    day: date | None,
    default_confidence: str,
    params: ChunkParams,
) -> list[Chunk]:
    """One chunk per entry; a heading is a unit only when nothing sits under it."""
    chunks: list[Chunk] = []
    section: list[_Block] = []
    for position, block in enumerate(blocks):
        if block.is_heading:
            section = []
            if _has_content(blocks, position):
                continue
        context = ""
        if params.context_entries and day is not None and not block.is_heading:
            context = "\n".join(b.text for b in section[-params.context_entries :])
            section.append(block)
        chunks.append(
            Chunk(
                path=path,
                start_line=block.start,
                end_line=block.end,
                heading=block.heading,
                text=block.text,
                date=day,
                confidence=block.confidence or default_confidence,
                entry_ids=tuple(dict.fromkeys(block.entry_ids)),
                context=context,
                written=block.written,
            )
        )
    return chunks
