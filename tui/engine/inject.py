"""Build the memory block injected into the system prompt, under a token budget, with a report.

```
## Long-term Memory
<MEMORY.md, trimmed to its share of the budget>

## Relevant Memories
- [memory/2026-11-20.md#L12-18] ...
```

Nothing is cut silently: the report lists what was included, what was cut and why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .metadata import split_meta
from .search import SearchResult

LONG_TERM_HEADING = "## Long-term Memory"
RELEVANT_HEADING = "## Relevant Memories"


@dataclass(frozen=True)
class InjectionOptions:
    """Budget knobs. Tokens are counted in the embedding tokenizer's word-pieces (close to LLM tokens)."""

    budget_tokens: int = 2000
    #: MEMORY.md may take at most this share of the budget when relevant memories compete for it.
    memory_share: float = 0.6
    #: Search results offered to the budget. More than search's default of 6: on LoCoMo, filling
    #: the budget instead of stopping at 6 results raised evidence recall by ~10 points.
    max_memories: int = 12


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


@dataclass
class Injection:
    """The text to put in the system prompt and its report."""

    text: str
    report: InjectionReport


def visible_memory_lines(memory_text: str) -> list[tuple[int, str]]:
    """``(line number, text)`` of MEMORY.md without metadata comments and inactive entries."""
    lines = []
    for number, raw in enumerate(memory_text.splitlines(), start=1):
        visible, meta = split_meta(raw)
        if meta is not None and not meta.active:
            continue
        lines.append((number, visible))
    return lines


def format_relevant(result: SearchResult) -> str:
    """One ``## Relevant Memories`` bullet: ``- [path#Lx-y] text``, continuation lines indented."""
    lines = [line for line in result.text.strip().splitlines() if line.strip()]
    head = lines[0] if lines else ""
    rest = "".join(f"\n  {line}" for line in lines[1:])
    return f"- [{result.location}] {head}{rest}"


def build_injection(
    memory_text: str,
    results: Sequence[SearchResult],
    count_tokens: Callable[[str], int],
    options: InjectionOptions = InjectionOptions(),
) -> Injection:
    """Assemble the injected block from MEMORY.md's text and ranked search results."""
    budget = options.budget_tokens
    report = InjectionReport(budget=budget)
    memory_lines = visible_memory_lines(memory_text)
    while memory_lines and not memory_lines[-1][1].strip():
        memory_lines.pop()
    line_tokens = [count_tokens(text) + 1 for _, text in memory_lines]
    report.memory_total_tokens = sum(line_tokens)

    header_cost = count_tokens(LONG_TERM_HEADING) + count_tokens(RELEVANT_HEADING) + 4
    available = max(0, budget - header_cost)
    relevant_items = [(r, format_relevant(r)) for r in results]
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
    if memory_lines:
        report.included.append(InjectedItem("long-term", f"MEMORY.md#L1-{last_kept}", used))
    if report.memory_truncated:
        dropped = report.memory_total_tokens - used
        report.cut.append(
            InjectedItem(
                "long-term",
                f"MEMORY.md#L{last_kept + 1}-{memory_lines[-1][0]}",
                dropped,
                reason=f"MEMORY.md truncated: {used} of {report.memory_total_tokens} tokens fit its share of the budget",
            )
        )
        report.notes.append(
            f"MEMORY.md truncated to lines 1-{last_kept} ({used} of {report.memory_total_tokens} tokens); "
            "the rest is still reachable through search"
        )

    remaining = available - used
    relevant_lines: list[str] = []
    for (result, text), tokens in zip(relevant_items, relevant_cost, strict=True):
        if result.path == "MEMORY.md" and result.end_line <= last_kept:
            report.cut.append(
                InjectedItem(
                    "relevant", result.location, tokens, result.score, "already in Long-term Memory"
                )
            )
            continue
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
        relevant_lines.append(text)
        remaining -= tokens
        report.included.append(InjectedItem("relevant", result.location, tokens, result.score))

    parts = []
    if kept_lines:
        parts.append(LONG_TERM_HEADING + "\n" + "\n".join(text for _, text in kept_lines).strip())
    if relevant_lines:
        parts.append(RELEVANT_HEADING + "\n" + "\n".join(relevant_lines))
    text = "\n\n".join(parts)
    report.tokens_used = count_tokens(text) if text else 0
    return Injection(text=text, report=report)
