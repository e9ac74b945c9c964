"""Keeping secrets out of messages: API keys and the credentials and query strings of URLs."""

from __future__ import annotations

import re
from collections.abc import Iterable

_KEY_PATTERN = re.compile(r"\b(sk-[A-Za-z0-9_\-*.]{6,})")
_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9_\-.~+/=]{4,}")
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@]+@")
_URL_QUERY = re.compile(r"(?P<base>[A-Za-z][A-Za-z0-9+.-]*://[^\s?#]*)\?[^\s#)]*")


def display_url(text: str) -> str:
    """``text`` with every URL's user:password and query string (where keys hide) removed:
    what a message may show of a URL."""
    text = _URL_CREDENTIALS.sub(r"\g<scheme>[redacted]@", text)
    return _URL_QUERY.sub(r"\g<base>?[redacted]", text)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with API keys removed: the given secrets, anything shaped like ``sk-...`` or
    following ``Bearer``, and the credentials and query strings of URLs."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    text = _BEARER.sub(r"\1 [redacted]", _KEY_PATTERN.sub("sk-[redacted]", text))
    return display_url(text)
