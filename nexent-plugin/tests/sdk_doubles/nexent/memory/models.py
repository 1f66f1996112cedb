"""TEST DOUBLE of ``nexent.memory.models``: the memory provider data models.

Nexent defines these as pydantic models; this double reproduces their field names, defaults,
optionality and enum coercion with a small validating base class, so a plugin that passes a wrong
type, an unknown enum value or misses a required field fails here as it would under pydantic
(``ValidationError`` is a ``ValueError``). Unknown keyword arguments are ignored, as pydantic does by
default.
"""

from __future__ import annotations

from enum import Enum

_REQUIRED = object()


class ValidationError(ValueError):
    """Raised where pydantic would raise its ValidationError."""


class MemoryLayer(str, Enum):
    TENANT = "tenant"
    USER = "user"
    AGENT = "agent"


class UnitIngestStatus(str, Enum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    DEGRADED = "degraded"


class ProviderErrorCode(str, Enum):
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
    RETRYABLE = "retryable"
    DEGRADABLE = "degradable"
    NON_RETRYABLE = "non_retryable"


def _check(owner, name, kind, optional, value):
    if value is None:
        if optional:
            return None
        raise ValidationError(f"{owner}.{name}: none is not an allowed value")
    if isinstance(kind, type) and issubclass(kind, Enum):
        try:
            return kind(value)
        except ValueError:
            raise ValidationError(f"{owner}.{name}: {value!r} is not a valid {kind.__name__}") from None
    if isinstance(kind, tuple) and kind[0] == "list":
        if not isinstance(value, list):
            raise ValidationError(f"{owner}.{name}: a list is required")
        return [_check(owner, name, kind[1], False, item) for item in value]
    if isinstance(kind, type) and issubclass(kind, _Model):
        if isinstance(value, kind):
            return value
        if isinstance(value, dict):
            return kind(**value)
        raise ValidationError(f"{owner}.{name}: a {kind.__name__} is required")
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValidationError(f"{owner}.{name}: a number is required")
        return float(value)
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(f"{owner}.{name}: an integer is required")
        return value
    if kind is dict:
        if not isinstance(value, dict):
            raise ValidationError(f"{owner}.{name}: a dict is required")
        return dict(value)
    if not isinstance(value, kind):
        raise ValidationError(f"{owner}.{name}: a {kind.__name__} is required")
    return value


class _Model:
    """Fields: name -> (type, optional, default); ``_REQUIRED`` marks a required field."""

    _fields: dict = {}

    def __init__(self, **data):
        owner = type(self).__name__
        for name, (kind, optional, default) in self._fields.items():
            if name in data:
                value = _check(owner, name, kind, optional, data[name])
            elif default is _REQUIRED:
                raise ValidationError(f"{owner}.{name}: field required")
            else:
                value = default() if callable(default) else default
            object.__setattr__(self, name, value)

    def model_dump(self):
        def plain(value):
            if isinstance(value, Enum):
                return value.value
            if isinstance(value, _Model):
                return value.model_dump()
            if isinstance(value, list):
                return [plain(v) for v in value]
            return value

        return {name: plain(getattr(self, name)) for name in self._fields}

    def __eq__(self, other):
        return type(self) is type(other) and self.model_dump() == other.model_dump()

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in self.model_dump().items())
        return f"{type(self).__name__}({fields})"


class MemorySearchRequest(_Model):
    _fields = {
        "query": (str, False, _REQUIRED),
        "tenant_id": (str, False, _REQUIRED),
        "user_id": (str, False, _REQUIRED),
        "agent_id": (str, True, None),
        "conversation_id": (str, True, None),
        "layers": (("list", MemoryLayer), False, list),
        "top_k": (int, False, 5),
        "limit": (int, False, 5),
        "threshold": (float, True, 0.65),
        "embedding": (("list", float), True, None),
        "hybrid": (bool, False, False),
        "weight_accurate": (float, False, 0.3),
    }


class MemorySearchResult(_Model):
    _fields = {
        "memory_id": (int, True, None),
        "external_id": (str, True, None),
        "content": (str, False, _REQUIRED),
        "score": (float, False, _REQUIRED),
        "layer": (MemoryLayer, True, None),
        "source": (str, False, "internal"),
        "is_external": (bool, False, False),
        "metadata": (dict, False, dict),
    }


class UnitIngestResult(_Model):
    _fields = {
        "unit_id": (str, False, _REQUIRED),
        "status": (UnitIngestStatus, False, _REQUIRED),
        "message": (str, True, None),
    }


class MemoryIngestUnit(_Model):
    _fields = {
        "event_id": (str, False, _REQUIRED),
        "event_type": (str, False, _REQUIRED),
        "unit_type": (str, False, _REQUIRED),
        "unit_content": (str, False, _REQUIRED),
        "unit_index": (int, True, None),
        "metadata": (dict, False, dict),
    }


class MemoryIngestRequest(_Model):
    _fields = {
        "tenant_id": (str, False, _REQUIRED),
        "user_id": (str, False, _REQUIRED),
        "agent_id": (str, True, None),
        "conversation_id": (str, True, None),
        "units": (("list", MemoryIngestUnit), False, _REQUIRED),
        "idempotency_key": (str, False, _REQUIRED),
        "metadata": (dict, False, dict),
    }


class MemoryIngestResult(_Model):
    _fields = {
        "provider": (str, False, _REQUIRED),
        "status": (str, False, _REQUIRED),
        "accepted_count": (int, False, 0),
        "rejected_count": (int, False, 0),
        "unit_results": (("list", UnitIngestResult), False, list),
        "message": (str, True, None),
    }


class ProviderError(_Model):
    _fields = {
        "code": (ProviderErrorCode, False, _REQUIRED),
        "message": (str, False, _REQUIRED),
        "severity": (ProviderErrorSeverity, False, _REQUIRED),
        "retry_after_seconds": (int, True, None),
        "details": (dict, False, dict),
    }
