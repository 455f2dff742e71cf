"""Secrets in the settings: :class:`Secret` (its ``repr`` never shows the value),
:func:`redact` for output and errors, and what of a URL is secret (:func:`url_secrets`) or fit
for logs (:func:`display_url`)."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import parse_qsl, urlsplit

REDACTED = "***"


class Secret:
    """A secret string. ``repr`` and ``str`` name where it came from, never its value."""

    __slots__ = ("_value", "origin")

    def __init__(self, value: str, origin: str) -> None:
        self._value = value
        self.origin = origin

    def reveal(self) -> str:
        """The secret value: only for building a request header, never for output."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret(<from {self.origin}>)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every occurrence of each secret value replaced by ``***``."""
    for value in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return text


def url_secrets(url: str) -> list[str]:
    """Secret parts of a URL: the userinfo password (and user:password) and query values."""
    parts = urlsplit(url)
    out: list[str] = []
    if parts.password:
        out += [parts.password, f"{parts.username}:{parts.password}"]
    out += [v for _, v in parse_qsl(parts.query, keep_blank_values=False) if len(v) >= 4]
    return out


def display_url(url: str) -> str:
    """A URL fit for logs: no user:password, query string replaced by ``?…``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    query = "?…" if parts.query else ""
    return f"{parts.scheme}://{netloc}{parts.path}{query}"
