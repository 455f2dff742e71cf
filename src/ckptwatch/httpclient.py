"""What every HTTP client of ckptwatch shares: the alert sinks (:mod:`ckptwatch.alerts.sinks`)
and the Prometheus pull (:mod:`ckptwatch.pull.promapi`) — credentials in a URL, basic auth,
the pause between retries, and redaction of a reason that was cut short.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

from ckptwatch.settings import REDACTED, redact

#: Seconds between a failed attempt and its retry.
RETRY_BACKOFF_S = 0.5


def split_userinfo(url: str) -> tuple[str, str | None]:
    """(url without user:password, "user:password" or None)."""
    parts = urlsplit(url)
    if parts.username is None:
        return url, None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return clean, f"{parts.username}:{parts.password or ''}"


def basic_auth(pair: str) -> str:
    """The ``Authorization`` header value for ``user:password``."""
    return "Basic " + base64.b64encode(pair.encode()).decode()


def redact_cut(text: str, secrets: Sequence[str], min_prefix: int = 4) -> str:
    """Redact ``text`` that was cut short: also a secret's first characters at its very end."""
    text = redact(text, secrets)
    for value in (v for v in secrets if v):
        for n in range(min(len(value) - 1, len(text)), min_prefix - 1, -1):
            if text.endswith(value[:n]):
                return text[: len(text) - n] + REDACTED
    return text
