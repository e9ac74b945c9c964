"""Token counts kept by the hash of their text, so what every start counts (MEMORY.md's lines
and block for the empty draft's preview) needs no tokenizer (~13 MB) while it is unchanged.

A :class:`Tally` counts like :func:`~.embeddings.count_tokens` (the same numbers: a count is
only reused for the very text, under the same tokenizer); :meth:`TokenCounts.keep` saves the
counts one tally used in ``.memdeck/token-counts.json`` (0600, replaced whole), in place of
those saved before: the file holds what the last start-like count needed, nothing more.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Mapping
from pathlib import Path

from .embeddings import count_tokens
from .fileio import read_own_file, replace_own_file
from .model_files import DEFAULT_MODEL
from .workspace import STATE_DIR

TOKEN_COUNTS_FILE = "token-counts.json"
#: The tokenizer the counts are of (its file is checked against this hash when it loads).
TOKENIZER = f"{DEFAULT_MODEL.name} {DEFAULT_MODEL.tokenizer_sha256}"


def text_key(text: str) -> str:
    """The hash a count is kept by (lone surrogates from an undecodable file included)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


class Tally:
    """A token counter that takes saved counts first and notes every count it gave."""

    def __init__(self, saved: Mapping[str, int]) -> None:
        self.saved = saved
        self.used: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        key = text_key(text)
        count = self.used.get(key)
        if count is None:
            count = self.saved.get(key)
            if count is None:
                count = count_tokens(text)
            self.used[key] = count
        return count


class TokenCounts:
    """The saved counts of the workspace at ``root`` (thread-safe)."""

    def __init__(self, root: Path) -> None:
        self.path = root / STATE_DIR / TOKEN_COUNTS_FILE
        self._saved: dict[str, int] | None = None
        self._lock = threading.Lock()

    def tally(self) -> Tally:
        with self._lock:
            if self._saved is None:
                self._saved = self._load()
            return Tally(self._saved)

    def keep(self, tally: Tally) -> None:
        """Save the counts ``tally`` used, for the next start (unless they are saved already)."""
        with self._lock:
            if tally.used == self._saved:
                return
            self._saved = dict(tally.used)
            data = {"tokenizer": TOKENIZER, "counts": self._saved}
            with contextlib.suppress(OSError):  # the next start counts again
                encoded = json.dumps(data, separators=(",", ":")).encode()
                replace_own_file(self.path, encoded, durable=False)  # a cache: no fsync

    def _load(self) -> dict[str, int]:
        try:
            data = json.loads(read_own_file(self.path))
            if data["tokenizer"] != TOKENIZER:
                return {}
            return {str(key): int(count) for key, count in data["counts"].items()}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return {}
