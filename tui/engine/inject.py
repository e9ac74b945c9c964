"""Build the memory block injected into the system prompt, under a token budget, with a report.

```
<memory-notes>
## Long-term Memory
<MEMORY.md, trimmed to its share of the budget>

## Relevant Memories
### memory/2026-11-20.md
- L12-18: ...
</memory-notes>
```

Memory is data, never instructions: the block is delimited by markers the system prompt
declares to enclose the user's notes, and any copy of a marker inside memory text is
neutralised (:func:`neutralise_markers`), so a note cannot close the block and speak as the system.

Relevant memories are packed by score until the budget is full (not a fixed count), then
shown grouped by file (MEMORY.md first, daily logs oldest first, lines in file order), each
entry with its line numbers, so a file's path is paid for once. Nothing is cut silently: the
report lists what was included, what was cut and why.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from .memory_lines import memory_lines
from .options import InjectionOptions
from .search_results import SearchResult
from .workspace import MEMORY_FILE

LONG_TERM_HEADING = "## Long-term Memory"
RELEVANT_HEADING = "## Relevant Memories"
#: Why a matched MEMORY.md entry costs nothing: the block holds MEMORY.md already.
ALWAYS_INJECTED = "always injected (in Long-term Memory)"
#: The tag of the block holding everything read from memory.
MEMORY_TAG = "memory-notes"
#: The tag of the block holding the summary of a compacted conversation.
SUMMARY_TAG = "conversation-summary"

#: Every character a reader could take for an angle bracket (NFKC forms and look-alikes).
_ANGLE_OPEN = "<\uff1c\ufe64\u2039\u3008\u27e8\u2329\u02c2\u1438\u276e\u29fc\u00ab"
_ANGLE_CLOSE = ">\uff1e\ufe65\u203a\u3009\u27e9\u232a\u02c3\u1433\u276f\u29fd\u00bb"
_OPENING = re.compile(f"[{_ANGLE_OPEN}]")
#: The tag names as :func:`_skeleton` reads them.
_MARKER_NAMES = ("memorynotes", "conversationsummary")
#: How far after a bracket a tag name is looked for (separators, spaces, invisible characters).
_NAME_REACH = 400
#: How far after the name its closing bracket is looked for (it is defused too, for looks).
_CLOSE_REACH = 200
#: Letters of other scripts (and digits) that read as the Latin letters of the tag names:
#: capitals before case folding (Greek capital Mu reads "M", its small letter "u"), then
#: small letters after.
_CAPITAL_LOOKALIKES = str.maketrans(
    "\u0391\u0395\u0399\u039c\u039d\u039f\u03a4\u03a5\u0410\u0415\u041c\u041d\u041e"
    "\u0420\u0421\u0422\u0423\u0405\u0406",
    "aeimnotyaemhopctysi",
)
_SMALL_LOOKALIKES = str.maketrans(
    "\u0430\u03b1\u0251\u0441\u03f2\u1d04\u0435\u04bd\u0456\u03b9\u0131\u0269\u04cf"
    "\u043c\u0578\u03b7\u043e\u03bf\u0585\u1d0f\u0433\u1d26\u0455\ua731\u0442\u03c4"
    "\u03c5\u057d\u1d1c\u03bd\u0475\u1d20\u0443\u03b3\u04af\u0440\u03c1\u0445\u03c7"
    "\u1d00\u1d07\u026a\u1d0d\u0274\u0280\u1d1b\u028f"  # small capitals
    "013457",
    "aaaccceeiiiiimnnoooorrssttuuuvvvyyyppxx" "aeimnrty" "oieast",
)


def _skeleton(fragment: str) -> str:
    """The Latin letters and digits a reader sees in ``fragment``: compatibility forms folded
    (full-width, mathematical letters), look-alikes of other scripts mapped, accents, case,
    invisible characters (zero-width space, word joiner), spaces and punctuation dropped."""
    folded = unicodedata.normalize("NFKC", fragment).translate(_CAPITAL_LOOKALIKES).casefold()
    letters = unicodedata.normalize("NFD", folded).translate(_SMALL_LOOKALIKES)
    return "".join(char for char in letters if char.isalnum())


def _marker_name_end(text: str, start: int) -> int | None:
    """Where a marker name that begins at ``start`` (after slashes, spaces or invisible
    characters) ends in ``text``, or None when no marker name begins there."""
    seen = ""
    for index in range(start, min(len(text), start + _NAME_REACH)):
        if text[index] in _ANGLE_CLOSE or text[index] in _ANGLE_OPEN:
            return None  # another tag (``<memory> notes``)
        seen += _skeleton(text[index])
        if seen.startswith(_MARKER_NAMES):
            return index + 1
        if not any(name.startswith(seen) for name in _MARKER_NAMES):
            return None
    return None


def neutralise_markers(text: str) -> str:
    """``text`` with every look-alike of a block marker defused: the bracket that opens it
    becomes a parenthesis (``</memory-notes>`` → ``(/memory-notes)``), visible and unable to
    open or close a block. A look-alike is any bracket followed by a tag name as a reader
    would see it (:func:`_skeleton`): with invisible characters, letters of other scripts,
    full-width forms, spaces or a line break in it, with or without its closing bracket."""
    if not _OPENING.search(text):
        return text
    pieces: list[str] = []
    done = 0
    for match in _OPENING.finditer(text):
        if match.start() < done:
            continue
        end = _marker_name_end(text, match.end())
        if end is None:
            continue
        pieces.append(text[done : match.start()] + "(")
        done = match.end()
        for index in range(end, min(len(text), end + _CLOSE_REACH)):
            char = text[index]
            if char in _ANGLE_OPEN or char == "\n":
                break
            if char in _ANGLE_CLOSE:
                pieces.append(text[done:index] + ")")
                done = index + 1
                break
    pieces.append(text[done:])
    return "".join(pieces)


def delimited_block(tag: str, body: str) -> str:
    """``body`` between ``<tag>`` and ``</tag>`` with any marker inside it neutralised."""
    return f"<{tag}>\n{neutralise_markers(body)}\n</{tag}>"


@dataclass(frozen=True)
class InjectedItem:
    """Something the builder included or cut."""

    kind: str  # "long-term" or "relevant"
    location: str
    tokens: int
    score: float | None = None
    reason: str = ""


@dataclass
class InjectionReport:
    """What went into the block and what did not, and why."""

    budget: int
    tokens_used: int = 0
    included: list[InjectedItem] = field(default_factory=list)
    cut: list[InjectedItem] = field(default_factory=list)
    memory_tokens: int = 0
    memory_total_tokens: int = 0
    memory_truncated: bool = False
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "budget": self.budget,
            "tokens_used": self.tokens_used,
            "memory_tokens": self.memory_tokens,
            "memory_total_tokens": self.memory_total_tokens,
            "memory_truncated": self.memory_truncated,
            "included": [item.__dict__ for item in self.included],
            "cut": [item.__dict__ for item in self.cut],
            "notes": self.notes,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> InjectionReport:
        """The report :meth:`to_json` wrote (a transcript's record of a turn); unknown or
        missing fields fall back to their defaults."""

        def items(key: str) -> list[InjectedItem]:
            raw = data.get(key)
            fields = InjectedItem.__dataclass_fields__
            return [
                InjectedItem(**{k: v for k, v in item.items() if k in fields})
                for item in (raw if isinstance(raw, list) else [])
                if isinstance(item, dict)
            ]

        def number(key: str) -> int:
            value = data.get(key, 0)
            return int(value) if isinstance(value, int | float) else 0

        notes = data.get("notes")
        return cls(
            budget=number("budget"),
            tokens_used=number("tokens_used"),
            included=items("included"),
            cut=items("cut"),
            memory_tokens=number("memory_tokens"),
            memory_total_tokens=number("memory_total_tokens"),
            memory_truncated=bool(data.get("memory_truncated")),
            notes=[str(n) for n in notes] if isinstance(notes, list) else [],
        )


@dataclass
class Injection:
    """The text to put in the system prompt and its report."""

    text: str
    report: InjectionReport
    #: The search results that went into the block, best first (with their score breakdown);
    #: a matched MEMORY.md entry is one of them (it is in the block as Long-term Memory).
    results: list[SearchResult] = field(default_factory=list)


@dataclass
class MeasuredMemory:
    """MEMORY.md's visible lines as far as they were read, with their token counts."""

    lines: list[tuple[int, str]]
    tokens: list[int]
    #: Exact when every line was read, else counted + an estimate of the rest.
    total_tokens: int
    #: The number of the last visible line of the file.
    last_line: int


def measure_memory(
    memory_text: str, count_tokens: Callable[[str], int], limit: int
) -> MeasuredMemory:
    """MEMORY.md's visible lines (its title and inactive entries left out, markers
    neutralised) with their token counts, read only until they pass ``limit`` tokens, the most
    the block can ever hold: the cost follows what can be packed, not the file's size. The
    total of a file read part-way is extrapolated from the characters left."""
    lines: list[tuple[int, str]] = []
    tokens: list[int] = []
    total = chars = read_chars = 0
    title_checked = False
    for number, line in enumerate(memory_lines(_lines_lazily(memory_text)), start=1):
        raw_line = line.raw
        read_chars += len(raw_line) + 1
        if line.hidden or (line.meta is not None and not line.meta.active):
            continue
        text = neutralise_markers(line.text)
        if not title_checked and text.strip():
            title_checked = True
            if text.startswith("# "):
                # Its title ("# Long-term Memory") would repeat the block's heading one level up.
                lines.clear()
                tokens.clear()
                total = chars = 0
                continue
        count = count_tokens(text) + 1
        lines.append((number, text))
        tokens.append(count)
        total += count
        chars += len(raw_line) + 1
        if total > limit:
            rest = max(0, len(memory_text) - read_chars)
            # The last line's number, counted without copying the rest (trailing breaks aside).
            end = len(memory_text.rstrip("\n")) if memory_text.endswith("\n") else len(memory_text)
            last = (
                number + memory_text.count("\n", read_chars, end) + (1 if end > read_chars else 0)
            )
            return MeasuredMemory(lines, tokens, total + round(rest * total / chars), last)
    while lines and not lines[-1][1].strip():
        lines.pop()
        total -= tokens.pop()
    return MeasuredMemory(lines, tokens, total, lines[-1][0] if lines else 0)


def _lines_lazily(text: str, first: int = 1 << 16) -> Iterator[str]:
    """``text.splitlines()``, split a growing prefix at a time (a caller that stops early does
    not pay for the whole text)."""
    start, size = 0, first
    while start < len(text):
        end = text.find("\n", start + size)
        piece = text[start:] if end < 0 else text[start : end + 1]
        yield from piece.splitlines()
        start += len(piece)
        size *= 4


def format_relevant(result: SearchResult) -> str:
    """One entry of a ``## Relevant Memories`` group: ``- Lx-y: text``, continuation lines indented."""
    lines = [line for line in result.text.strip().splitlines() if line.strip()]
    head = lines[0].strip() if lines else ""
    if head[:2] in ("- ", "* ", "+ "):
        head = head[2:]
    rest = "".join(f"\n  {line}" for line in lines[1:])
    span = f"L{result.start_line}"
    if result.end_line != result.start_line:
        span += f"-{result.end_line}"
    return f"- {span}: {head}{rest}"


def group_heading(path: str) -> str:
    """The sub-heading that opens one file's entries in ``## Relevant Memories``."""
    return f"### {path}"


def _group_order(path: str) -> tuple[int, str]:
    return (0 if path == MEMORY_FILE else 1, path)


def build_injection(
    memory_text: str,
    results: Sequence[SearchResult],
    count_tokens: Callable[[str], int],
    options: InjectionOptions = InjectionOptions(),
) -> Injection:
    """Assemble the injected block from MEMORY.md's text and ranked search results."""
    budget = options.budget_tokens
    report = InjectionReport(budget=budget)
    header_cost = (
        count_tokens(LONG_TERM_HEADING)
        + count_tokens(RELEVANT_HEADING)
        + count_tokens(delimited_block(MEMORY_TAG, ""))
        + 4
    )
    available = max(0, budget - header_cost)
    measured = measure_memory(memory_text, count_tokens, available)
    memory_lines, line_tokens = measured.lines, measured.tokens
    report.memory_total_tokens = measured.total_tokens
    relevant_items = [(r, neutralise_markers(format_relevant(r))) for r in results]
    relevant_cost = [count_tokens(text) + 1 for _, text in relevant_items]
    memory_allowance = available
    if report.memory_total_tokens + sum(relevant_cost) > available:
        memory_allowance = max(
            int(available * options.memory_share), available - sum(relevant_cost)
        )

    kept_lines: list[tuple[int, str]] = []
    used = 0
    for (number, text), tokens in zip(memory_lines, line_tokens, strict=True):
        if used + tokens > memory_allowance:
            report.memory_truncated = True
            break
        kept_lines.append((number, text))
        used += tokens
    report.memory_tokens = used
    last_kept = kept_lines[-1][0] if kept_lines else 0
    if kept_lines:
        report.included.append(InjectedItem("long-term", f"MEMORY.md#L1-{last_kept}", used))
    if report.memory_truncated:
        dropped = report.memory_total_tokens - used
        share = f"{used} of {report.memory_total_tokens} tokens"
        report.cut.append(
            InjectedItem(
                "long-term",
                f"MEMORY.md#L{last_kept + 1}-{measured.last_line}",
                dropped,
                reason=f"MEMORY.md truncated: {share} fit its share of the budget"
                if kept_lines
                else "MEMORY.md left out: not one line fits its share of the budget",
            )
        )
        report.notes.append(
            (
                f"MEMORY.md truncated to lines 1-{last_kept} ({share})"
                if kept_lines
                else f"MEMORY.md left out (its share of the budget holds none of its "
                f"{report.memory_total_tokens} tokens)"
            )
            + ("; the rest is" if kept_lines else "; its entries are")
            + " still reachable through search"
        )

    remaining = available - used
    groups: dict[str, list[tuple[SearchResult, str]]] = {}
    packed: list[SearchResult] = []
    for (result, text), entry_tokens in zip(relevant_items, relevant_cost, strict=True):
        if result.path == MEMORY_FILE and result.end_line <= last_kept:
            packed.append(result)  # in the block already: shown and counted, at no cost
            report.included.append(
                InjectedItem("relevant", result.location, 0, result.score, ALWAYS_INJECTED)
            )
            continue
        tokens = entry_tokens
        if result.path not in groups:
            tokens += count_tokens(group_heading(result.path)) + 2
        if tokens > remaining:
            report.cut.append(
                InjectedItem(
                    "relevant",
                    result.location,
                    tokens,
                    result.score,
                    f"over budget: needs {tokens} tokens, {remaining} left",
                )
            )
            continue
        groups.setdefault(result.path, []).append((result, text))
        packed.append(result)
        remaining -= tokens
        report.included.append(InjectedItem("relevant", result.location, tokens, result.score))
    relevant_lines: list[str] = []
    for path in sorted(groups, key=_group_order):
        relevant_lines.append(group_heading(path))
        entries = sorted(groups[path], key=lambda item: item[0].start_line)
        relevant_lines.extend(text for _, text in entries)

    parts = []
    if kept_lines:
        parts.append(LONG_TERM_HEADING + "\n" + "\n".join(text for _, text in kept_lines).strip())
    if relevant_lines:
        parts.append(RELEVANT_HEADING + "\n" + "\n".join(relevant_lines))
    text = delimited_block(MEMORY_TAG, "\n\n".join(parts)) if parts else ""
    report.tokens_used = count_tokens(text) if text else 0
    return Injection(text=text, report=report, results=packed)
