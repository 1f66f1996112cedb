"""TEST DOUBLE of ``nexent.memory.models``: the external memory provider models.

Pydantic v2 ``BaseModel`` subclasses with the real field names, types, defaults and optionality
(see the package docstring for the source). Like the real ones they use pydantic's default (lax)
validation: ``str`` fields refuse numbers, ``metadata`` is ``Dict[str, Any]`` so its keys must be
strings, enums accept their values, unknown keyword arguments are ignored. Only the models a
provider plugin or the provider service touches are reproduced.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Dict, List, Optional

from pydantic import BaseModel, Field


class MemoryLayer(str, Enum):
    """Memory scope layers."""

    TENANT = "tenant"
    USER = "user"
    AGENT = "agent"


class MemorySearchRequest(BaseModel):
    """A search as the service hands it to every enabled provider."""

    query: str
    tenant_id: str
    user_id: str
    agent_id: Optional[str] = None
    conversation_id: Optional[str] = None
    layers: List[MemoryLayer] = Field(default_factory=list)
    top_k: int = 5
    limit: int = 5
    threshold: Optional[float] = 0.65
    embedding: Optional[List[float]] = None
    hybrid: bool = False
    weight_accurate: float = 0.3


class MemorySearchResult(BaseModel):
    """One search hit; external providers set ``external_id``, ``source`` and ``is_external``."""

    memory_id: Optional[int] = None
    external_id: Optional[str] = None
    content: str
    score: float
    layer: Optional[MemoryLayer] = None
    source: str = "internal"
    is_external: bool = False
    metadata: Dict[str, Any] = Field(default_factory=dict)


class UnitIngestStatus(str, Enum):
    """Outcome of one ingested unit."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    DEGRADED = "degraded"


class UnitIngestResult(BaseModel):
    """Outcome of one unit; ``unit_id`` is the unit's ``event_id``."""

    unit_id: str
    status: UnitIngestStatus
    message: Optional[str] = None


class MemoryIngestUnit(BaseModel):
    """One unit of an ingest event."""

    event_id: str
    event_type: str
    unit_type: str
    unit_content: str
    unit_index: Optional[int] = None
    metadata: Dict[str, Any] = Field(default_factory=dict)


class MemoryIngestRequest(BaseModel):
    """An ingest event for one provider."""

    tenant_id: str
    user_id: str
    agent_id: Optional[str] = None
    conversation_id: Optional[str] = None
    units: List[MemoryIngestUnit]
    idempotency_key: str
    metadata: Dict[str, Any] = Field(default_factory=dict)


class MemoryIngestResult(BaseModel):
    """What an ingest produced (``status`` is a plain string: ok, partial, error, degraded, ...)."""

    provider: str
    status: str
    accepted_count: int = 0
    rejected_count: int = 0
    unit_results: List[UnitIngestResult] = Field(default_factory=list)
    message: Optional[str] = None


class ProviderErrorCode(str, Enum):
    """Error codes a provider reports."""

    TIMEOUT = "timeout"
    RATE_LIMITED = "rate_limited"
    PROVIDER_ERROR = "provider_error"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    UNSUPPORTED_UNIT_TYPE = "unsupported_unit_type"
    PARTIAL_ACCEPTANCE = "partial_acceptance"
    INVALID_PAYLOAD = "invalid_payload"
    SCHEMA_MISMATCH = "schema_mismatch"
    UNKNOWN = "unknown"


class ProviderErrorSeverity(str, Enum):
    """How the retry loop treats an error."""

    RETRYABLE = "retryable"
    DEGRADABLE = "degradable"
    NON_RETRYABLE = "non_retryable"


class ProviderError(BaseModel):
    """The structured error carried by the provider exceptions."""

    code: ProviderErrorCode
    message: str
    severity: ProviderErrorSeverity
    retry_after_seconds: Optional[int] = None
    details: Dict[str, Any] = Field(default_factory=dict)
