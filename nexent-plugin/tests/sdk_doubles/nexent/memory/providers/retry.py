"""TEST DOUBLE of ``nexent.memory.providers.retry``: the provider exceptions and Nexent's retry loop.

Behaves as the real module (see the package docstring for the source):

- ``RetryConfig()``: 3 attempts; the pause after attempt ``n`` is ``1 s * 2**(n-1)``, capped at 30 s,
  times a random factor in [0.5, 1.5) (jitter). ``retry_after_seconds`` is never consulted.
- ``execute_with_retry``: a ``DegradableProviderError`` or ``NonRetryableProviderError`` leaves at
  once, unchanged. ANY other exception (``RetryableProviderError``, ``ValueError``, a pydantic
  ``ValidationError``, ...) is classified by the ``ProviderError`` it carries, retryable when it
  carries none. A non-retryable code (unauthorized, forbidden, invalid_payload, schema_mismatch)
  raises a NEW ``NonRetryableProviderError("<name> failed with non-retryable error", error)`` from
  inside the handler (so the original is its ``__context__``). Otherwise the loop logs a warning
  holding the exception's text, pauses and tries again; after the last attempt it logs an error
  (again with the text) and raises a NEW ``RetryableProviderError("<name> failed after 3
  attempts", error)`` carrying the last attempt's ``ProviderError`` (an ``unknown`` one when that
  exception carried none).

The pause goes through the module attribute ``_sleep`` so a test can record it instead of waiting.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any, Callable, Optional

from ..models import ProviderError, ProviderErrorCode, ProviderErrorSeverity

logger = logging.getLogger("memory_providers_retry")

_sleep = asyncio.sleep

_RETRYABLE_CODES = {
    ProviderErrorCode.TIMEOUT,
    ProviderErrorCode.RATE_LIMITED,
    ProviderErrorCode.PROVIDER_ERROR,
    ProviderErrorCode.UNKNOWN,
}
_DEGRADABLE_CODES = {ProviderErrorCode.UNSUPPORTED_UNIT_TYPE, ProviderErrorCode.PARTIAL_ACCEPTANCE}
_NON_RETRYABLE_CODES = {
    ProviderErrorCode.UNAUTHORIZED,
    ProviderErrorCode.FORBIDDEN,
    ProviderErrorCode.INVALID_PAYLOAD,
    ProviderErrorCode.SCHEMA_MISMATCH,
}


class RetryConfig:
    """Attempts and back-off of the retry loop."""

    def __init__(
        self,
        max_attempts: int = 3,
        backoff_base_seconds: float = 1.0,
        max_backoff_seconds: float = 30.0,
        jitter: bool = True,
    ):
        self.max_attempts = max_attempts
        self.backoff_base_seconds = backoff_base_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self.jitter = jitter

    def calculate_backoff(self, attempt: int) -> float:
        """Seconds to pause after failed attempt ``attempt`` (1-based)."""
        pause = min(self.backoff_base_seconds * (2 ** (attempt - 1)), self.max_backoff_seconds)
        return pause * (0.5 + random.random()) if self.jitter else pause


class RetryableProviderError(Exception):
    """A failure worth another attempt."""

    def __init__(self, message: str, error: ProviderError):
        super().__init__(message)
        self.error = error


class DegradableProviderError(Exception):
    """A failure the service may work around by dropping ``removable_units``."""

    def __init__(self, message: str, error: ProviderError, removable_units: Optional[list] = None):
        super().__init__(message)
        self.error = error
        self.removable_units = removable_units or []


class NonRetryableProviderError(Exception):
    """A failure another attempt cannot fix."""

    def __init__(self, message: str, error: ProviderError):
        super().__init__(message)
        self.error = error


def classify_error(error: ProviderError) -> ProviderErrorSeverity:
    """Severity by code. (The real code's last branch names a ``ProviderErrorSeverity.UNKNOWN``
    member that does not exist; it is unreachable because every code is in one of the sets.)"""
    if error.code in _RETRYABLE_CODES:
        return ProviderErrorSeverity.RETRYABLE
    if error.code in _DEGRADABLE_CODES:
        return ProviderErrorSeverity.DEGRADABLE
    if error.code in _NON_RETRYABLE_CODES:
        return ProviderErrorSeverity.NON_RETRYABLE
    raise AttributeError("UNKNOWN")


def _provider_error(exc: Exception) -> Optional[ProviderError]:
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, (RetryableProviderError, NonRetryableProviderError, DegradableProviderError)):
        return exc.error
    return None


async def execute_with_retry(operation: Callable[[], Any], config: RetryConfig, operation_name: str = "operation") -> Any:
    """Run ``operation`` (an async callable) with Nexent's retry rules (module docstring)."""
    last_error: Optional[ProviderError] = None
    for attempt in range(1, config.max_attempts + 1):
        try:
            return await operation()
        except (DegradableProviderError, NonRetryableProviderError):
            raise
        except Exception as exc:
            error = _provider_error(exc)
            severity = classify_error(error) if error else ProviderErrorSeverity.RETRYABLE
            if severity == ProviderErrorSeverity.NON_RETRYABLE:
                raise NonRetryableProviderError(f"{operation_name} failed with non-retryable error", error)
            last_error = error
            if attempt < config.max_attempts:
                pause = config.calculate_backoff(attempt)
                logger.warning(
                    f"{operation_name} failed (attempt {attempt}/{config.max_attempts}), "
                    f"retrying in {pause:.1f}s: {exc}"
                )
                await _sleep(pause)
            else:
                logger.error(f"{operation_name} failed after {config.max_attempts} attempts: {exc}")
    raise RetryableProviderError(
        f"{operation_name} failed after {config.max_attempts} attempts",
        last_error
        or ProviderError(
            code=ProviderErrorCode.UNKNOWN,
            message="Max retry attempts exceeded",
            severity=ProviderErrorSeverity.RETRYABLE,
        ),
    )
