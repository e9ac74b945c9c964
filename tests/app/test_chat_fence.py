"""Code blocks in chat text: no language guessed, lexers loaded before the block is drawn and
off the event loop."""

from __future__ import annotations

import threading

import pytest
from pygments.lexer import RegexLexerMeta
from pygments.lexers import get_lexer_by_name
from support.pilot import wait_until
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.widgets.markdown import MarkdownFence

from tui.app.widgets import chat_fence
from tui.app.widgets.chat_fence import ChatFence, cold_fence_languages
from tui.app.widgets.chat_markdown import ChatMarkdown
from tui.app.widgets.chat_message import ChatMessage
from tui.app.widgets.live_text import LiveText

PYTHON = "def flush(session):\n    return None\n"


class LogApp(App[None]):
    def compose(self) -> ComposeResult:
        yield VerticalScroll(id="log")


def test_a_fence_without_a_language_is_plain_text_not_a_guess() -> None:
    def spans(language: str, fence: type[MarkdownFence] = ChatFence) -> list[object]:
        return list(fence.highlight(PYTHON, language).spans)

    assert spans("") == spans("text", MarkdownFence)
    assert spans("") != spans("", MarkdownFence), "Textual's own guesses Python and colours it"
    assert spans("python") == spans("python", MarkdownFence)


def test_cold_fence_languages_names_each_fence_s_language_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(chat_fence, "_warm", {"rust"})
    text = (
        "Some text\n```python\nx = 1\n```\n- item\n  ~~~ sql\n  SELECT 1\n  ~~~\n> ```rust\n```py"
    )
    assert cold_fence_languages(text) == ["python", "", "sql", "py"]
    assert cold_fence_languages("no code here, just `inline` code") == []


async def test_a_streamed_code_block_s_lexer_is_built_in_a_thread_before_it_is_drawn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pygments builds a lexer's regular expressions at its class's first use (tens of ms):
    that happens in a worker thread, before the block reaches the Markdown widget."""
    kotlin = type(get_lexer_by_name("kotlin"))
    monkeypatch.delattr(kotlin, "_tokens")  # as in a process that never used it
    monkeypatch.setattr(chat_fence, "_warm", set())
    built_on: list[tuple[str, bool]] = []
    build = RegexLexerMeta.process_tokendef

    def watched(cls: RegexLexerMeta, name: str, tokendefs: object = None) -> object:
        built_on.append((cls.__name__, threading.current_thread() is threading.main_thread()))
        return build(cls, name, tokendefs)

    monkeypatch.setattr(RegexLexerMeta, "process_tokendef", watched)
    app = LogApp()
    async with app.run_test(size=(70, 30)) as pilot:
        message = ChatMessage("assistant")
        await app.query_one("#log", VerticalScroll).mount(message)
        pieces = ["Here:\n\n``", "`kot", "lin\nfun main() {}\n", "```\n"]
        await message.append_text(pieces[0])
        (live,) = message.text_parts()
        assert isinstance(live, LiveText) and isinstance(live.markdown, ChatMarkdown)
        for piece in pieces[1:]:
            await message.append_text(piece)
        whole = "".join(pieces)
        await wait_until(pilot, lambda: live.drawn_source == whole, "the last append drawn")
        assert ("KotlinLexer", False) in built_on
        assert ("KotlinLexer", True) not in built_on, "built on the event loop"
        (fence,) = live.markdown.query(ChatFence)
        assert fence.lexer == "kotlin"
        assert "fun main() {}" in str(fence._highlighted_code)
        await message.finish()
