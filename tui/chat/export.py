"""A session as Markdown: ``memdeck sessions --export ID`` and the app's "Export session".

What is exported is the conversation as the app shows it: the user's and the assistant's
messages in order (each under a ``### you`` / ``### memdeck`` heading with its time), the
memory tools the assistant called with their arguments and results (fenced JSON), errors,
compactions, and a line where a retry or an edit replaced earlier messages (those stay in the
transcript file only). The messages are their own Markdown source, as written; every control
character in them is in its visible form (:func:`~tui.engine.visible.visible_text`), so the
file holds text, never a terminal command, whatever a model or a memory put in it.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from ..engine.visible import visible_text
from .events import ERROR_LABELS
from .sessions import Compaction, ErrorRecord, Message, Superseded, ToolCall, Transcript

#: Where the app writes an export: this folder of the workspace's ``.memdeck`` (see
#: :func:`export_file_name`).
EXPORTS_DIR = "exports"



def export_file_name(session_id: str) -> str:
    """The file name of a session's export (the id is a safe file name already)."""
    return f"{session_id}.md"


def _when(timestamp: str) -> str:
    """``2026-11-26 11:48`` of an ISO timestamp ("" when there is none)."""
    return timestamp[:16].replace("T", " ") if timestamp else ""


def _fenced(value: Any) -> str:
    """``value`` as a fenced JSON block (a string: as it is, JSON or not), its fence longer
    than any backtick run inside."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):  # not JSON: shown as it came
            value = json.loads(value)
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, indent=2, default=str)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}json\n{text}\n{fence}"


def _heading(role: str, timestamp: str) -> str:
    who = "you" if role == "user" else "memdeck"
    when = _when(timestamp)
    return f"### {who} · {when}" if when else f"### {who}"


def _blocks(transcript: Transcript) -> Iterator[str]:
    """The Markdown blocks of the conversation, in order."""
    silent = {m.id for m in transcript.messages if m.silent}
    speaker = ""  # the role whose heading was written last
    for item in transcript.timeline:
        if isinstance(item, Message):
            if item.silent:
                continue
            if item.role != speaker or item.role == "user":
                yield _heading(item.role, item.timestamp)
                speaker = item.role
            if item.content.strip():
                yield item.content.strip("\n")
            if item.interrupted:
                yield "*(interrupted)*"
            elif item.incomplete:
                yield "*(answer cut short)*"
            continue
        if isinstance(item, ToolCall) and item.message_id in silent:
            continue
        if speaker != "assistant" and isinstance(item, ToolCall | ErrorRecord | Compaction):
            yield _heading("assistant", "")
            speaker = "assistant"
        if isinstance(item, ToolCall):
            result = transcript.tool_results.get(item.id)
            mark = "" if result is None else (" ✓" if result.ok else " ✗")
            yield f"**tool call** `{item.tool}`{mark}\n\n{_fenced(item.input or item.arguments)}"
            if result is not None:
                yield f"result:\n\n{_fenced(result.output)}"
        elif isinstance(item, ErrorRecord):
            if item.silent:
                yield f"*(compaction skipped: memory flush turn: {item.message})*"
            else:
                label = ERROR_LABELS.get(item.kind, f"error ({item.kind})")
                yield f"> **{label}:** {item.message}"
        elif isinstance(item, Compaction):
            dropped = item.dropped_messages if item.dropped_messages is not None else "older"
            yield f"*(compacted: {dropped} earlier messages became a summary for the model)*"
        elif isinstance(item, Superseded):
            yield f"*({replaced_words(item)})*"
            speaker = ""


def replaced_words(line: Superseded) -> str:
    """What a ``supersede`` line says where it replaced messages (the app and the export)."""
    count = line.replaced
    if line.reason == "edit":
        replaced = f"{count} earlier message{'s' if count != 1 else ''}"
        return f"edited and sent again: {replaced} replaced, kept in the transcript file"
    after = count - 1  # the question itself is asked again
    if after <= 0:
        return "asked again: the earlier attempt stays in the transcript file"
    if after == 1:
        return "asked again: the earlier answer is replaced, kept in the transcript file"
    return f"asked again: the {after} messages after it are replaced, kept in the transcript file"


def session_markdown(transcript: Transcript, *, now: datetime | None = None) -> str:
    """The session as one Markdown document (see the module's doc); ``now``: when it was
    exported (default: now)."""
    exported = (now or datetime.now().astimezone()).isoformat(timespec="minutes")
    facts = [f"- session: `{transcript.session_id}`"]
    if transcript.created:
        facts.append(f"- started: {_when(transcript.created)}")
    if transcript.model:
        facts.append(f"- model: {transcript.model}")
    facts.append(f"- exported: {_when(exported)}")
    blocks = [f"# {transcript.display_title}", "\n".join(facts), *_blocks(transcript)]
    return visible_text("\n\n".join(blocks) + "\n")
