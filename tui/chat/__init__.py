"""The chat engine: LLM client, memory tools, sessions, daily-log flush, triggers, compaction.

No Textual imports here: the TUI builds on :class:`tui.chat.chat.ChatEngine`.
"""
