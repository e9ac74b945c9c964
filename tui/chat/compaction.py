"""Compaction's prompts and its choice of what to summarise: the older part of a session's
conversation, before the recent messages it keeps (see :meth:`tui.chat.chat.ChatEngine.run_turn`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .transcript import Compaction, Message, Transcript

SILENT_FLUSH_PROMPT = """[memdeck] The conversation context is about to be compacted: older \
messages will be replaced by a short summary. Before that happens, save anything worth \
keeping for future conversations: call save_memory for lasting facts, preferences and \
decisions, and append_daily_log for notes about what happened today. Do not repeat what is \
already remembered. When you are done, reply with NO_REPLY."""

COMPACTION_SYSTEM_PROMPT = """You compress conversations. Write a concise summary of the \
conversation below that keeps everything needed to continue it: the user's goals, decisions, \
facts, open questions and any commitments. Use short bullet points. Do not add anything that \
was not said."""

#: Model requests the silent memory-flush turn may make.
SILENT_TURN_ROUNDS = 3


def split_for_compaction(transcript: Transcript, keep: int) -> tuple[list[Message], list[Message]]:
    """The conversation since the last compaction, as the older messages to summarise and the
    last ``keep`` (at least one) it keeps, starting at a user message."""
    compaction = transcript.last_compaction
    start_id = compaction.dropped_before if compaction else None
    live = [m for m in transcript.messages_after(None) if m.is_conversation]
    if start_id is not None:
        ids = [m.id for m in transcript.messages]
        cut = ids.index(start_id) if start_id in ids else 0
        live = [m for m in live if m.index > cut]
    keep_from = max(0, len(live) - max(1, keep))
    while keep_from > 0 and live[keep_from].role != "user":
        keep_from -= 1  # start the kept part at a user message
    return live[:keep_from], live[keep_from:]


def summary_request(
    older: list[Message],
    previous: Compaction | None,
    *,
    user_text: Callable[[str], str],
    assistant_text: Callable[[str], str],
) -> list[dict[str, Any]]:
    """The summary model's request for ``older`` (after the ``previous`` compaction's summary);
    ``user_text`` and ``assistant_text`` bound what each message may carry."""
    conversation = "\n\n".join(
        f"User: {user_text(m.content)}"
        if m.role == "user"
        else f"Assistant: {assistant_text(m.content)}"
        for m in older
        if m.is_loggable
    )
    summary = (previous.summary or None) if previous else None
    if summary:
        conversation = f"(Summary of what came before:)\n{summary}\n\n{conversation}"
    return [
        {"role": "system", "content": COMPACTION_SYSTEM_PROMPT},
        {"role": "user", "content": conversation},
    ]
