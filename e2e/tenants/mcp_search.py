"""A tenant's ``context_search`` call with the official MCP Python SDK (mcp==2.3.0), as an agent in
the cluster makes it: the provider's ``status.endpoints.mcp`` URL and its caller token as a bearer
header (what ``examples/qwen-code/settings.json`` configures for Qwen Code).

    python mcp_search.py URL QUERY        (token in MEMGATE_E2E_CALLER_TOKEN)

Prints one JSON line: ``{"is_error": bool, "text": str, "structured": object|null, "tools": [...]}``.
"""

import json
import os
import sys

import anyio
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

import cluster_dns


async def main(url, query):
    headers = {"Authorization": f"Bearer {os.environ['MEMGATE_E2E_CALLER_TOKEN']}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                result = await session.call_tool("context_search", {"query": query})
    text = result.content[0].text if result.content else ""
    return {
        "is_error": bool(result.is_error),
        "text": text,
        "structured": result.structured_content,
        "tools": [tool.name for tool in tools.tools],
    }


if __name__ == "__main__":
    cluster_dns.install()
    print(json.dumps(anyio.run(main, sys.argv[1], sys.argv[2])))
