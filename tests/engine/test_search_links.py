"""Update links' fast paths give what their slow definitions give: the change test, and the
batched stems and document counts."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from tui.engine.embeddings import Embedder
from tui.engine.engine import MemoryEngine
from tui.engine.search_links import (
    _CHANGE,
    _PRONOUNS,
    _WORDS,
    _names_nothing,
    _shares_word,
    own_words,
    tells_of_change,
)

CHANGES = [
    "Switched from Vim to Zed",
    "switching jobs in May",
    "Migrating Harbor's database off Postgres",
    "Replaced VS Code with Helix",
    "No longer drinks coffee",
    "doesn't eat meat any more.",
    "doesn't eat meat anymore",
    "Gave fish a try and I'm not going back",
    "moved the CI off the old runner",
    "from LastPass to 1Password",
    "from the old flat to the new one",
    "NOW reporting to Priya",
    "the launch slipped to June",
    "now_playing is a variable",  # one word to the pattern
    "snow and knowledge",  # 'now' inside other words
    "replacement parts arrived",
    "premigration notes",
    "more or less the same",
    "came back from Lisbon",
    "offline sync is off",
    "kick-off meeting",
    "Dropped by the office",
    "from here",
    "",
]


def test_own_words_agrees_with_its_definition() -> None:
    rng = random.Random(5)
    vocabulary = [*" ".join(CHANGES).split(), "İstanbul", "STRASSE", "Straße", "snake_case", "ǅx"]
    texts = [" ".join(rng.choices(vocabulary, k=rng.randint(1, 12))) for _ in range(500)]
    for text in texts:
        assert own_words(text) == {w.lower() for w in _WORDS.findall(text)}, text
        assert own_words(text) is own_words(text)  # kept, not split again


def test_tells_of_change_agrees_with_the_pattern() -> None:
    rng = random.Random(3)
    vocabulary = " ".join(CHANGES).split() + "the a of to in on at Vim Zed flat tea".split()
    texts = CHANGES + [" ".join(rng.choices(vocabulary, k=rng.randint(1, 30))) for _ in range(2000)]
    for text in texts:
        assert tells_of_change(text, own_words(text)) == bool(_CHANGE.search(text)), text


def test_names_nothing_agrees_with_the_pattern() -> None:
    words = {w for text in CHANGES for w in _WORDS.findall(text)}
    words |= {w.upper() for w in words} | {w.capitalize() for w in words}
    words |= {"Everything", "everything", "nobody", "migrate", "REPLACING", "ſwitch", "İnstead"}
    for word in sorted(words):
        expected = word in _PRONOUNS or _CHANGE.fullmatch(word) is not None
        assert _names_nothing(word) == expected, word


def test_shares_word_agrees_with_own_words() -> None:
    rng = random.Random(7)
    vocabulary = [*" ".join(CHANGES).split(), "Vim", "vimrc", "İstanbul", "istanbul", "Straße"]
    texts = [" ".join(rng.choices(vocabulary, k=rng.randint(1, 12))) for _ in range(500)]
    for text in texts:
        for words in ({"vim"}, {"istanbul", "zed"}, {"straße"}, {"now"}):
            assert _shares_word(words, text) == bool(words & own_words(text)), (words, text)


def test_batched_stems_and_counts_match_one_at_a_time(tmp_path: Path, embedder: Embedder) -> None:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "2026-11-20.md").write_text(
        "# 2026-11-20\n\n- Running along the canal\n- Runs 25 km a week\n- Deployed the services\n",
        encoding="utf-8",
    )
    words = ["running", "runs", "deployed", "services", "canal", "absent", "running"]
    engine = MemoryEngine(root, embedder=embedder)
    try:
        engine.sync()
        index = engine.index
        one_by_one = {w: (index.stem(w), index.doc_count(w)) for w in words}
    finally:
        engine.close()
    engine = MemoryEngine(root, embedder=embedder)  # no counts cached (stems are, process-wide)
    try:
        stems, counts = engine.index.stems(words), engine.index.doc_counts(words)
        assert {w: (stems[w], counts[w]) for w in words} == one_by_one
        assert stems["running"] == stems["runs"] and counts["running"] > 0 == counts["absent"]
    finally:
        engine.close()


def test_a_repeated_query_is_embedded_once(tmp_path: Path) -> None:
    """The turn searches the draft the live preview has just embedded: no second model run."""

    class CountingEmbedder(Embedder):
        queries: list[str] = []

        def embed_query(self, text: str) -> np.ndarray:
            self.queries.append(text)
            return super().embed_query(text)

    root = tmp_path / "ws"
    root.mkdir()
    (root / "MEMORY.md").write_text("# Memory\n\n- Deploys go through staging\n", encoding="utf-8")
    embedder = CountingEmbedder()
    engine = MemoryEngine(root, embedder=embedder)
    try:
        engine.load_model()
        engine.sync()
        first = engine.search("how do deploys work?").results
        again = engine.search("how do deploys work?").results
        other = engine.search("what about staging?").results
        assert embedder.queries == ["how do deploys work?", "what about staging?"]
        assert [r.score for r in first] == [r.score for r in again] and first and other
    finally:
        engine.close()
