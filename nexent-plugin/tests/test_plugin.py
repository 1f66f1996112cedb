"""The memgate plugin as Nexent loads and calls it, against the real gateway and dev upstream.

``run.sh`` writes the plugin folder with the real ``memgate-gateway write-nexent-plugins``, then
starts ``memgate-gateway dev-upstream`` and ``memgate-gateway serve``. Providers of the config:
``repo-memory`` (bearer token, search + ingest), ``open-memory`` (anonymous, search only) and
``down-memory`` (bearer token, search + ingest, upstream on a closed port). The only stand-ins are
the Nexent SDK test doubles under ``sdk_doubles/``.
"""

import asyncio
import json
import os
import socket
import subprocess
import time
import traceback
import urllib.request
import uuid

import pytest
from nexent.memory.models import (
    MemoryIngestRequest,
    MemoryIngestResult,
    MemoryIngestUnit,
    MemorySearchRequest,
    MemorySearchResult,
    ProviderErrorCode,
    ProviderErrorSeverity,
    UnitIngestResult,
    UnitIngestStatus,
)
from nexent.memory.providers.retry import NonRetryableProviderError, RetryableProviderError, call_with_retries

import nexent_loader

USER, AGENT = "repository-memory", "qwen-code"


def provider(plugins, name, timeout_seconds=10, **entered):
    plugin = plugins.loaded[f"memgate-{name}"]
    params = nexent_loader.saved_parameters(plugin, **entered)
    return nexent_loader.build_provider(plugin, params, timeout_seconds)


def search_request(query, limit=5):
    return MemorySearchRequest(query=query, tenant_id="tenant-x", user_id="user-x", agent_id="agent-x", limit=limit)


def ingest_request(event, *contents):
    units = [
        MemoryIngestUnit(event_id=f"{event}-{i}", event_type="message", unit_type="fact", unit_content=text)
        for i, text in enumerate(contents)
    ]
    key = f"nexent:tenant-x:agent-x:user-x:conv-x:message:{event}"
    return MemoryIngestRequest(
        tenant_id="tenant-x", user_id="user-x", agent_id="agent-x", conversation_id="conv-x", units=units,
        idempotency_key=key,
    )


def stored(env):
    """Memories the dev upstream holds in the providers' scope."""
    url = f"http://{env['MEMGATE_DEV_UPSTREAM']}/memories?user_id={USER}&agent_id={AGENT}"
    request = urllib.request.Request(url, headers={"x-api-key": env["MEMGATE_DEV_UPSTREAM_API_KEY"]})
    with urllib.request.urlopen(request, timeout=10) as response:
        return [memory["memory"] for memory in json.loads(response.read())["results"]]


def failure(call, expected):
    with pytest.raises(expected) as caught:
        asyncio.run(call)
    return caught.value


def assert_clean(exc, *secrets):
    """Neither the token nor anything else secret is in anything the exception shows."""
    shown = [str(exc), repr(exc), exc.error.message, repr(exc.error), "".join(traceback.format_exception(exc))]
    for secret in secrets:
        assert all(secret not in text for text in shown), f"secret leaked into {type(exc).__name__}"


def test_the_loader_finds_the_written_plugins(env, plugins):
    assert sorted(plugins.loaded) == ["memgate-down-memory", "memgate-open-memory", "memgate-repo-memory"]
    assert ".memgate-write.lock" in plugins.skipped  # a file, skipped like any non-plugin
    repo = plugins.loaded["memgate-repo-memory"]
    assert repo.manifest["implements"] == ["searchable", "ingestible"]
    assert plugins.loaded["memgate-open-memory"].manifest["implements"] == ["searchable"]
    assert repo.manifest["entry_point"] == "memgate_plugin.py"
    assert repo.module_name == "memory_plugin_memgate-repo-memory"
    schema = {item["key"]: item for item in repo.manifest["config_schema"]}
    assert list(schema) == ["gateway_url", "provider", "access_token"]
    assert all(set(item) == {"key", "label", "type", "required", "default"} for item in schema.values())
    assert schema["gateway_url"]["default"] == f"http://{env['MEMGATE_GATEWAY']}"
    assert schema["provider"]["default"] == "repo-memory"
    assert (schema["access_token"]["type"], schema["access_token"]["required"]) == ("secret", True)
    built = provider(plugins, "repo-memory", access_token=env["MEMGATE_CALLER_TOKEN"])
    assert built.provider_name == "repo-memory"
    # No credential value was written anywhere in the folder.
    for root, _, files in os.walk(env["MEMGATE_PLUGINS_DIR"]):
        for name in files:
            with open(os.path.join(root, name), "rb") as handle:
                text = handle.read()
            for secret in (env["MEMGATE_CALLER_TOKEN"], env["MEMGATE_DEV_UPSTREAM_API_KEY"]):
                assert secret.encode() not in text, f"credential in {name}"


def test_a_required_token_must_be_entered(plugins):
    with pytest.raises(ValueError, match="access_token"):
        provider(plugins, "repo-memory")


def test_ingest_is_accepted_then_found_by_search(env, plugins):
    repo = provider(plugins, "repo-memory", access_token=env["MEMGATE_CALLER_TOKEN"])
    marker = uuid.uuid4().hex[:8]
    result = asyncio.run(
        repo.ingest(ingest_request(f"found-{marker}", f"Canary {marker} deploys go to eu-west first.", "Lunch is at noon."))
    )
    assert isinstance(result, MemoryIngestResult)
    assert (result.provider, result.status, result.accepted_count, result.rejected_count) == ("repo-memory", "ok", 2, 0)
    assert all(isinstance(unit, UnitIngestResult) for unit in result.unit_results)
    assert [(u.unit_id, u.status) for u in result.unit_results] == [
        (f"found-{marker}-0", UnitIngestStatus.ACCEPTED),
        (f"found-{marker}-1", UnitIngestStatus.ACCEPTED),
    ]

    results = asyncio.run(repo.search(search_request(f"canary {marker} deploys"), limit=20))
    assert results and all(isinstance(r, MemorySearchResult) for r in results)
    top = results[0]
    assert top.content == f"Canary {marker} deploys go to eu-west first."
    assert (top.source, top.is_external, top.memory_id, top.layer) == ("repo-memory", True, None, None)
    assert isinstance(top.external_id, str) and top.external_id
    assert isinstance(top.score, float) and top.score > 0
    assert isinstance(top.metadata, dict)
    assert asyncio.run(repo.search(search_request(f"zzz{marker}qqq"))) == []


def test_a_retried_ingest_is_stored_once(env, plugins):
    repo = provider(plugins, "repo-memory", access_token=env["MEMGATE_CALLER_TOKEN"])
    marker = uuid.uuid4().hex[:8]
    request = ingest_request(f"retry-{marker}", f"Retry {marker}: tags are signed.")
    results = [asyncio.run(repo.ingest(request)) for _ in range(3)]  # Nexent's three attempts
    assert [r.status for r in results] == ["ok", "ok", "ok"]
    assert stored(env).count(f"Retry {marker}: tags are signed.") == 1


def test_an_anonymous_provider_needs_no_token(plugins):
    open_memory = provider(plugins, "open-memory")
    results = asyncio.run(open_memory.search(search_request("lunch noon")))
    assert all(isinstance(r, MemorySearchResult) and r.source == "open-memory" for r in results)


def test_a_bad_token_is_non_retryable_unauthorized(env, plugins):
    secret = "wrong-token-" + uuid.uuid4().hex
    repo = provider(plugins, "repo-memory", access_token=secret)
    for call in (repo.search(search_request("tags")), repo.ingest(ingest_request("bad-token", "Never stored."))):
        exc = failure(call, NonRetryableProviderError)
        assert exc.error.code == ProviderErrorCode.UNAUTHORIZED
        assert exc.error.severity == ProviderErrorSeverity.NON_RETRYABLE
        assert_clean(exc, secret, "Authentication required")
    assert "Never stored." not in stored(env)


def test_upstream_down_is_retryable_provider_error(env, plugins):
    down = provider(plugins, "down-memory", access_token=env["MEMGATE_CALLER_TOKEN"])
    for call in (down.search(search_request("tags")), down.ingest(ingest_request("down", "Lost."))):
        exc = failure(call, RetryableProviderError)
        assert exc.error.code == ProviderErrorCode.PROVIDER_ERROR
        assert exc.error.severity == ProviderErrorSeverity.RETRYABLE
        assert_clean(exc, env["MEMGATE_CALLER_TOKEN"], "The memory service failed")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_stopped_gateway_is_retryable(env, plugins, tmp_path):
    port = free_port()
    log = open(tmp_path / "gateway.log", "wb")
    process = subprocess.Popen(
        [env["MEMGATE_GATEWAY_BIN"], "serve", "--config", env["MEMGATE_CONFIG_DIR"], "--listen", f"127.0.0.1:{port}"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
    )
    try:
        repo = provider(
            plugins, "repo-memory", access_token=env["MEMGATE_CALLER_TOKEN"], gateway_url=f"http://127.0.0.1:{port}"
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                asyncio.run(repo.search(search_request("tags")))
                break
            except RetryableProviderError:
                assert time.monotonic() < deadline, "the extra gateway did not start"
                time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()
    for call in (repo.search(search_request("tags")), repo.ingest(ingest_request("stopped", "Later."))):
        exc = failure(call, RetryableProviderError)
        assert exc.error.code == ProviderErrorCode.PROVIDER_ERROR
        assert_clean(exc, env["MEMGATE_CALLER_TOKEN"])
    # Nexent's retry loop gives up after its attempts with the retryable error.
    exc = failure(call_with_retries(lambda: repo.search(search_request("tags"))), RetryableProviderError)
    assert exc.error.code == ProviderErrorCode.PROVIDER_ERROR


def test_a_silent_gateway_times_out_as_retryable(env, plugins):
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = "http://127.0.0.1:%d" % silent.getsockname()[1]
        repo = provider(
            plugins, "repo-memory", timeout_seconds=0.5, access_token=env["MEMGATE_CALLER_TOKEN"], gateway_url=url
        )
        exc = failure(repo.search(search_request("tags")), RetryableProviderError)
    assert exc.error.code == ProviderErrorCode.TIMEOUT
    assert_clean(exc, env["MEMGATE_CALLER_TOKEN"])


def test_bad_settings_fail_without_a_request(plugins):
    secret = "tok\nen-" + uuid.uuid4().hex
    for entered in ({"gateway_url": "ftp://gw"}, {"access_token": secret}):
        repo = provider(plugins, "repo-memory", **{"access_token": "x", **entered})
        exc = failure(repo.search(search_request("tags")), NonRetryableProviderError)
        assert exc.error.code == ProviderErrorCode.INVALID_PAYLOAD
        assert_clean(exc, secret, secret.split("\n")[1])


def test_a_redirect_is_never_followed_and_the_token_never_moves(env, plugins, monkeypatch):
    import http.server
    import threading

    seen = []

    class Target(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            seen.append(dict(self.headers))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"[]")

        do_POST = do_GET

        def log_message(self, *args):
            pass

    target = http.server.HTTPServer(("127.0.0.1", 0), Target)

    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:%d/elsewhere" % target.server_port)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    redirect = http.server.HTTPServer(("127.0.0.1", 0), Redirect)
    for server in (target, redirect):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    # A proxy from the environment must not be used either: this one does not exist.
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    try:
        url = "http://127.0.0.1:%d" % redirect.server_port
        repo = provider(plugins, "repo-memory", access_token=env["MEMGATE_CALLER_TOKEN"], gateway_url=url)
        exc = failure(repo.search(search_request("tags")), NonRetryableProviderError)
    finally:
        for server in (target, redirect):
            server.shutdown()
    assert exc.error.code == ProviderErrorCode.PROVIDER_ERROR
    assert seen == [], "the redirect target must never be contacted"
    assert_clean(exc, env["MEMGATE_CALLER_TOKEN"])
