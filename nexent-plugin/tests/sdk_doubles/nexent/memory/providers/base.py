"""TEST DOUBLE of ``nexent.memory.providers.base``: the two provider protocols (runtime
checkable), with the real method signatures."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Protocol, runtime_checkable

from ..models import MemoryIngestRequest, MemoryIngestResult, MemorySearchRequest, MemorySearchResult


@runtime_checkable
class SearchableMemoryProvider(Protocol):
    """A provider that answers searches."""

    @property
    def provider_name(self) -> str:
        """The provider's name."""
        ...

    async def search(
        self, request: MemorySearchRequest, limit: int = 5, filters: Optional[Dict[str, Any]] = None
    ) -> List[MemorySearchResult]:
        """Search; at most ``limit`` results."""
        ...


@runtime_checkable
class IngestibleMemoryProvider(Protocol):
    """A provider that accepts ingest events."""

    @property
    def provider_name(self) -> str:
        """The provider's name."""
        ...

    async def ingest(self, request: MemoryIngestRequest) -> MemoryIngestResult:
        """Store the request's units."""
        ...
