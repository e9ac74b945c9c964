"""The pure planner: MEMORY.md, the model's answer and the entries retired before go in, a
checked :class:`~tui.chat.consolidation.proposal.Proposal` comes out. No file, no model, no
clock: everything it needs is an argument, so it is tested with strings alone.

The model's draft is paired with MEMORY.md entry by entry (:func:`plan_entries`):

- kept and reworded entries keep their ``<!-- mem ... -->`` comment exactly (restored if the
  model dropped or altered it); new entries get ``conf=medium src=auto consolidation=<id>``;
- entries the model marked ``state=superseded`` (or ``forgotten``) leave the file (they go to
  the audit trail on accept);
- new entries that were forgotten or superseded before, or repeat each other, are left out;
- MEMORY.md entries the draft no longer has are duplicates (``merged``), outdated entries
  memdeck wrote (``removed``) or lines the user wrote by hand (``lost``: the proposal is refused).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date

from ...engine.metadata import (
    INACTIVE_STATES,
    EntryMeta,
    escape_comment_markers,
    format_meta,
    new_entry_id,
    split_meta,
)
from ...engine.store import (
    MemoryEntry,
    file_lines,
    normalize_entry_text,
    parse_entries,
    without_controls,
)
from .proposal import RETIRING_KINDS, ConsolidationStats, EntryChange, Proposal, unified_diff
from .validation import (
    check_answer,
    check_managed_regions,
    check_metadata,
    check_result,
    extract_document,
    removed_headings,
    strip_preamble,
)

#: Similarity (difflib ratio of the entries' words) above which an entry counts as reworded.
SIMILAR_ENTRY = 0.6


@dataclass
class EntryPlan:
    """How the model's draft becomes the proposal text, keyed by the draft entry's index.

    ``comment``: the metadata comment an entry ends with (None: none); ``ids``: its entry id;
    ``drop``: entries left out of the text; ``lost``: hand-written MEMORY.md lines the draft
    dropped without marking them superseded.
    """

    comment: dict[int, str | None] = field(default_factory=dict)
    ids: dict[int, str | None] = field(default_factory=dict)
    drop: set[int] = field(default_factory=set)
    changes: list[EntryChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    lost: list[MemoryEntry] = field(default_factory=list)


class _Pairing:
    """Pairs draft entries with MEMORY.md entries; each MEMORY.md entry is paired at most once."""

    def __init__(self, base: Sequence[MemoryEntry], draft: Sequence[MemoryEntry]) -> None:
        self.base = base
        self.draft = draft
        self.base_words = [normalize_entry_text(e.text) for e in base]
        self.draft_words = [normalize_entry_text(e.text) for e in draft]
        self.base_by_id: dict[str, int] = {}
        for index, entry in enumerate(base):
            if entry.entry_id:
                self.base_by_id.setdefault(entry.entry_id, index)
        self.used: set[int] = set()

    def _same(self, draft_index: int) -> int | None:
        """The unused MEMORY.md entry with the draft entry's id, else with the same words."""
        entry_id = self.draft[draft_index].entry_id
        base_index = self.base_by_id.get(entry_id) if entry_id else None
        if base_index is not None and base_index not in self.used:
            return base_index
        words = self.draft_words[draft_index]
        for base_index, base_words in enumerate(self.base_words):
            if base_index not in self.used and base_words and base_words == words:
                return base_index
        return None

    def pair_same(self, draft_indexes: Iterable[int], pairs: dict[int, int]) -> None:
        """Add to ``pairs`` (draft index -> MEMORY.md index) the entries kept as they were."""
        for draft_index in draft_indexes:
            base_index = self._same(draft_index)
            if base_index is not None:
                self.used.add(base_index)
                pairs[draft_index] = base_index

    def pair_similar(self, draft_indexes: Iterable[int], pairs: dict[int, int]) -> None:
        """Add to ``pairs`` the unpaired entries worded alike, the most similar first."""
        candidates = []
        for draft_index in draft_indexes:
            words = self.draft_words[draft_index]
            if draft_index in pairs or not words:
                continue
            for base_index, base_words in enumerate(self.base_words):
                if base_index in self.used or not base_words:
                    continue
                matcher = difflib.SequenceMatcher(None, words, base_words, autojunk=False)
                if (
                    matcher.real_quick_ratio() >= SIMILAR_ENTRY
                    and matcher.quick_ratio() >= SIMILAR_ENTRY
                    and (ratio := matcher.ratio()) >= SIMILAR_ENTRY
                ):
                    candidates.append((-ratio, draft_index, base_index))
        for _, draft_index, base_index in sorted(candidates):
            if draft_index not in pairs and base_index not in self.used:
                self.used.add(base_index)
                pairs[draft_index] = base_index


def comment_of(entry: MemoryEntry) -> str | None:
    """The metadata comment of an entry exactly as written in its file (None without one)."""
    if entry.meta is None or not entry.raw:
        return None
    first = entry.raw[0]
    visible, _ = split_meta(first)
    return first[len(visible) :].strip() or None


def plan_entries(
    base: Sequence[MemoryEntry],
    draft: Sequence[MemoryEntry],
    *,
    proposal_id: str,
    today: date,
    retired: Collection[str] = frozenset(),
    new_id: Callable[[], str] = new_entry_id,
) -> EntryPlan:
    """Pair the draft's entries with MEMORY.md's: kept, reworded, superseded, new, gone.

    ``retired`` holds the normalized words of entries forgotten or superseded before (they are
    not added again); ``new_id`` makes the id of each new entry.
    """
    pairing = _Pairing(base, draft)
    marked = [i for i, e in enumerate(draft) if e.meta and e.meta.state in INACTIVE_STATES]
    marked_set = frozenset(marked)
    live = [i for i in range(len(draft)) if i not in marked_set]
    superseded: dict[int, int] = {}
    kept: dict[int, int] = {}
    # Same id or words first (superseded marks before kept entries), then similar wording.
    pairing.pair_same(marked, superseded)
    pairing.pair_same(live, kept)
    pairing.pair_similar(marked, superseded)
    pairing.pair_similar(live, kept)

    plan = EntryPlan()
    for index in marked:
        plan.drop.add(index)
        if index in superseded:
            old = base[superseded[index]]
            plan.changes.append(
                EntryChange("superseded", old, reason="contradicted by newer facts")
            )
        else:
            plan.notes.append(
                f"ignored a superseded mark on a line not in MEMORY.md: {draft[index].text}"
            )
    # Kept and reworded entries keep MEMORY.md's metadata comment, exactly as written.
    for index, base_index in sorted(kept.items()):
        old = base[base_index]
        plan.comment[index] = comment_of(old)
        plan.ids[index] = old.entry_id
        if draft[index].text != old.text:
            plan.changes.append(
                EntryChange("changed", old, draft[index].text, old.entry_id, "reworded")
            )
    unpaired = [i for i in live if i not in kept]
    _plan_new_entries(plan, pairing, unpaired, kept, retired, new_id, proposal_id, today)
    _plan_gone_entries(plan, pairing)
    plan.changes.sort(key=lambda c: (c.before is None, c.before.start if c.before else 0))
    return plan


def _plan_new_entries(
    plan: EntryPlan,
    pairing: _Pairing,
    unpaired: Sequence[int],
    kept: dict[int, int],
    retired: Collection[str],
    new_id: Callable[[], str],
    proposal_id: str,
    today: date,
) -> None:
    """New entries get fresh metadata, unless forgotten or superseded before, or said twice."""
    seen = {pairing.draft_words[i] for i in kept}
    left_out = 0
    for index in unpaired:
        words = pairing.draft_words[index]
        if not words or words in seen or words in retired:
            plan.drop.add(index)
            if words in retired and words not in seen:
                left_out += 1
            continue
        seen.add(words)
        meta = EntryMeta(
            id=new_id(),
            confidence="medium",
            source="auto",
            at=today,
            extra={"consolidation": proposal_id},
        )
        plan.comment[index] = format_meta(meta)
        plan.ids[index] = meta.id
        plan.changes.append(EntryChange("added", None, pairing.draft[index].text, meta.id))
    if left_out:
        plan.notes.append(
            f"left out {left_out} new entr{'y' if left_out == 1 else 'ies'} that had been "
            "forgotten or superseded before"
        )


def _plan_gone_entries(plan: EntryPlan, pairing: _Pairing) -> None:
    """MEMORY.md entries the draft no longer has: duplicates, outdated, or lost."""
    staying = {pairing.draft_words[i]: i for i in plan.ids if i not in plan.drop}
    for base_index, entry in enumerate(pairing.base):
        if base_index in pairing.used:
            continue
        words = pairing.base_words[base_index]
        twin = staying.get(words) if words else None
        if twin is not None:
            plan.changes.append(
                EntryChange(
                    "merged",
                    entry,
                    pairing.draft[twin].text,
                    plan.ids[twin],
                    "duplicate of an entry that stays",
                )
            )
        elif entry.meta is None:
            plan.lost.append(entry)
        else:
            plan.changes.append(EntryChange("removed", entry, reason="dropped as outdated"))


def apply_plan(lines: Sequence[str], entries: Sequence[MemoryEntry], plan: EntryPlan) -> str:
    """The draft with dropped entries removed and each kept entry's metadata set."""
    lines = list(lines)
    for index in sorted(range(len(entries)), key=lambda i: -entries[i].start):
        entry = entries[index]
        first = entry.start - 1
        if index in plan.drop:
            del lines[first : entry.end]
            # Do not leave two blank lines where the entry was.
            if 0 < first < len(lines) and not lines[first].strip() and not lines[first - 1].strip():
                del lines[first]
            continue
        if index in plan.comment:
            visible = split_meta(lines[first])[0].rstrip()
            comment = plan.comment[index]
            lines[first] = f"{visible} {comment}" if comment else visible
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines) + "\n" if lines else ""


def count_changes(changes: Sequence[EntryChange], base_entries: int) -> ConsolidationStats:
    """The stats of ``changes`` to a MEMORY.md of ``base_entries`` entries."""
    count = {kind: sum(1 for c in changes if c.kind == kind) for kind in RETIRING_KINDS}
    return ConsolidationStats(
        added=sum(1 for c in changes if c.kind == "added"),
        changed=count["changed"],
        removed=count["removed"] + count["superseded"] + count["merged"],
        superseded=count["superseded"],
        merged=count["merged"],
        kept=max(0, base_entries - sum(count.values())),
    )


def _cleaned_draft(draft: str, base_text: str) -> tuple[str, list[str]]:
    """The model's draft with the lines it wrote (those not in MEMORY.md as written) cleaned:
    control characters removed, and ``<!--``/``-->`` before the line's metadata comment
    escaped, so a new or reworded entry cannot forge the comment its line is given. Lines
    kept from MEMORY.md keep the user's bytes. Returns the notes saying what changed."""
    kept = set(file_lines(base_text))
    lines: list[str] = []
    controls = markers = 0
    for line in file_lines(draft):
        if line not in kept:
            visible, _ = split_meta(line)
            text, escaped = escape_comment_markers(visible)
            cleaned = text + line[len(visible) :]
            without, _ = without_controls(cleaned)
            controls += len(cleaned) - len(without)
            markers += escaped
            line = without
        lines.append(line)
    notes: list[str] = []
    if controls:
        plural = "s" if controls != 1 else ""
        notes.append(f"removed {controls} control character{plural} from the model's lines")
    if markers:
        plural = "s" if markers != 1 else ""
        notes.append(
            f"escaped {markers} comment marker{plural} ('<!--', '-->') in the model's lines"
        )
    return "\n".join(lines) + "\n", notes


def plan_proposal(
    base_text: str,
    base_hash: str,
    answer: str,
    *,
    proposal_id: str,
    created_at: str,
    window: tuple[date, date],
    retired: Collection[str] = frozenset(),
    sources: Sequence[str] = (),
    model: str | None = None,
    notes: Sequence[str] = (),
    new_id: Callable[[], str] = new_entry_id,
) -> Proposal:
    """Check the model's ``answer`` against ``base_text`` (MEMORY.md, whose hash is
    ``base_hash``) and turn it into a :class:`Proposal`.

    Raises :class:`~tui.chat.consolidation.proposal.ProposalRefused` with the reason when the
    answer is unusable.
    """
    draft = extract_document(answer)
    check_answer(draft, base_text)
    draft, preamble = strip_preamble(draft, base_text)
    draft, cleaned = _cleaned_draft(draft, base_text)
    base_entries = parse_entries(base_text)
    draft_entries = parse_entries(draft)
    plan = plan_entries(
        base_entries,
        draft_entries,
        proposal_id=proposal_id,
        today=window[1],
        retired=retired,
        new_id=new_id,
    )
    text = apply_plan(file_lines(draft), draft_entries, plan)
    check_managed_regions(text, base_text)  # before check_result: the clearer reason
    check_result(text, base_text, base_entries, plan.lost)
    check_metadata(base_entries, plan.changes, text)
    changes = tuple(plan.changes)
    return Proposal(
        id=proposal_id,
        created_at=created_at,
        base_hash=base_hash,
        base_text=base_text,
        text=text,
        diff=unified_diff(base_text, text),
        changes=changes,
        stats=count_changes(changes, len(base_entries)),
        window_start=window[0],
        window_end=window[1],
        sources=tuple(sources),
        model=model,
        notes=(
            *notes,
            *([preamble] if preamble else []),
            *cleaned,
            *plan.notes,
            *removed_headings(base_text, text),
        ),
    )
