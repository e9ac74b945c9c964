"""What the chat pane shows, as text and widgets: a session's transcript (what a resumed
session shows), the dim line under an answer, and the size note of a long draft."""

from __future__ import annotations

from textual.widget import Widget

from tui.app.widgets.chat_markdown import ChatMarkdown
from tui.app.widgets.chat_message import ChatMessage, error_part, notice_part
from tui.app.widgets.tool_call_view import ToolCallView
from tui.chat.context_window import MessageSize
from tui.chat.export import replaced_words
from tui.chat.sessions import (
    Compaction,
    ErrorRecord,
    Superseded,
    ToolCall,
    Transcript,
    TurnInjection,
)
from tui.chat.sessions import Message as TranscriptMessage
from tui.engine.inject import InjectionReport

#: Messages of a resumed session rendered at most (older ones are summarised in one line).
MAX_SHOWN_MESSAGES = 200


def draft_size_note(lines: int, chars: int, size: MessageSize | None, fold_key: str) -> str:
    """What the message box's edge says about a long draft: its lines and, once counted, its
    tokens; first (a narrow box cuts the end) whether it is too long for the model's context."""
    if size is None:
        return f"{lines:,} lines · {chars:,} characters"
    if not size.fits:
        return f"~{size.tokens:,} tokens: too long · {fold_key} folds · {lines:,} lines"
    return f"{lines:,} lines · ~{size.tokens:,} tokens"


def describe_turn(report: InjectionReport | None, usage: dict[str, int]) -> str:
    """The dim line under an answer: ``memory 812/2000 tokens · 3 relevant · 1,204 → 56 tokens``."""
    parts = []
    if report is not None:
        relevant = sum(1 for item in report.included if item.kind == "relevant")
        parts.append(f"memory {report.tokens_used}/{report.budget} tokens · {relevant} relevant")
    if usage.get("prompt", 0) or usage.get("completion", 0):
        parts.append(f"{usage['prompt']:,} → {usage['completion']:,} tokens")
    return " · ".join(parts)


def transcript_messages(
    transcript: Transcript, limit: int = MAX_SHOWN_MESSAGES
) -> tuple[list[ChatMessage], int]:
    """The transcript as chat widgets (tool calls with their results, errors, compactions; an
    answer that replaced earlier messages says so first), the last ``limit`` of them, and how
    many earlier ones were left out."""
    silent_ids = {m.id for m in transcript.messages if m.silent}
    messages: list[ChatMessage] = []
    parts: list[Widget] | None = None
    texts: list[str] = []
    meta = ""  # the memory line of the answer being collected (from its turn's injection)

    def close_answer() -> None:
        nonlocal parts, meta
        if parts is not None:
            message = ChatMessage("assistant", "".join(texts), parts=parts, meta=meta)
            messages.append(message)
        parts = None
        texts.clear()
        meta = ""

    replaced: list[Widget] = []  # the line saying what the next answer replaced

    def answer_parts() -> list[Widget]:
        nonlocal parts
        if parts is None:
            parts = [*replaced]
            replaced.clear()
        return parts

    for item in transcript.timeline:
        if isinstance(item, TranscriptMessage):
            if item.silent:
                continue
            if item.role == "user":
                close_answer()
                messages.append(ChatMessage("user", item.content, message_id=item.id))
            elif item.role == "assistant":
                current = answer_parts()
                if item.content:
                    current.append(ChatMarkdown(item.content))
                    texts.append(item.content)
                if item.interrupted:
                    current.append(notice_part("(interrupted)"))
                elif item.incomplete:
                    current.append(notice_part("(answer cut short)"))
        elif isinstance(item, ToolCall):
            if item.message_id in silent_ids:
                continue
            view = ToolCallView(item.id, item.tool, item.input, raw_arguments=item.arguments)
            result = transcript.tool_results.get(item.id)
            if result is not None:
                view.set_result(result.output, result.ok)
            answer_parts().append(view)
        elif isinstance(item, TurnInjection):
            if item.report:
                meta = describe_turn(InjectionReport.from_json(item.report), {})
        elif isinstance(item, ErrorRecord) and item.silent:  # as the turn showed it
            answer_parts().append(
                notice_part(f"(compaction skipped: memory flush turn: {item.message})")
            )
        elif isinstance(item, ErrorRecord):
            answer_parts().append(error_part(item.kind, item.message))
        elif isinstance(item, Compaction):
            dropped = item.dropped_messages if item.dropped_messages is not None else "older"
            answer_parts().append(
                notice_part(
                    f"(compacted: {dropped} earlier messages are now a summary for the model)"
                )
            )
        elif isinstance(item, Superseded):
            replaced[:] = [notice_part(f"({replaced_words(item)})")]
    close_answer()
    hidden = max(0, len(messages) - limit)
    return messages[hidden:], hidden
