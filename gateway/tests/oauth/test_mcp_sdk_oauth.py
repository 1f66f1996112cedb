"""The official MCP Python SDK signs in to an OIDC-protected provider by itself.

The client is the SDK's own `OAuthClientProvider` (authorization code + PKCE, the flow of the MCP
authorization specification) given only what any MCP application gives it: the MCP URL, its
pre-registered client id and redirect URI, token storage, and the two callbacks an application
implements to open a browser and receive the redirect. Nothing in it knows about memgate: on the
gateway's 401 it reads `resource_metadata` from `WWW-Authenticate`, fetches the protected resource
metadata, then Hydra's metadata, gets a token and retries the call.

The "browser" and the identity provider's login/consent app are played here through Hydra's admin
API. The consent app grants the requested scopes and, as access-token audience, the RFC 8707
`resource` the client asked for: Hydra (fosite) does not implement RFC 8707 itself, so a platform
team running Hydra configures its consent app this way (or clients send `audience`, as Qwen Code's
`oauth.audiences` does).
"""

import json
from urllib.parse import parse_qs, urlparse

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata

from conftest import SCOPE, free_port, http
from test_oidc_hydra import oidc_user_id


class AppTokenStorage:
    """What an MCP application keeps between runs: its registration and its tokens."""

    def __init__(self, client_info):
        self.client_info = client_info
        self.tokens = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


class BrowserAndPerson:
    """Follows the authorization redirect like a browser; signs in as `subject` and consents."""

    def __init__(self, hydra, redirect_uri, subject):
        self.hydra, self.redirect_uri, self.subject = hydra, redirect_uri, subject
        self.result = None
        self.granted_audience = None

    def _accept(self, kind, challenge, body):
        status, _, answer = http(
            "PUT", f"{self.hydra.admin}/admin/oauth2/auth/requests/{kind}/accept?{kind}_challenge={challenge}", body=body
        )
        assert status == 200, answer
        return json.loads(answer)["redirect_to"]

    async def open(self, authorization_url):
        async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser:
            response = await browser.get(authorization_url)
            for _ in range(10):
                assert response.status_code in (302, 303), response.text
                location = response.headers["location"]
                query = parse_qs(urlparse(location).query)
                if location.startswith("http://127.0.0.1:9/login"):
                    next_url = self._accept("login", query["login_challenge"][0], {"subject": self.subject})
                elif location.startswith("http://127.0.0.1:9/consent"):
                    challenge = query["consent_challenge"][0]
                    status, _, request = http(
                        "GET", f"{self.hydra.admin}/admin/oauth2/auth/requests/consent?consent_challenge={challenge}"
                    )
                    assert status == 200, request
                    request = json.loads(request)
                    resource = parse_qs(urlparse(request["request_url"]).query)["resource"]
                    self.granted_audience = resource
                    next_url = self._accept(
                        "consent",
                        challenge,
                        {"grant_scope": request["requested_scope"], "grant_access_token_audience": resource},
                    )
                elif location.startswith(self.redirect_uri):
                    assert "code" in query, location
                    self.result = AuthorizationCodeResult(
                        code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
                    )
                    return
                else:
                    next_url = location
                response = await browser.get(next_url)
        raise AssertionError("the authorization flow did not reach the redirect URI")

    async def callback(self):
        assert self.result is not None
        return self.result


def test_the_sdk_discovers_signs_in_and_calls_the_tool(stack, hydra):
    redirect_uri = f"http://127.0.0.1:{free_port()}/callback"
    resource = f"{stack.public}/mcp/team"
    hydra.create_client(
        client_id="laptop-app",
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        redirect_uris=[redirect_uri],
        # The SDK adds offline_access when the server offers it and the client can refresh (SEP-2207).
        scope=f"{SCOPE} offline_access",
        audience=[resource],
        token_endpoint_auth_method="none",
    )
    stack.store(oidc_user_id(hydra.issuer, "erin"), "Erin's deploy notes: canary first, then the rest.")
    stack.store(oidc_user_id(hydra.issuer, "frank"), "Frank's deploy notes: never on Fridays.")

    person = BrowserAndPerson(hydra, redirect_uri, subject="erin")
    metadata = OAuthClientMetadata(
        redirect_uris=[redirect_uri],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        client_name="an MCP application",
    )
    registration = OAuthClientInformationFull(client_id="laptop-app", **metadata.model_dump(exclude_none=True))
    auth = OAuthClientProvider(
        server_url=resource,
        client_metadata=metadata,
        storage=AppTokenStorage(registration),
        redirect_handler=person.open,
        callback_handler=person.callback,
    )
    seen = []

    async def record(request):
        seen.append(f"{request.method} {request.url.copy_with(query=None)}")

    async def main():
        async with httpx2.AsyncClient(auth=auth, timeout=30, event_hooks={"request": [record]}) as client:
            async with streamable_http_client(resource, http_client=client) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await session.call_tool("context_search", {"query": "deploy notes"})

    result = anyio.run(main)
    assert result.is_error is False, result
    items = result.structured_content["untrusted_external_context"]["items"]
    assert [item["content"] for item in items] == ["Erin's deploy notes: canary first, then the rest."]
    assert person.granted_audience == [resource]

    # The discovery chain the SDK walked, in order, before its first authorised call.
    prm = f"GET {stack.public}/.well-known/oauth-protected-resource/mcp/team"
    chain = [prm, f"GET {hydra.issuer}/.well-known/oauth-authorization-server", f"POST {hydra.issuer}/oauth2/token"]
    positions = [seen.index(step) for step in chain]
    assert seen[0] == f"POST {resource}" and positions == sorted(positions), seen
    assert seen[positions[-1] + 1] == f"POST {resource}", seen
