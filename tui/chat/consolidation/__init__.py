"""Consolidation, the "hippocampus": recent daily logs and MEMORY.md
go to the summary model, which proposes an updated MEMORY.md; the user sees the diff and
accepts or rejects it.

- :mod:`.proposal`: the :class:`Proposal` type, its changes and stats, the errors;
- :mod:`.planner`: the pure planner (model answer + MEMORY.md -> proposal), no I/O;
- :mod:`.validation`: the checks an answer and a proposal must pass;
- :mod:`.prompt`: what the model is asked;
- :mod:`.consolidator`: :class:`Consolidator`, the file and model I/O around them.
"""

from .consolidator import Consolidator
from .planner import plan_proposal
from .proposal import (
    AcceptResult,
    ConsolidationError,
    ConsolidationStats,
    DailyLog,
    EntryChange,
    NothingToConsolidate,
    Proposal,
    ProposalRefused,
    StaleProposalError,
    unified_diff,
)
from .validation import extract_document

__all__ = [
    "AcceptResult",
    "ConsolidationError",
    "ConsolidationStats",
    "Consolidator",
    "DailyLog",
    "EntryChange",
    "NothingToConsolidate",
    "Proposal",
    "ProposalRefused",
    "StaleProposalError",
    "extract_document",
    "plan_proposal",
    "unified_diff",
]
