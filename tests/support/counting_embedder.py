"""A deterministic stand-in embedder for index tests that count what gets embedded."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DIMS = 8


@dataclass(frozen=True)
class CountingModel:
    """The model name the counting embedder shows."""

    name: str = "fake-model"
    dims: int = DIMS


class CountingEmbedder:
    """Deterministic vectors from the text's hash; remembers every text it embedded."""

    dims = DIMS
    fingerprint = "fake-model:d8"
    loaded = True
    spec = CountingModel()
    remote = False
    problem: str | None = None
    ready_now = True

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def warm(self) -> None:
        """Nothing to warm: the vectors come from hashes."""

    def load(self) -> None:
        """Nothing to load: the vectors come from hashes."""

    def close(self) -> None:
        """Nothing held outside this process."""

    def embed(
        self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None
    ) -> np.ndarray:
        """One unit vector per text, seeded by the text's hash."""
        self.embedded.extend(texts)
        out = np.zeros((len(texts), DIMS), dtype=np.float32)
        for row, text in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            vector = np.random.default_rng(seed).standard_normal(DIMS)
            out[row] = vector / np.linalg.norm(vector)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """The query's vector, as :meth:`embed` gives it."""
        vector: np.ndarray = self.embed([text])[0]
        return vector


def count_words(texts: Sequence[str]) -> list[int]:
    """A token counter that counts words."""
    return [len(text.split()) for text in texts]


def write_log(root: Path, name: str, facts: Sequence[str]) -> None:
    """Write ``memory/<name>.md`` with one section per fact."""
    body = "".join(f"## {fact.split()[0]}\n\n{fact}\n\n" for fact in facts)
    (root / "memory" / f"{name}.md").write_text(f"# {name}\n\n{body}", encoding="utf-8")
