"""Prometheus' HTTP API, read-only: ``/api/v1/series`` and ``/api/v1/query_range``.

Requests are form-encoded POSTs (long selectors never hit a URL length limit), with the alert
sinks' conventions (``ckptwatch.alerts.sinks``): a timeout per attempt, ``retries`` more
attempts on a connection error, a timeout, a 5xx or a 429, basic or bearer auth from the
settings (which read them from the environment), and every secret redacted from errors. Each
failure is one :class:`PullError` line: the URL as logs show it, what went wrong (the server's
own error text, control characters escaped) and what to do.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ckptwatch import __version__
from ckptwatch.errors import PullError
from ckptwatch.httpclient import RETRY_BACKOFF_S, basic_auth, redact_cut, split_userinfo
from ckptwatch.safetext import escape_controls
from ckptwatch.settings import PrometheusSettings, display_url, redact

#: Longest part of a server's error text kept in a message.
ERROR_TEXT_CHARS = 300


def _server_error(body: bytes) -> str:
    """The ``error`` of Prometheus' JSON error body, else the body's first characters."""
    text = body.decode("utf-8", errors="replace")
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("error"), str):
        text = f"{doc.get('errorType', 'error')}: {doc['error']}"
    return escape_controls(" ".join(text.split()))[:ERROR_TEXT_CHARS]


@dataclass
class PrometheusAPI:
    """One Prometheus server: ``base_url`` (may carry ``user:password@``) and its settings."""

    base_url: str
    settings: PrometheusSettings
    secrets: Sequence[str] = ()

    @property
    def shown(self) -> str:
        """The server's URL as logs show it."""
        return display_url(self.base_url.rstrip("/"))

    def _headers(self) -> tuple[str, dict[str, str], list[str]]:
        target, userinfo = split_userinfo(self.base_url.rstrip("/"))
        headers = {"User-Agent": f"ckptwatch/{__version__}", "Accept": "application/json",
                   "Content-Type": "application/x-www-form-urlencoded"}
        secrets = list(self.secrets)
        s = self.settings
        if s.basic_auth is not None:
            headers["Authorization"] = basic_auth(s.basic_auth.reveal())
            secrets.append(s.basic_auth.reveal())
        elif s.token is not None:
            headers["Authorization"] = f"Bearer {s.token.reveal()}"
            secrets.append(s.token.reveal())
        elif userinfo:
            headers["Authorization"] = basic_auth(userinfo)
            secrets += [userinfo, userinfo.partition(":")[2]]
        return target, headers, secrets

    def call(self, path: str, params: Sequence[tuple[str, str]] | Mapping[str, str], *,
             method: str = "POST") -> Any:
        """POST ``params`` to ``path`` (``method="GET"``: in the query string, for the
        endpoints that take only GET) and return the answer's ``data``; :class:`PullError`
        after the retries."""
        target, headers, secrets = self._headers()
        query = urllib.parse.urlencode(params)
        body: bytes | None = query.encode()
        if method == "GET":
            path_query, body = f"{path}?{query}", None
            del headers["Content-Type"]
        else:
            path_query = path
        s = self.settings
        reason, hint = "", ""
        tries = 0
        raw: bytes | None = None
        for attempt in range(s.retries + 1):
            tries = attempt + 1
            if attempt:
                time.sleep(RETRY_BACKOFF_S)
            req = urllib.request.Request(target + path_query, data=body, headers=headers,
                                         method=method)
            try:
                with urllib.request.urlopen(req, timeout=s.timeout_s) as resp:
                    raw = resp.read()
                break
            except urllib.error.HTTPError as exc:
                try:
                    text = _server_error(exc.read(4096))
                except (OSError, ValueError):
                    text = ""
                reason = f"HTTP {exc.code} {exc.reason}" + (f": {text}" if text else "")
                if exc.code in (401, 403):
                    hint = ("; check the credentials ([prometheus] token_env / basic_auth_env, "
                            "or $CKPTWATCH_PROMETHEUS_TOKEN / $CKPTWATCH_PROMETHEUS_BASIC_AUTH)")
                elif exc.code == 422 or (exc.code == 400 and "resolution" in text):
                    hint = "; narrow the time range or raise --step"
                if exc.code < 500 and exc.code != 429:
                    break  # the request is wrong: retrying will not help
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                inner = getattr(exc, "reason", exc)
                reason = f"cannot reach the server: {inner or type(inner).__name__}"
                hint = "; check the URL and that Prometheus is running"
        if raw is None:
            raise self._error(path, tries, reason, hint, secrets)
        try:
            doc = json.loads(raw)
        except ValueError:
            raise self._error(path, tries, "the answer is not JSON: "
                              + _server_error(raw[:ERROR_TEXT_CHARS]),
                              "; is this the Prometheus server's base URL?", secrets) from None
        if not isinstance(doc, dict) or doc.get("status") != "success":
            text = _server_error(raw) if isinstance(doc, dict) else "not a Prometheus answer"
            raise self._error(path, tries, text, "", secrets)
        return doc.get("data")

    def _error(self, path: str, tries: int, reason: str, hint: str,
               secrets: Sequence[str]) -> PullError:
        attempts = f" ({tries} attempt{'s' if tries > 1 else ''})" if tries > 1 else ""
        msg = f"Prometheus {self.shown}{path}{attempts}: {reason}{hint}"
        return PullError(redact_cut(redact(msg, secrets), secrets))

    def series(self, match: str, start: float, end: float) -> list[dict[str, str]]:
        """Label sets of the series ``match`` selects between ``start`` and ``end`` (epoch s)."""
        data = self.call("/api/v1/series", [("match[]", match), ("start", _num(start)),
                                            ("end", _num(end))])
        if not isinstance(data, list):
            raise PullError(f"Prometheus {self.shown}/api/v1/series: answer is not a list")
        return [d for d in data if isinstance(d, dict)]

    def label_values(self, label: str, match: str, start: float, end: float) -> list[str]:
        """The values of ``label`` on the series ``match`` selects between ``start`` and
        ``end`` (``/api/v1/label/<label>/values``: for ``__name__``, metric names only)."""
        path = f"/api/v1/label/{label}/values"
        data = self.call(path, [("match[]", match), ("start", _num(start)),
                                ("end", _num(end))], method="GET")
        if not isinstance(data, list):
            raise PullError(f"Prometheus {self.shown}{path}: answer is not a list")
        return [d for d in data if isinstance(d, str)]

    def query_range(self, expr: str, start: float, end: float,
                    step: float) -> list[dict[str, Any]]:
        """The matrix ``expr`` evaluates to: ``[{"metric": {...}, "values": [[t, "v"], ...]}]``."""
        data = self.call("/api/v1/query_range", {"query": expr, "start": _num(start),
                                                 "end": _num(end), "step": _num(step)})
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            raise PullError(f"Prometheus {self.shown}/api/v1/query_range: answer is not a "
                            f"matrix for {expr!r}")
        result = data.get("result") or []
        return [r for r in result if isinstance(r, dict)]


def _num(value: float) -> str:
    """A time or step as Prometheus reads it (seconds, up to milliseconds)."""
    return f"{value:.3f}".rstrip("0").rstrip(".")
