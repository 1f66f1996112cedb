"""Nexent's external memory provider service, reproduced for the harness.

Mirrors, from ModelEngine-Group/nexent commit 828d302f9614d7def132de1deaf35891509327c9:

- ``MemoryExternalProviderService`` (``backend/services/memory_external_provider_service.py``):
  ``build_provider`` turns the saved parameters into ONE dict (every ``plugin.*`` key but
  ``plugin.name`` with the prefix stripped; bare schema keys copied when not already there; the
  provider row's ``timeout_seconds`` added when the row has it) and hands it to the loader, which
  calls ``provider_class(config)``. ``search`` and ``ingest`` build a fresh provider per call and run
  it through ``execute_with_retry(..., RetryConfig(), operation_name="search(<name>)")``. Search:
  every failure becomes ``[]``. Ingest: a non-retryable or retryable failure becomes
  ``MemoryIngestResult(status="error", message=str(exc))``; a ``ValueError`` outside the loop (bad
  settings) ``"Invalid provider configuration"``; anything else ``"Unexpected error"``; a degradable
  one drops ``removable_units`` and retries once, or reports ``degraded``. ``unauthorized`` and
  ``forbidden`` disable the provider configuration (here: recorded in ``disabled``). Failures are
  logged with the exception's text and traceback, as the real service does.
- ``MemoryIngestionEventService.send_ingest`` (``backend/services/memory_ingestion_event_service.py``):
  only units whose ``unit_type`` is allowed reach a provider (``EXTERNAL_MEMORY_DEFAULT_ALLOWED_UNIT_TYPES``:
  agent, user, tool, summary), the idempotency key is
  ``nexent:{tenant}:{agent}:{user}:{conversation}:{event_type}:{event_id}``, and every result goes into
  the ingest event log with ``response_summary = result.message or f"status={result.status}"``
  (here: ``event_log``).

Telemetry and the database are left out; nothing else is changed.
"""

from __future__ import annotations

import logging

from nexent.memory.models import MemoryIngestRequest, MemoryIngestResult, ProviderErrorCode
from nexent.memory.providers.retry import (
    DegradableProviderError,
    NonRetryableProviderError,
    RetryableProviderError,
    RetryConfig,
    execute_with_retry,
)

logger = logging.getLogger("memory_external_provider_service")

ALLOWED_UNIT_TYPES = frozenset({"agent", "user", "tool", "summary"})
_DISABLE_CODES = {ProviderErrorCode.UNAUTHORIZED, ProviderErrorCode.FORBIDDEN}


class ProviderService:
    """``MemoryExternalProviderService`` plus the ingest event orchestration, over one loader."""

    def __init__(self, loader):
        self.loader = loader
        self.disabled = []  # provider_config_id values Nexent would disable
        self.event_log = []  # rows Nexent would insert into its ingest event log

    def build_provider(self, config, params):
        """A fresh provider from a provider row (``config``) and its saved parameters."""
        name = params.get("plugin.name")
        if not name:
            raise ValueError("params must contain 'plugin.name'")
        plugin_config = {
            key[len("plugin."):]: value
            for key, value in params.items()
            if key.startswith("plugin.") and key != "plugin.name"
        }
        plugin = self.loader.get_plugin(name)
        if plugin is not None:
            for key in {item["key"] for item in plugin.config_schema}:
                if key not in plugin_config and key in params:
                    plugin_config[key] = params[key]
        if "timeout_seconds" in config:
            plugin_config["timeout_seconds"] = config["timeout_seconds"]
        return self.loader.build_provider(name, plugin_config)

    async def search(self, config, params, request, limit=5):
        """Search one provider; every failure is an empty list."""
        name = config.get("provider_name", "unknown")
        try:
            provider = self.build_provider(config, params)

            async def attempt():
                return await provider.search(request, limit=limit)

            return await execute_with_retry(attempt, RetryConfig(), operation_name=f"search({name})")
        except NonRetryableProviderError as exc:
            self._non_retryable(config, name, exc)
            return []
        except (DegradableProviderError, RetryableProviderError) as exc:
            logger.warning("Error from provider %s: %s", name, exc, exc_info=True)
            return []
        except ValueError:
            logger.warning("Invalid configuration for provider %s", name, exc_info=True)
            return []
        except Exception:
            logger.warning("Unexpected error searching provider %s", name, exc_info=True)
            return []

    async def ingest(self, config, params, request):
        """Ingest into one provider; failures become an ``error`` / ``degraded`` result."""
        name = config.get("provider_name", "unknown")
        provider = None
        try:
            provider = self.build_provider(config, params)

            async def attempt():
                return await provider.ingest(request)

            return await execute_with_retry(attempt, RetryConfig(), operation_name=f"ingest({name})")
        except DegradableProviderError as exc:
            return await self._degradable(provider, name, request, exc)
        except NonRetryableProviderError as exc:
            self._non_retryable(config, name, exc)
            return MemoryIngestResult(provider=name, status="error", message=str(exc))
        except RetryableProviderError as exc:
            logger.warning("Retryable error from provider %s after all retries: %s", name, exc, exc_info=True)
            return MemoryIngestResult(provider=name, status="error", message=str(exc))
        except ValueError:
            logger.warning("Invalid configuration for provider %s", name, exc_info=True)
            return MemoryIngestResult(provider=name, status="error", message="Invalid provider configuration")
        except Exception:
            logger.warning("Unexpected error ingesting to provider %s", name, exc_info=True)
            return MemoryIngestResult(provider=name, status="error", message="Unexpected error")

    async def send_ingest(self, config, params, tenant_id, user_id, agent_id, conversation_id, event_type, event_id, units):
        """``MemoryIngestionEventService.send_ingest`` for one enabled provider."""
        name = config.get("provider_name", "unknown")
        allowed = [unit for unit in units if unit.unit_type in ALLOWED_UNIT_TYPES]
        if not allowed:
            return MemoryIngestResult(provider=name, status="ok", accepted_count=0)
        key = f"nexent:{tenant_id}:{agent_id}:{user_id}:{conversation_id}:{event_type}:{event_id}"
        request = MemoryIngestRequest(
            tenant_id=tenant_id,
            user_id=user_id,
            agent_id=agent_id,
            conversation_id=conversation_id,
            units=allowed,
            idempotency_key=key,
        )
        result = await self.ingest(config, params, request)
        self.event_log.append(
            {
                "provider": name,
                "event_id": event_id,
                "idempotency_key": key,
                "unit_ids": ",".join(unit.event_id for unit in allowed),
                "response_status": result.status,
                "response_summary": result.message or f"status={result.status}",
            }
        )
        return result

    def _non_retryable(self, config, name, exc):
        code = exc.error.code if exc.error else None
        config_id = config.get("provider_config_id")
        if code in _DISABLE_CODES and config_id:
            logger.warning("Disabling provider %s (id=%d) due to %s error: %s", name, config_id, code, exc)
            self.disabled.append(config_id)
        else:
            logger.warning("Non-retryable error from provider %s: %s", name, exc, exc_info=True)

    async def _degradable(self, provider, name, request, exc):
        code = exc.error.code if exc.error else None
        if code == ProviderErrorCode.PARTIAL_ACCEPTANCE:
            return MemoryIngestResult(provider=name, status="degraded", message="Partial acceptance")
        removable = set(exc.removable_units or [])
        if not removable:
            return MemoryIngestResult(provider=name, status="degraded", message=str(exc))
        kept = [unit for unit in request.units if unit.event_id not in removable]
        if not kept:
            return MemoryIngestResult(provider=name, status="degraded", accepted_count=0, message="All units rejected")
        try:
            result = await provider.ingest(request.model_copy(update={"units": kept}))
            result.status = "degraded"
            return result
        except Exception:
            logger.warning("Retry after degradable error failed for provider %s", name, exc_info=True)
            return MemoryIngestResult(provider=name, status="error", message="Retry after degradation failed")
