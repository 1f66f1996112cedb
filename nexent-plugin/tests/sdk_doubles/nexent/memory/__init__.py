"""TEST DOUBLE of ``nexent.memory``: re-exports the same names the real package exports from its
models and providers, for the pieces reproduced here (the real one also exports its own memory
service, retrieval pipeline and embedding helpers, which a provider plugin never uses). As in the
real package, the ingest models are NOT re-exported here: import them from
``nexent.memory.models``."""

from .models import (
    MemoryLayer,
    MemorySearchRequest,
    MemorySearchResult,
    ProviderError,
    ProviderErrorCode,
    ProviderErrorSeverity,
    UnitIngestResult,
    UnitIngestStatus,
)
from .providers import (
    DegradableProviderError,
    IngestibleMemoryProvider,
    NonRetryableProviderError,
    RetryableProviderError,
    RetryConfig,
    SearchableMemoryProvider,
    execute_with_retry,
)

__all__ = [
    "MemoryLayer",
    "MemorySearchRequest",
    "MemorySearchResult",
    "UnitIngestResult",
    "UnitIngestStatus",
    "ProviderError",
    "ProviderErrorCode",
    "ProviderErrorSeverity",
    "SearchableMemoryProvider",
    "IngestibleMemoryProvider",
    "RetryConfig",
    "RetryableProviderError",
    "DegradableProviderError",
    "NonRetryableProviderError",
    "execute_with_retry",
]
