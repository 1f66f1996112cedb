"""Nexent's side of the end-to-end path: the plugin folder the gateway pod's init container wrote
into the plugin claim, loaded by the harness's reproduction of Nexent's loader, built and called by
its reproduction of Nexent's provider service (one positional settings dict, the real retry loop),
exactly as ``nexent-plugin/tests`` does (see its ``nexent_loader.py`` for the Nexent sources it
mirrors). The Nexent SDK is the harness's test double (``sdk_doubles/``; the real SDK is not on PyPI).

    python nexent_round_trip.py PLUGINS_DIR PROVIDER MARKER   (token in MEMGATE_E2E_CALLER_TOKEN)

Ingests two units holding MARKER, then searches for it; prints one JSON line with the plugin list,
the ingest result and the contents found.
"""

import asyncio
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS = os.path.join(HERE, "..", "..", "nexent-plugin", "tests")
sys.path.insert(0, os.path.join(HARNESS, "sdk_doubles"))  # the `nexent` TEST DOUBLE
sys.path.insert(0, HARNESS)
sys.path.insert(0, HERE)

import cluster_dns  # noqa: E402
import nexent_loader  # noqa: E402
import nexent_service  # noqa: E402
from nexent.memory.models import MemoryIngestRequest, MemoryIngestUnit, MemorySearchRequest  # noqa: E402


def main(folder, provider, marker):
    loader = nexent_loader.PluginLoader(folder).load_all()
    name = f"memgate-{provider}"
    plugin = loader.get_plugin(name)
    if plugin is None:
        return {"plugins": sorted(loader.plugins), "skipped": loader.skipped}
    service = nexent_service.ProviderService(loader)
    row = {"provider_name": name, "provider_config_id": 1, "enabled": True, "timeout_seconds": 10}
    params = nexent_loader.saved_parameters(plugin, access_token=os.environ["MEMGATE_E2E_CALLER_TOKEN"])
    units = [
        MemoryIngestUnit(event_id=f"{marker}-{i}", event_type="message", unit_type=kind, unit_content=text)
        for i, (kind, text) in enumerate(
            [("user", f"Release {marker} ships on Tuesday."), ("agent", f"Noted: release {marker} is on Tuesday.")]
        )
    ]
    request = MemoryIngestRequest(
        tenant_id="tenant-e2e", user_id="user-e2e", agent_id="agent-e2e", conversation_id="conv-e2e",
        units=units, idempotency_key=f"nexent:tenant-e2e:agent-e2e:user-e2e:conv-e2e:message:{marker}",
    )
    ingested = asyncio.run(service.ingest(row, params, request))
    query = MemorySearchRequest(
        query=f"release {marker} ships", tenant_id="tenant-e2e", user_id="user-e2e", agent_id="agent-e2e", limit=5
    )
    found = asyncio.run(service.search(row, params, query, limit=5))
    return {
        "plugins": sorted(loader.plugins),
        "implements": list(plugin.implements),
        "ingest": {
            "status": ingested.status,
            "accepted": ingested.accepted_count,
            "rejected": ingested.rejected_count,
        },
        "found": [result.content for result in found],
        "sources": sorted({result.source for result in found}),
    }


if __name__ == "__main__":
    cluster_dns.install()
    print(json.dumps(main(sys.argv[1], sys.argv[2], sys.argv[3])))
