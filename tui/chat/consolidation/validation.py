"""The checks a model's answer and the proposal made from it must pass. Each raises
:class:`~tui.chat.consolidation.proposal.ProposalRefused` with a reason the user can read, or
returns a note; none reads a file."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from ...engine.entries import line_body, split_lines
from ...engine.managed_regions import managed_regions
from ...engine.markdown import is_list_item, parse_heading, unwrap_fenced_document
from ...engine.metadata import split_meta
from ...engine.store import MemoryEntry, parse_entries
from .proposal import EntryChange, ProposalRefused

#: A proposal keeping fewer than this share of MEMORY.md's non-blank lines is refused.
MIN_KEPT_LINES = 0.5


def extract_document(answer: str) -> str:
    """The Markdown document in a model answer: a fence around the whole answer, or one
    ```markdown block amid chatter, is unwrapped."""
    return unwrap_fenced_document(answer)


def _titled_heading(line: str) -> bool:
    heading = parse_heading(line)
    return heading is not None and bool(heading[1])


def nonblank_lines(text: str) -> int:
    """How many lines of ``text`` have something on them."""
    return sum(1 for line in text.splitlines() if line.strip())


def headings(text: str) -> list[str]:
    """The headings of ``text`` as written (without metadata comments)."""
    return [split_meta(line)[0].strip() for line in text.splitlines() if _titled_heading(line)]


def structured(text: str) -> bool:
    """True when ``text`` has a Markdown heading or list item."""
    return any(_titled_heading(line) or is_list_item(line) for line in text.splitlines())


def check_answer(draft: str, base: str) -> None:
    """Refuse an answer that is empty or is not a Markdown memory file like ``base``."""
    if not draft.strip():
        raise ProposalRefused("the model returned an empty answer")
    stripped = draft.lstrip()
    if stripped[:1] in "{[":
        try:
            json.loads(stripped)
        except ValueError:
            pass
        else:
            raise ProposalRefused("the model answered with JSON, not Markdown")
    if not structured(draft) and (structured(base) or not base.strip()):
        raise ProposalRefused("the answer has no Markdown headings or list items")


def strip_preamble(draft: str, base: str) -> tuple[str, str | None]:
    """``draft`` without chatter before MEMORY.md's first heading ("Here is the updated
    file:"), and a note saying what was ignored."""
    first = next((line.strip() for line in base.splitlines() if line.strip()), "")
    if not _titled_heading(first):
        return draft, None
    lines = draft.splitlines()
    at = next((i for i, line in enumerate(lines) if line.strip() == first), None)
    if not at:
        return draft, None
    ignored = " ".join(line.strip() for line in lines[:at] if line.strip())
    if not ignored:
        return "\n".join(lines[at:]), None
    return "\n".join(lines[at:]), f"ignored text before the first heading: {ignored[:120]!r}"


def check_result(
    text: str, base_text: str, base: Sequence[MemoryEntry], lost: Sequence[MemoryEntry]
) -> None:
    """Refuse a proposal that has no entries left, drops too many lines, or deletes lines the
    user wrote by hand (``lost``) without marking them superseded."""
    if not text.strip() or (not parse_entries(text) and base):
        raise ProposalRefused("the proposal has no entries left")
    kept, total = nonblank_lines(text), nonblank_lines(base_text)
    if total and kept < total * MIN_KEPT_LINES:
        raise ProposalRefused(
            f"it keeps {kept} of MEMORY.md's {total} non-blank lines; a consolidation may "
            f"drop at most {1 - MIN_KEPT_LINES:.0%} of them"
        )
    if lost:
        shown = "; ".join(f"line {e.start}: {e.text[:80]!r}" for e in lost[:3])
        more = f" and {len(lost) - 3} more" if len(lost) > 3 else ""
        raise ProposalRefused(
            f"it deletes {len(lost)} line{'s' if len(lost) != 1 else ''} you wrote by hand "
            f"without marking {'them' if len(lost) != 1 else 'it'} superseded ({shown}{more})"
        )


def check_managed_regions(text: str, base_text: str) -> None:
    """Refuse a proposal that changes, moves apart or drops a region another tool manages
    (between its ``<!-- name:start -->`` and ``<!-- name:end -->``): memdeck never writes there."""
    base = [line_body(line) for line in split_lines(base_text)]
    result = "\n" + "\n".join(line_body(line) for line in split_lines(text)) + "\n"
    for region in managed_regions(base):
        block = "\n".join(base[region.first : region.last + 1])
        if "\n" + block + "\n" not in result:
            raise ProposalRefused(
                f"it changes {region.describe('MEMORY.md')}, which another tool manages"
            )


def check_metadata(base: Sequence[MemoryEntry], changes: Sequence[EntryChange], text: str) -> None:
    """Every entry kept from MEMORY.md still carries its metadata comment; no id is used
    twice (unless it already was in MEMORY.md)."""
    ids = Counter(
        meta.id
        for line in text.splitlines()
        if (meta := split_meta(line)[1]) is not None and meta.id
    )
    base_ids = Counter(e.entry_id for e in base if e.entry_id)
    twice = sorted(i for i, n in ids.items() if n > 1 and base_ids[i] < 2)
    if twice:
        raise ProposalRefused(f"entry ids used twice: {', '.join(twice)}")
    gone = {c.before.entry_id for c in changes if c.kind != "changed" and c.before}
    missing = sorted({i for i in base_ids if i not in gone} - set(ids))
    if missing:
        raise ProposalRefused(f"entries lost their metadata comment: {', '.join(missing)}")


def removed_headings(base_text: str, text: str) -> list[str]:
    """Notes naming MEMORY.md's headings the proposal no longer has."""
    kept = set(headings(text))
    return [f"heading removed: {heading}" for heading in headings(base_text) if heading not in kept]
