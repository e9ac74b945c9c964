"""The token counts kept for the next start (MEMORY.md's lines and block, as the preview of an
empty draft counts them) are the tokenizer's own, and only reused for the very same text."""

from __future__ import annotations

import json
from pathlib import Path

from tui.engine.embeddings import Embedder, count_tokens
from tui.engine.engine import MemoryEngine
from tui.engine.inject import build_injection
from tui.engine.token_counts import TOKEN_COUNTS_FILE, TokenCounts, text_key

MEMORY = (
    "# Long-term Memory\n\n## Family\n- Has a dog called Luna 🐕\n- Sister: Zoë, in Zürich\n\n"
    "## Work\n- Ships `tui/engine` on Fridays; uses pygit2 & tokenizers (v0.22)\n"
    "- 東京 trip in spring\n" + "- A long line " + "word " * 300 + "\n"
)


def prepared(tmp_path: Path, embedder: Embedder) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    engine = MemoryEngine(root, embedder=embedder)
    try:
        engine.sync(embed=False)
        assert engine.inject("").text  # what the app shows at start
    finally:
        engine.close()
    return root


def test_kept_counts_equal_the_tokenizer_s_and_give_the_same_injection(
    tmp_path: Path, embedder: Embedder
) -> None:
    root = prepared(tmp_path, embedder)
    saved = TokenCounts(root).tally().saved
    asked: list[str] = []

    def counting(text: str) -> int:
        asked.append(text)
        return count_tokens(text)

    direct = build_injection(MEMORY, [], counting)
    assert len(asked) > 8 and direct.text in asked
    assert {text_key(text): count_tokens(text) for text in asked} == saved

    tally = TokenCounts(root).tally()
    again = build_injection(MEMORY, [], tally)
    assert again.text == direct.text and again.report == direct.report
    assert set(tally.used) <= set(saved)  # every count came from the file
    assert oct((root / ".memdeck" / TOKEN_COUNTS_FILE).stat().st_mode & 0o777) == "0o600"


def test_counts_of_another_tokenizer_or_text_are_not_reused(
    tmp_path: Path, embedder: Embedder
) -> None:
    root = prepared(tmp_path, embedder)
    path = root / ".memdeck" / TOKEN_COUNTS_FILE
    data = json.loads(path.read_text())
    line = "- Has a dog called Luna 🐕"
    assert data["counts"][text_key(line)] == count_tokens(line)

    data["counts"] = {key: 999 for key in data["counts"]}
    path.write_text(json.dumps({**data, "tokenizer": "another-model 0123"}))
    assert TokenCounts(root).tally()(line) == count_tokens(line)

    path.write_text(json.dumps(data))  # the same tokenizer: the file is believed, by text
    tally = TokenCounts(root).tally()
    assert tally(line) == 999
    assert tally(line + " ") == count_tokens(line + " ")
