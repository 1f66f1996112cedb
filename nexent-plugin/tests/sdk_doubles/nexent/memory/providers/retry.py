"""TEST DOUBLE of ``nexent.memory.providers.retry``: the provider exception classes, with Nexent's
constructor signatures (``reference/nexent.md`` §3), and its retry loop reduced to what the harness
uses (attempts without sleeping)."""

from __future__ import annotations

from typing import Optional

from ..models import ProviderError


class RetryableProviderError(Exception):
    """Error that indicates an operation can be retried."""

    def __init__(self, message: str, error: ProviderError):
        super().__init__(message)
        self.error = error


class DegradableProviderError(Exception):
    """Error that indicates an operation may succeed after degradation."""

    def __init__(self, message: str, error: ProviderError, removable_units: Optional[list] = None):
        super().__init__(message)
        self.error = error
        self.removable_units = removable_units or []


class NonRetryableProviderError(Exception):
    """Error that indicates an operation should not be retried."""

    def __init__(self, message: str, error: ProviderError):
        super().__init__(message)
        self.error = error


async def call_with_retries(operation, max_attempts: int = 3):
    """Nexent's loop without its back-off: non-retryable and degradable errors end it, retryable
    ones are tried again up to ``max_attempts`` times; the last one is raised."""
    for attempt in range(1, max_attempts + 1):
        try:
            return await operation()
        except RetryableProviderError:
            if attempt == max_attempts:
                raise
