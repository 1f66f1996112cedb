"""The official MCP Python SDK against the real `memgate-gateway serve` binary.

`run.sh` starts `memgate-gateway dev-upstream` (a Mem0-compatible upstream) and two `memgate-gateway
serve` processes on the same config folder (two replicas, no sticky sessions); `MEMGATE_GATEWAYS`
holds their `host:port` values and `MEMGATE_DEV_UPSTREAM` the upstream's. Nothing here stands in
for the gateway or the upstream: the request goes client -> gateway -> engine -> upstream over TCP.
"""

import json
import os
import urllib.request

import pytest

from test_mcp_client import NOTICE, AlternatingTransport, ClientSession, anyio, httpx2, streamable_http_client

GATEWAYS = [s for s in os.environ.get("MEMGATE_GATEWAYS", "").split(",") if s]
UPSTREAM = os.environ.get("MEMGATE_DEV_UPSTREAM", "")
API_KEY = os.environ.get("MEMGATE_DEV_UPSTREAM_API_KEY", "")


def setup_module():
    assert len(GATEWAYS) == 2 and UPSTREAM and API_KEY, "run through gateway/tests/python/run.sh"
    body = {
        "messages": [
            {"role": "user", "content": "Deploys to production need two approvals."},
            {"role": "user", "content": "Lunch is at noon."},
        ],
        "user_id": "repository-memory",
        "agent_id": "qwen-code",
        "infer": False,
    }
    request = urllib.request.Request(
        f"http://{UPSTREAM}/memories",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "x-api-key": API_KEY},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


def search_alternately(era, queries):
    async def main():
        transport = AlternatingTransport(GATEWAYS)
        async with httpx2.AsyncClient(transport=transport, timeout=30) as http:
            url = f"http://{GATEWAYS[0]}/mcp/repo-memory"
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    if era == "handshake":
                        await session.initialize()
                    else:
                        await session.discover()
                    tools = await session.list_tools()
                    results = [await session.call_tool("context_search", {"query": q}) for q in queries]
                    return tools, results, transport.used

    return anyio.run(main)


@pytest.mark.parametrize("era", ["handshake", "stateless"])
def test_context_search_round_trip_through_two_real_gateways(era):
    tools, results, used = search_alternately(era, ["production deploys", "  production\n\tdeploys  ", "lunch"])
    assert [tool.name for tool in tools.tools] == ["context_search"]
    for result in results:
        assert result.is_error is False
        assert len(result.content) == 1
        assert json.loads(result.content[0].text) == result.structured_content
        assert result.structured_content["untrusted_external_context"]["notice"] == NOTICE
    first = results[0].structured_content["untrusted_external_context"]["items"]
    assert [item["content"] for item in first] == ["Deploys to production need two approvals."]
    assert results[1].structured_content == results[0].structured_content
    lunch = results[2].structured_content["untrusted_external_context"]["items"]
    assert [item["content"] for item in lunch] == ["Lunch is at noon."]
    posts = {port for method, port in used if method == "POST"}
    assert len(posts) == 2, f"both gateway replicas served the client: {used}"
