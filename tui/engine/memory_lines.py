"""What each line of a memory file says: the one place that decides the text of an entry.

The chunker (what is indexed and embedded), the entry parser (what is shown, forgotten and
deduplicated) and the injection's Long-term Memory block all read a file's lines through
:func:`memory_lines`. A line's :attr:`MemoryLine.text` is the line without

- memdeck's own trailing ``<!-- mem … -->`` (its metadata, :attr:`MemoryLine.meta`);
- any other HTML comment, on one line or across lines, outside code spans and fences: another
  tool's markers (``<!-- openclaw:dreaming:light:start -->``, ``<!-- trigger: … -->``);
- a trailing ``[score=… source=…]``, the provenance OpenClaw appends to a promoted entry.

Some lines say nothing (:attr:`MemoryLine.hidden`): a line that is only comments, a YAML front
matter block at the top of the file, and the key/value bullets under a session file's
``# Session: …`` title (``- **Source**: telegram``), which describe the session, not a fact
(:func:`session_header` gives them). Callers treat a hidden line as a blank one. The file's
bytes are never touched: this is how it is read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice
from typing import NamedTuple

from .markdown import is_fence, parse_heading
from .metadata import EntryMeta, split_meta

_OPEN = "<!--"
_CLOSE = "-->"
#: OpenClaw's promotion suffix: ``[score=0.861 recalls=4 avg=0.702 source=memory/x.md:3-3]``.
_SCORE_SUFFIX = re.compile(r"\[score=\d+(?:\.\d+)?(?:\s+[a-z_]+=[^\]\s]*)*\]\s*")
#: A key/value bullet of a session header: ``- **Session Key**: …`` or ``- **Source:** …``.
_HEADER_BULLET = re.compile(r"\s{0,3}[-*+]\s+\*\*([^*]{1,40}?):?\*\*:?\s")
_SESSION_TITLE = "Session:"
#: How far a front matter's closing line is looked for (a YAML header is short).
FRONT_MATTER_MAX_LINES = 100
_FRONT_MATTER_ENDS = ("---", "...")


@dataclass(frozen=True, slots=True)
class MemoryLine:
    """One line of a memory file as memdeck reads it."""

    #: The line as written.
    raw: str
    #: The line without memdeck's metadata comment (what :func:`split_meta` leaves).
    visible: str
    meta: EntryMeta | None
    #: What the line says: :attr:`visible` without other comments and provenance suffixes.
    text: str
    #: The line has characters but says nothing (comments, front matter, a session header).
    hidden: bool = False


def strip_comments(line: str, in_comment: bool = False) -> tuple[str, bool]:
    """``line`` without its HTML comments (those in code spans kept), and whether a comment is
    still open at its end: one that starts the line and runs over the lines below.
    ``in_comment``: the line starts inside one. Linear in the line."""
    if not in_comment and _OPEN not in line:
        return line, False
    out: list[str] = []
    at = 0
    #: Backtick runs this long or longer have no closing run further on.
    unclosed_from = len(line) + 1
    last_close = line.rfind(_CLOSE)
    while at < len(line):
        if in_comment:
            end = line.find(_CLOSE, at)
            if end < 0:
                break
            at = end + len(_CLOSE)
            in_comment = False
            continue
        opener = line.find(_OPEN, at)
        if opener < 0:
            out.append(line[at:])
            break
        tick = line.find("`", at, opener)
        if tick >= 0:
            run_end = tick
            while run_end < len(line) and line[run_end] == "`":
                run_end += 1
            run = run_end - tick
            close = line.find("`" * run, run_end) if run < unclosed_from else -1
            if close < 0:
                unclosed_from = min(unclosed_from, run)
                out.append(line[at:run_end])
                at = run_end
            else:
                out.append(line[at : close + run])
                at = close + run
            continue
        if last_close < opener + len(_OPEN) and (out or line[:opener].strip()):
            # Unclosed after other text: literal, as in Markdown (only a line that starts with
            # it opens a comment over the lines below, which a stray "<!--" would otherwise hide).
            out.append(line[at : opener + len(_OPEN)])
            at = opener + len(_OPEN)
            continue
        out.append(line[at:opener])
        at = opener + len(_OPEN)
        in_comment = True
    return "".join(out), in_comment


def _said(visible: str, in_comment: bool) -> tuple[str, bool]:
    """What ``visible`` says (comments and a score suffix out), and the comment state after it."""
    text, in_comment = strip_comments(visible, in_comment)
    suffix = text.rfind("[score=")
    if suffix >= 0 and _SCORE_SUFFIX.fullmatch(text, suffix):
        text = text[:suffix]
    if text is visible:
        return text, in_comment
    body = " ".join(text.split())
    indent = visible[: len(visible) - len(visible.lstrip())]
    return (indent + body if body else ""), in_comment


def _front_matter_end(lines: list[str]) -> int:
    """How many of ``lines`` (a file's first ones) are its front matter (0: none)."""
    if not lines or lines[0].removeprefix("\ufeff").rstrip() != "---":
        return 0
    for number, line in enumerate(lines[1:], start=2):
        if line.rstrip() in _FRONT_MATTER_ENDS:
            return number
    return 0


def _is_session_title(heading: tuple[int, str] | None) -> bool:
    return heading is not None and heading[0] == 1 and heading[1].startswith(_SESSION_TITLE)


def is_header_bullet(text: str) -> bool:
    """True for a session header's key/value bullet (``- **Source**: telegram``)."""
    return _HEADER_BULLET.match(text) is not None


def memory_lines(lines: Iterable[str]) -> Iterator[MemoryLine]:
    """Each of a file's lines (their bodies, no line endings) as memdeck reads it.

    Lazy: at most :data:`FRONT_MATTER_MAX_LINES` lines are read ahead, for a front matter."""
    source = iter(lines)
    head = list(islice(source, 1))
    if head and head[0].removeprefix("\ufeff").rstrip() == "---":
        for line in source:
            head.append(line)
            if line.rstrip() in _FRONT_MATTER_ENDS or len(head) > FRONT_MATTER_MAX_LINES:
                break
    front = _front_matter_end(head)
    in_fence = in_comment = False
    #: 0: before the first line that says something; 1: in a session header; 2: past it.
    header = 0
    for number, raw in enumerate(chain(head, source), start=1):
        line = raw.removeprefix("\ufeff") if number == 1 else raw
        visible, meta = split_meta(line)
        if number <= front:
            yield MemoryLine(raw, visible, meta, "", hidden=True)
            continue
        if in_fence:
            in_fence = not is_fence(visible)
            yield MemoryLine(raw, visible, meta, visible)
            continue
        text, in_comment = _said(visible, in_comment)
        hidden = not text.strip() and bool(visible.strip())
        if text.strip() and header < 2:
            heading = parse_heading(text)
            if header == 0 and _is_session_title(heading):
                header = 1
            elif header == 1 and is_header_bullet(text):
                text, hidden = "", True
            else:
                header = 2
        in_fence = is_fence(text)
        yield MemoryLine(raw, visible, meta, text, hidden)


class HeaderField(NamedTuple):
    """One line of a session file's header: its number, key and value."""

    line: int
    key: str
    value: str


def session_header(lines: Iterable[str]) -> list[HeaderField]:
    """A session file's title (key ``Session``) and key/value bullets; ``[]`` for other files."""
    found: list[HeaderField] = []
    for number, line in enumerate(memory_lines(lines), start=1):
        heading = parse_heading(line.text) if line.text.strip() else None
        if not found and _is_session_title(heading):
            assert heading is not None
            found.append(HeaderField(number, "Session", heading[1][len(_SESSION_TITLE) :].strip()))
        elif found and line.hidden and (match := _HEADER_BULLET.match(line.visible)):
            value = line.visible[match.end() :].strip()
            found.append(HeaderField(number, match.group(1).strip(), value))
        elif line.text.strip():
            break
    return found
