"""TEST DOUBLE of ``nexent.memory.providers``: re-exports what the real package exports from
``base`` and ``retry`` (its HTTP provider, registry and adapters are not reproduced)."""

from .base import IngestibleMemoryProvider, SearchableMemoryProvider
from .retry import (
    DegradableProviderError,
    NonRetryableProviderError,
    RetryableProviderError,
    RetryConfig,
    execute_with_retry,
)

__all__ = [
    "SearchableMemoryProvider",
    "IngestibleMemoryProvider",
    "RetryConfig",
    "RetryableProviderError",
    "DegradableProviderError",
    "NonRetryableProviderError",
    "execute_with_retry",
]
