"""Cluster DNS, stood in for: names a tenant would resolve through the cluster's DNS
(``memgate-gateway.<ns>.svc``) map to the loopback address the end-to-end test gave that Service's
only pod. Set by ``MEMGATE_E2E_CLUSTER_DNS=name=address[,name=address...]``; every other name
resolves as usual. The clients themselves (the MCP SDK's HTTP client, the plugin's urllib) are not
changed: they resolve through ``socket.getaddrinfo`` as in a pod."""

import os
import socket

_resolve = socket.getaddrinfo


def install():
    """Route the configured names; returns the mapping (empty: nothing changed)."""
    mapping = {}
    for entry in filter(None, os.environ.get("MEMGATE_E2E_CLUSTER_DNS", "").split(",")):
        name, _, address = entry.partition("=")
        mapping[name.strip().lower()] = address.strip()

    def getaddrinfo(host, *args, **kwargs):
        # anyio (under the MCP SDK's HTTP client) passes the IDNA-encoded name as bytes.
        name = host.decode("ascii", "replace") if isinstance(host, bytes) else host
        if isinstance(name, str) and name.lower().rstrip(".") in mapping:
            host = mapping[name.lower().rstrip(".")]
        return _resolve(host, *args, **kwargs)

    if mapping:
        socket.getaddrinfo = getaddrinfo
    return mapping
