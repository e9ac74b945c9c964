"""The consolidation planner is pure: strings in, a proposal out, no files and no model."""

from __future__ import annotations

import itertools
from datetime import date
from typing import Any

import pytest

from tui.chat.consolidation import Proposal, ProposalRefused, extract_document, plan_proposal
from tui.chat.consolidation.planner import apply_plan, plan_entries
from tui.engine.store import file_lines, normalize_entry_text, parse_entries

TODAY = date(2026, 11, 22)

BASE = """\
# Long-term Memory

## About me
- My dog is Max
- Lives in Lyon <!-- mem id=aa1111 conf=high src=user at=2026-11-01 -->
- Likes green tea <!-- mem id=bb2222 conf=medium src=auto at=2026-11-03 -->
"""


def propose(answer: str, base: str = BASE, **kwargs: Any) -> Proposal:
    ids = (f"new{n:03d}" for n in itertools.count(1))
    kwargs.setdefault("new_id", lambda: next(ids))
    return plan_proposal(
        base,
        "hash",
        answer,
        proposal_id="p1",
        created_at="2026-11-22T12:00:00+00:00",
        window=(date(2026, 11, 20), TODAY),
        **kwargs,
    )


def test_kept_entries_keep_their_comment_and_new_ones_get_metadata() -> None:
    answer = """\
# Long-term Memory

## About me
- My dog is Max
- Lives in Lyon
- Likes green tea
- Works as a baker
"""
    proposal = propose(answer)
    assert (
        "- Lives in Lyon <!-- mem id=aa1111 conf=high src=user at=2026-11-01 -->" in proposal.text
    )
    assert "bb2222" in proposal.text
    added = next(line for line in proposal.text.splitlines() if "baker" in line)
    assert "id=new001" in added and "consolidation=p1" in added and "at=2026-11-22" in added
    assert [c.kind for c in proposal.changes] == ["added"]
    assert proposal.stats.added == 1 and proposal.stats.kept == 3
    assert proposal.diff.startswith("--- a/MEMORY.md")


def test_reworded_superseded_and_merged_entries() -> None:
    answer = """\
# Long-term Memory

## About me
- My dog is Max
- Lives in Lyon <!-- mem id=aa1111 state=superseded -->
- Lives in Paris now
- Likes green tea a lot <!-- mem id=bb2222 conf=medium src=auto at=2026-11-03 -->
"""
    proposal = propose(answer)
    kinds = {c.kind: c for c in proposal.changes}
    assert set(kinds) == {"superseded", "changed", "added"}
    superseded = kinds["superseded"].before
    assert superseded is not None and superseded.entry_id == "aa1111"
    assert "Lyon" not in proposal.text
    assert kinds["changed"].after == "Likes green tea a lot"
    assert proposal.stats.removed == 1 and proposal.stats.superseded == 1


def test_duplicates_merge_and_retired_entries_stay_out() -> None:
    base = BASE + "- likes green tea. <!-- mem id=cc3333 conf=low src=auto at=2026-11-04 -->\n"
    answer = BASE + "- Owns a bike\n"
    retired = {normalize_entry_text("Owns a bike")}
    proposal = propose(answer, base, retired=retired)
    assert [c.kind for c in proposal.changes] == ["merged"]
    merged = proposal.changes[0].before
    assert merged is not None and merged.entry_id == "cc3333"
    assert "bike" not in proposal.text
    assert any("forgotten or superseded before" in note for note in proposal.notes)


def test_a_deleted_hand_written_line_is_refused() -> None:
    answer = BASE.replace("- My dog is Max\n", "")
    with pytest.raises(ProposalRefused, match="you wrote by hand"):
        propose(answer)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("   ", "empty answer"),
        ('{"memory": "x"}', "JSON"),
        ("just some words", "no Markdown headings"),
        ("# Long-term Memory\n", "no entries left"),
    ],
)
def test_unusable_answers_are_refused(answer: str, reason: str) -> None:
    with pytest.raises(ProposalRefused, match=reason):
        propose(answer)


def test_fenced_answers_and_preamble_are_unwrapped() -> None:
    assert extract_document("```markdown\n# A\n- b\n```") == "# A\n- b"
    assert extract_document("Sure!\n```md\n# A\n- b\n```\nDone.") == "# A\n- b"
    assert extract_document("```python\nx = 1\n```") == "```python\nx = 1\n```"
    proposal = propose("Here is the updated file:\n" + BASE)
    assert proposal.unchanged
    assert any("ignored text before the first heading" in note for note in proposal.notes)


def test_plan_and_apply_work_on_entries_alone() -> None:
    base = parse_entries(BASE)
    draft_text = BASE.replace(" <!-- mem id=aa1111 conf=high src=user at=2026-11-01 -->", "")
    draft = parse_entries(draft_text)
    plan = plan_entries(base, draft, proposal_id="p1", today=TODAY)
    assert plan.changes == [] and plan.lost == [] and not plan.drop
    assert apply_plan(file_lines(draft_text), draft, plan) == BASE


MANAGED = BASE + """
## REM Sleep
<!-- openclaw:dreaming:rem:start -->
- Reflections: Theme: `deploys` kept surfacing; confidence: 0.71; status: staged
<!-- openclaw:dreaming:rem:end -->
"""


def test_a_draft_that_rewrites_another_tools_block_is_refused() -> None:
    reworded = MANAGED.replace("kept surfacing", "came up often")
    dropped = MANAGED.split("## REM Sleep")[0]
    for answer in (reworded, dropped):
        with pytest.raises(ProposalRefused, match=r"openclaw:dreaming:rem block .*another tool"):
            propose(answer, base=MANAGED)
    kept = propose(MANAGED.replace("- My dog is Max", "- My dog is Max, a beagle"), base=MANAGED)
    assert MANAGED.split("## REM Sleep")[1] in kept.text  # the block byte for byte
