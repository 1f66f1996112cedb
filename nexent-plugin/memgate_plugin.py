"""memgate external memory provider for Nexent.

Written into Nexent's plugin folder by ``memgate-gateway write-nexent-plugins``; do not edit (it is
replaced). It forwards Nexent's search and ingest calls to the memgate gateway
(``POST <gateway_url>/nexent/v1/<provider>/search`` and ``.../ingest``) and maps the gateway's error
JSON ``{code, severity, message, retry_after_seconds}`` onto Nexent's provider exceptions.

Nexent constructs the provider as ``MemgateMemoryProvider(config)``: the saved settings as ONE
positional dict (``gateway_url``, ``provider``, ``access_token`` and Nexent's ``timeout_seconds``).
Keys may carry the ``plugin.`` prefix (an older loader passed them so; a prefixed key wins over a
bare one, as in Nexent's ``build_provider``), unknown keys are ignored, and keyword arguments work
too (they override the dict).

Only the standard library and the Nexent SDK are imported. The access token is sent as
``Authorization: Bearer <token>`` and is never put into an exception, a log line or a result; nor is
any response body or the gateway URL. Nexent stores ``str(exception)`` in its ingest event log and
logs it, so every exception message is fixed text. Every call builds one HTTP request with
``urllib`` in a worker thread and waits at most ``timeout_seconds`` for it.
"""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPException

from nexent.memory.models import (
    MemoryIngestResult,
    MemorySearchResult,
    ProviderError,
    UnitIngestResult,
)
from nexent.memory.providers.retry import (
    DegradableProviderError,
    NonRetryableProviderError,
    RetryableProviderError,
)

DEFAULT_TIMEOUT_SECONDS = 30.0  # Nexent's default for a provider's timeout_seconds
SETTING_PREFIX = "plugin."
MAX_RESPONSE_BYTES = 4 * 1024 * 1024
KNOWN_CODES = frozenset(
    {
        "timeout",
        "rate_limited",
        "provider_error",
        "unauthorized",
        "forbidden",
        "unsupported_unit_type",
        "partial_acceptance",
        "invalid_payload",
        "schema_mismatch",
        "unknown",
    }
)
SEVERITIES = frozenset({"retryable", "degradable", "non_retryable"})
EXCEPTIONS = {
    "retryable": RetryableProviderError,
    "degradable": DegradableProviderError,
    "non_retryable": NonRetryableProviderError,
}


def _fail(operation, code, severity, message, retry_after_seconds=None):
    """The Nexent exception for a failed call; ``message`` is always fixed text."""
    text = f"memgate {operation}: {message}"
    error = ProviderError(
        code=code, message=text, severity=severity, retry_after_seconds=retry_after_seconds
    )
    return EXCEPTIONS[severity](text, error)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Never follow a redirect: the request carries the access token, and a 3xx must not move it
    (or a forged answer) to another host. The 3xx then surfaces as an HTTPError."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


# No proxies from the environment and no redirects: the token goes to the configured gateway only.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


def _by_status(status):
    """(code, severity) for an HTTP status without a usable error body."""
    if status == 401:
        return "unauthorized", "non_retryable"
    if status == 403:
        return "forbidden", "non_retryable"
    if status in (408, 504):
        return "timeout", "retryable"
    if status == 429:
        return "rate_limited", "retryable"
    if status >= 500:
        return "provider_error", "retryable"
    if status in (400, 413, 422):
        return "invalid_payload", "non_retryable"
    return "provider_error", "non_retryable"


def _seconds(value):
    """A non-negative whole number of seconds, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and value >= 0:
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _text(value):
    return None if value is None else str(value)


def _settings(config, keywords):
    """One settings dict from Nexent's positional dict and keyword arguments.

    Bare keys first, then ``plugin.``-prefixed ones (Nexent's ``build_provider`` lets the prefixed
    value win), then keyword arguments. Non-string keys are ignored. ``None`` when ``config`` is
    neither a mapping nor absent."""
    if config is None:
        config = {}
    if not hasattr(config, "items"):
        return None
    merged = {}
    pairs = [(key, value) for key, value in config.items() if isinstance(key, str)]
    for key, value in pairs:
        if not key.startswith(SETTING_PREFIX):
            merged[key] = value
    for key, value in pairs:
        if key.startswith(SETTING_PREFIX):
            merged[key[len(SETTING_PREFIX):]] = value
    merged.update(keywords)
    return merged


def _url_problem(base):
    """Why ``base`` cannot be the gateway URL (fixed text, never the URL), or None."""
    try:
        parsed = urllib.parse.urlsplit(base)
        port_ok = parsed.port is None or parsed.port > 0
    except ValueError:
        return "the plugin setting gateway_url must be an http(s) URL"
    if parsed.scheme not in ("http", "https") or not parsed.hostname or not port_ok:
        return "the plugin setting gateway_url must be an http(s) URL"
    if parsed.query or parsed.fragment:
        return "the plugin setting gateway_url must be an http(s) URL"
    if "@" in parsed.netloc:
        # A password in the URL must never be sent or end up in a log or an event record.
        return "the plugin setting gateway_url must not hold user info"
    return None


def _timeout(value):
    """A positive number of seconds from Nexent's ``timeout_seconds`` (an int), else the default."""
    if isinstance(value, bool):
        return DEFAULT_TIMEOUT_SECONDS
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return DEFAULT_TIMEOUT_SECONDS
    return seconds if 0 < seconds < float("inf") else DEFAULT_TIMEOUT_SECONDS


class MemgateMemoryProvider:
    """A Nexent searchable/ingestible provider backed by one memgate provider."""

    def __init__(self, config=None, /, **settings):
        """``config``: the settings dict Nexent passes positionally; ``settings``: the same as
        keyword arguments (``gateway_url``, ``provider``, ``access_token``, ``timeout_seconds``)."""
        merged = _settings(config, settings)
        usable = merged or {}
        self._provider = str(usable.get("provider") or "").strip()
        self._token = str(usable.get("access_token") or "").strip()
        self._timeout = _timeout(usable.get("timeout_seconds"))
        base = str(usable.get("gateway_url") or "").strip().rstrip("/")
        self._problem = (
            ("the plugin settings must be a mapping" if merged is None else None)
            or _url_problem(base)
            or (None if self._provider else "the plugin setting provider must not be empty")
            # Checked here: urllib would echo an invalid header value in its error.
            or (
                "the plugin setting access_token holds characters a bearer token cannot have"
                if any(ord(c) < 0x21 or ord(c) > 0x7E for c in self._token)
                else None
            )
        )
        quoted = urllib.parse.quote(self._provider, safe="")
        self._base = f"{base}/nexent/v1/{quoted}"

    @property
    def provider_name(self):
        """The memgate provider name (also the ``source`` of every search result)."""
        return self._provider

    @property
    def timeout_seconds(self):
        """Seconds the socket may wait (the whole call gets one more)."""
        return self._timeout

    async def search(self, request, limit=5, filters=None):
        """Search the memgate provider; ``filters`` are not used (the scope is the provider's)."""
        try:
            limit = int(limit)
        except (TypeError, ValueError):
            limit = int(getattr(request, "limit", 5) or 5)
        body = {
            "query": request.query,
            "tenant_id": request.tenant_id,
            "user_id": request.user_id,
            "agent_id": getattr(request, "agent_id", None),
            "conversation_id": getattr(request, "conversation_id", None),
            "top_k": getattr(request, "top_k", limit),
            "limit": max(limit, 1),
        }
        answer = await self._call("search", body)
        if not isinstance(answer, list):
            raise _fail("search", "schema_mismatch", "non_retryable", "the gateway answered with an unexpected shape")
        try:
            return [
                MemorySearchResult(
                    external_id=str(item["external_id"]),
                    content=str(item["content"]),
                    score=float(item.get("score") or 0.0),
                    source=str(item.get("source") or self._provider),
                    is_external=True,
                    metadata=dict(item.get("metadata") or {}),
                )
                for item in answer
            ]
        except (KeyError, TypeError, ValueError, AttributeError):
            raise _fail(
                "search", "schema_mismatch", "non_retryable", "the gateway answered with an unexpected shape"
            ) from None

    async def ingest(self, request):
        """Write the request's units through the memgate provider (exactly once per idempotency key)."""
        body = {
            "tenant_id": request.tenant_id,
            "user_id": request.user_id,
            "agent_id": getattr(request, "agent_id", None),
            "conversation_id": getattr(request, "conversation_id", None),
            "idempotency_key": request.idempotency_key,
            "metadata": dict(getattr(request, "metadata", None) or {}),
            "units": [
                {
                    "event_id": unit.event_id,
                    "event_type": unit.event_type,
                    "unit_type": unit.unit_type,
                    "unit_content": unit.unit_content,
                    "unit_index": getattr(unit, "unit_index", None),
                    "metadata": dict(getattr(unit, "metadata", None) or {}),
                }
                for unit in request.units
            ],
        }
        answer = await self._call("ingest", body)
        try:
            return MemoryIngestResult(
                provider=str(answer.get("provider") or self._provider),
                status=str(answer["status"]),
                accepted_count=int(answer["accepted_count"]),
                rejected_count=int(answer["rejected_count"]),
                unit_results=[
                    UnitIngestResult(
                        unit_id=str(unit["unit_id"]), status=str(unit["status"]), message=_text(unit.get("message"))
                    )
                    for unit in answer["unit_results"]
                ],
                message=_text(answer.get("message")),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            raise _fail(
                "ingest", "schema_mismatch", "non_retryable", "the gateway answered with an unexpected shape"
            ) from None

    async def _call(self, operation, body):
        if self._problem:
            raise _fail(operation, "invalid_payload", "non_retryable", self._problem)
        try:
            data = json.dumps(body, default=str).encode("utf-8")
        except (TypeError, ValueError):
            raise _fail(operation, "invalid_payload", "non_retryable", "the request cannot be sent as JSON") from None
        try:
            return await asyncio.wait_for(
                asyncio.to_thread(self._post, operation, data), timeout=self._timeout + 1.0
            )
        except asyncio.TimeoutError:
            raise _fail(operation, "timeout", "retryable", "the gateway did not answer in time") from None

    def _post(self, operation, data):
        """POST ``data``; the decoded JSON of a 2xx answer, else a Nexent exception."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._token:
            headers["Authorization"] = "Bearer " + self._token
        request = urllib.request.Request(f"{self._base}/{operation}", data=data, headers=headers, method="POST")
        try:
            with _OPENER.open(request, timeout=self._timeout) as response:
                raw = response.read(MAX_RESPONSE_BYTES + 1)
        except urllib.error.HTTPError as err:
            failure = self._http_failure(operation, err)
            err.close()
            raise failure from None
        except (TimeoutError, socket.timeout):
            raise _fail(operation, "timeout", "retryable", "the gateway did not answer in time") from None
        except urllib.error.URLError as err:
            if isinstance(err.reason, (TimeoutError, socket.timeout)):
                raise _fail(operation, "timeout", "retryable", "the gateway did not answer in time") from None
            raise _fail(operation, "provider_error", "retryable", "the gateway cannot be reached") from None
        except (HTTPException, OSError):
            raise _fail(operation, "provider_error", "retryable", "the connection to the gateway failed") from None
        if len(raw) > MAX_RESPONSE_BYTES:
            raise _fail(operation, "schema_mismatch", "non_retryable", "the gateway's answer is too large")
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise _fail(operation, "schema_mismatch", "non_retryable", "the gateway's answer is not JSON") from None

    @staticmethod
    def _http_failure(operation, err):
        """The exception for a non-2xx answer: the gateway's code and severity when it sent its error JSON."""
        status = int(err.code or 0)
        code, severity = _by_status(status)
        retry_after = _seconds(err.headers.get("Retry-After")) if err.headers is not None else None
        try:
            payload = json.loads(err.read(64 * 1024).decode("utf-8"))
        except (OSError, HTTPException, UnicodeDecodeError, ValueError):
            payload = None
        if isinstance(payload, dict) and payload.get("code") in KNOWN_CODES and payload.get("severity") in SEVERITIES:
            code, severity = payload["code"], payload["severity"]
            if payload.get("retry_after_seconds") is not None:
                retry_after = _seconds(payload["retry_after_seconds"])
        elif isinstance(payload, dict) and isinstance(payload.get("code"), str) and payload.get("severity") in SEVERITIES:
            code, severity = "unknown", payload["severity"]
        return _fail(operation, code, severity, f"the gateway answered HTTP {status} ({code})", retry_after)
