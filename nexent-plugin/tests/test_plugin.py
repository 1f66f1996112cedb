"""The memgate plugin as Nexent loads, builds and calls it, against the real gateway and dev upstream.

``run.sh`` writes the plugin folder with the real ``memgate-gateway write-nexent-plugins``, then
starts ``memgate-gateway dev-upstream`` and ``memgate-gateway serve``. Providers of the config:
``repo-memory`` (bearer token, search + ingest), ``open-memory`` (anonymous, search only) and
``down-memory`` (bearer token, search + ingest, upstream on a closed port). Plugins are loaded by
the reproduction of Nexent's loader (``nexent_loader``), built and called by the reproduction of its
provider service (``nexent_service``: one positional settings dict, the real retry loop). The only
stand-ins are the Nexent SDK test doubles under ``sdk_doubles/`` (the real SDK is not on PyPI).
"""

import asyncio
import http.server
import json
import logging
import os
import socket
import subprocess
import threading
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
from nexent.memory.providers.retry import (
    NonRetryableProviderError,
    RetryableProviderError,
    RetryConfig,
    execute_with_retry,
)

import nexent_loader

USER, AGENT = "repository-memory", "qwen-code"
CONFIG_ID = 7
UNIT_TYPES = ("agent", "user", "tool", "summary")  # the only ones Nexent sends to a plugin


def row(name, timeout_seconds=10):
    """The provider row Nexent keeps for a configured plugin provider."""
    row = {"provider_name": f"memgate-{name}", "provider_config_id": CONFIG_ID, "enabled": True}
    if timeout_seconds is not None:
        row["timeout_seconds"] = timeout_seconds
    return row


def params(plugins, name, **entered):
    return nexent_loader.saved_parameters(plugins.get_plugin(f"memgate-{name}"), **entered)


def provider(plugins, name, timeout_seconds=10, **entered):
    """A provider built exactly as Nexent's service builds it (one positional dict)."""
    from nexent_service import ProviderService

    return ProviderService(plugins).build_provider(row(name, timeout_seconds), params(plugins, name, **entered))


def search_request(query, limit=5):
    return MemorySearchRequest(query=query, tenant_id="tenant-x", user_id="user-x", agent_id="agent-x", limit=limit)


def units(event, *contents, types=UNIT_TYPES):
    return [
        MemoryIngestUnit(event_id=f"{event}-{i}", event_type="message", unit_type=types[i % len(types)], unit_content=text)
        for i, text in enumerate(contents)
    ]


def ingest_request(event, *contents):
    key = f"nexent:tenant-x:agent-x:user-x:conv-x:message:{event}"
    return MemoryIngestRequest(
        tenant_id="tenant-x", user_id="user-x", agent_id="agent-x", conversation_id="conv-x",
        units=units(event, *contents), idempotency_key=key,
    )


def stored(env):
    """Memories the dev upstream holds in the providers' scope."""
    url = f"http://{env['MEMGATE_DEV_UPSTREAM']}/memories?user_id={USER}&agent_id={AGENT}"
    request = urllib.request.Request(url, headers={"x-api-key": env["MEMGATE_DEV_UPSTREAM_API_KEY"]})
    with urllib.request.urlopen(request, timeout=10) as response:
        return [memory["memory"] for memory in json.loads(response.read())["results"]]


def gateway_requests(env, provider_name, operation):
    """The gateway's request counter for one provider and operation, summed over outcomes."""
    with urllib.request.urlopen(f"http://{env['MEMGATE_GATEWAY']}/metrics", timeout=10) as response:
        text = response.read().decode()
    prefix = f'memgate_gateway_requests_total{{provider="{provider_name}",operation="{operation}",'
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix))


def failure(call, expected):
    with pytest.raises(expected) as caught:
        asyncio.run(call)
    return caught.value


def shown(exc):
    """Everything an exception can show: Nexent stores ``str(exc)`` and logs it with its traceback."""
    texts = [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
    if getattr(exc, "error", None) is not None:
        texts += [exc.error.message, repr(exc.error)]
    return texts


def assert_clean(exc, *secrets):
    """Neither the token nor anything else secret is in anything the exception shows."""
    for secret in secrets:
        assert all(secret not in text for text in shown(exc)), f"secret leaked into {type(exc).__name__}"


def test_the_loader_finds_the_written_plugins(env, plugins):
    assert sorted(plugins.plugins) == ["memgate-down-memory", "memgate-open-memory", "memgate-repo-memory"]
    assert plugins.skipped == {}, "no directory of the folder fails Nexent's loader"
    repo = plugins.get_plugin("memgate-repo-memory")
    assert repo.manifest["implements"] == ["searchable", "ingestible"]
    assert repo.version == repo.manifest["version"] and isinstance(repo.version, str)
    assert plugins.get_plugin("memgate-open-memory").manifest["implements"] == ["searchable"]
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
    # Nexent's retry loop gives up after its attempts with a new retryable error carrying the last one.
    loop = execute_with_retry(lambda: repo.search(search_request("tags")), RetryConfig(), "search(memgate-repo-memory)")
    exc = failure(loop, RetryableProviderError)
    assert str(exc) == "search(memgate-repo-memory) failed after 3 attempts"
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


# --- Construction exactly as Nexent does it -------------------------------------------------------


def test_nexent_builds_the_plugin_from_one_positional_settings_dict(env, plugins, service, monkeypatch):
    plugin = plugins.get_plugin("memgate-repo-memory")
    calls = []

    class Recording(plugin.provider_class):
        def __init__(self, *args, **kwargs):
            calls.append((args, kwargs))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(plugin, "provider_class", Recording)
    saved = params(plugins, "repo-memory", access_token=env["MEMGATE_CALLER_TOKEN"])
    results = asyncio.run(service.search(row("repo-memory", 12), saved, search_request("lunch noon")))
    assert isinstance(results, list)
    assert calls == [
        (
            (
                {
                    "gateway_url": f"http://{env['MEMGATE_GATEWAY']}",
                    "provider": "repo-memory",
                    "access_token": env["MEMGATE_CALLER_TOKEN"],
                    "timeout_seconds": 12,
                },
            ),
            {},
        )
    ], "Nexent passes ONE positional dict and no keyword arguments"
    assert service.disabled == []


def test_every_settings_spelling_nexent_ever_used_works(env, plugins):
    provider_class = plugins.get_plugin("memgate-repo-memory").provider_class
    url, token = f"http://{env['MEMGATE_GATEWAY']}", env["MEMGATE_CALLER_TOKEN"]
    spellings = {
        "bare keys with timeout": {"gateway_url": url, "provider": "repo-memory", "access_token": token, "timeout_seconds": 30},
        "older loader: prefixed keys, plugin.name, no timeout": {
            "plugin.name": "memgate-repo-memory",
            "plugin.gateway_url": url,
            "plugin.provider": "repo-memory",
            "plugin.access_token": token,
        },
        "unknown keys ignored": {"gateway_url": url, "provider": "repo-memory", "access_token": token, "colour": "blue", 7: "x"},
        "prefixed wins over bare": {"gateway_url": "ftp://nowhere", "plugin.gateway_url": url, "provider": "repo-memory",
                                    "access_token": token},
    }
    marker = uuid.uuid4().hex[:8]
    asyncio.run(provider_class(spellings["bare keys with timeout"]).ingest(ingest_request(f"spell-{marker}", f"Spelling {marker}.")))
    for what, settings in spellings.items():
        built = provider_class(settings)
        results = asyncio.run(built.search(search_request(f"spelling {marker}")))
        assert any(r.content == f"Spelling {marker}." for r in results), what
    by_keywords = provider_class(gateway_url=url, provider="repo-memory", access_token=token)
    assert asyncio.run(by_keywords.search(search_request(f"spelling {marker}"))), "keyword arguments still work"
    assert by_keywords.provider_name == "repo-memory"


def test_timeout_seconds_is_nexents_int_and_defaults_to_30(env, plugins):
    provider_class = plugins.get_plugin("memgate-repo-memory").provider_class
    base = {"gateway_url": f"http://{env['MEMGATE_GATEWAY']}", "provider": "repo-memory"}
    assert provider_class(base).timeout_seconds == 30
    assert provider_class({**base, "timeout_seconds": 5}).timeout_seconds == 5
    for junk in ("soon", None, 0, -3, True, float("nan")):
        assert provider_class({**base, "timeout_seconds": junk}).timeout_seconds == 30, junk
    assert provider(plugins, "repo-memory", timeout_seconds=None, access_token="x").timeout_seconds == 30


def test_settings_that_are_not_a_mapping_fail_without_a_request(plugins):
    provider_class = plugins.get_plugin("memgate-repo-memory").provider_class
    exc = failure(provider_class(["not", "a", "dict"]).search(search_request("tags")), NonRetryableProviderError)
    assert exc.error.code == ProviderErrorCode.INVALID_PAYLOAD


# --- Through Nexent's service and retry loop --------------------------------------------------------


def test_search_failures_become_an_empty_list_after_three_attempts(env, plugins, service, pauses):
    saved = params(plugins, "down-memory", access_token=env["MEMGATE_CALLER_TOKEN"])
    before = gateway_requests(env, "down-memory", "nexent_search")
    assert asyncio.run(service.search(row("down-memory"), saved, search_request("tags"))) == []
    assert gateway_requests(env, "down-memory", "nexent_search") - before == 3, "Nexent tries three times"
    assert len(pauses) == 2 and 0.5 <= pauses[0] < 1.5 and 1.0 <= pauses[1] < 3.0, pauses
    assert service.disabled == []


def test_an_ingest_failure_is_recorded_as_error_with_fixed_text(env, plugins, service):
    saved = params(plugins, "down-memory", access_token=env["MEMGATE_CALLER_TOKEN"])
    before = gateway_requests(env, "down-memory", "nexent_ingest")
    result = asyncio.run(
        service.send_ingest(row("down-memory"), saved, "tenant-x", "user-x", "agent-x", "conv-x", "message", "evt-down",
                            units("evt-down", "Lost once.", "Lost twice."))
    )
    assert (result.status, result.message) == ("error", "ingest(memgate-down-memory) failed after 3 attempts")
    assert gateway_requests(env, "down-memory", "nexent_ingest") - before == 3
    [logged] = service.event_log
    assert logged["response_summary"] == "ingest(memgate-down-memory) failed after 3 attempts"
    assert logged["idempotency_key"] == "nexent:tenant-x:agent-x:user-x:conv-x:message:evt-down"


def test_a_refused_token_is_tried_once_disables_the_provider_and_stores_fixed_text(env, plugins, service, pauses):
    secret = "wrong-token-" + uuid.uuid4().hex
    saved = params(plugins, "repo-memory", access_token=secret)
    before = gateway_requests(env, "repo-memory", "nexent_search")
    assert asyncio.run(service.search(row("repo-memory"), saved, search_request("tags"))) == []
    assert gateway_requests(env, "repo-memory", "nexent_search") - before == 1
    assert pauses == [] and service.disabled == [CONFIG_ID]
    result = asyncio.run(
        service.send_ingest(row("repo-memory"), saved, "t", "u", "a", "c", "message", "evt-401", units("evt-401", "Never stored."))
    )
    assert result.status == "error"
    assert result.message == "memgate ingest: the gateway answered HTTP 401 (unauthorized)"
    assert secret not in service.event_log[0]["response_summary"]
    assert "Never stored." not in stored(env)


def test_only_the_unit_types_nexent_sends_reach_the_gateway(env, plugins, service):
    saved = params(plugins, "repo-memory", access_token=env["MEMGATE_CALLER_TOKEN"])
    marker = uuid.uuid4().hex[:8]
    types = ("agent", "model_output", "user", "fact", "tool", "final_answer", "summary")
    sent = units(f"types-{marker}", *[f"Type {marker} {t}." for t in types], types=types)
    result = asyncio.run(
        service.send_ingest(row("repo-memory"), saved, "tenant-x", "user-x", "agent-x", "conv-x", "message", f"types-{marker}", sent)
    )
    assert (result.status, result.accepted_count, result.rejected_count) == ("ok", 4, 0)
    assert [u.unit_id for u in result.unit_results] == [u.event_id for u in sent if u.unit_type in UNIT_TYPES]
    kept = {m for m in stored(env) if marker in m}
    assert kept == {f"Type {marker} {t}." for t in UNIT_TYPES}


def test_a_retried_ingest_through_the_service_is_stored_once(env, plugins, service):
    saved = params(plugins, "repo-memory", access_token=env["MEMGATE_CALLER_TOKEN"])
    marker = uuid.uuid4().hex[:8]
    event = units(f"svc-{marker}", f"Service retry {marker}.")
    for _ in range(3):  # the same event delivered again (Nexent's fan-out retried, same key)
        result = asyncio.run(
            service.send_ingest(row("repo-memory"), saved, "t", "u", "a", "c", "message", f"svc-{marker}", event)
        )
        assert (result.status, result.accepted_count) == ("ok", 1)
    assert stored(env).count(f"Service retry {marker}.") == 1
    assert len({entry["idempotency_key"] for entry in service.event_log}) == 1


class FakeGateway:
    """A local HTTP server answering every POST with one fixed status and body."""

    def __init__(self, status, body):
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.seen += 1
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.seen = 0
        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = "http://127.0.0.1:%d" % self.server.server_port

    def close(self):
        self.server.shutdown()


def test_nothing_nexent_stores_or_logs_holds_a_token_a_credentialed_url_or_a_body(env, plugins, caplog):
    """Every failure path, through Nexent's service: its event log, its log lines (with
    tracebacks, as it logs them) and the exceptions themselves hold no secret."""
    from nexent_service import ProviderService

    body_secret = "BODY-SECRET-" + uuid.uuid4().hex
    password = "URL-PASSWORD-" + uuid.uuid4().hex
    wrong_token = "WRONG-TOKEN-" + uuid.uuid4().hex
    fakes = [
        FakeGateway(500, json.dumps({"code": "provider_error", "severity": "retryable", "message": body_secret}).encode()),
        FakeGateway(502, f"upstream said {body_secret}".encode()),
        FakeGateway(200, f"not json {body_secret}".encode()),
        FakeGateway(200, json.dumps([{"external_id": 1, "content": body_secret, "score": "high"}]).encode()),
    ]
    token = env["MEMGATE_CALLER_TOKEN"]
    gateway = f"http://{env['MEMGATE_GATEWAY']}"
    cases = [("repo-memory", {"access_token": wrong_token}), ("down-memory", {"access_token": token})]
    cases += [("repo-memory", {"access_token": token, "gateway_url": fake.url}) for fake in fakes]
    cases += [
        ("repo-memory", {"access_token": token, "gateway_url": gateway.replace("http://", f"http://nexent:{password}@")}),
        ("repo-memory", {"access_token": token + "\n" + password}),
    ]
    caplog.set_level(logging.DEBUG)
    service = ProviderService(plugins)
    try:
        for name, entered in cases:
            saved = params(plugins, name, **entered)
            assert asyncio.run(service.search(row(name), saved, search_request("tags"))) == []
            result = asyncio.run(
                service.send_ingest(row(name), saved, "t", "u", "a", "c", "message", "evt", units("evt", "Unit."))
            )
            assert result.status == "error", (name, entered, result)
            built = service.build_provider(row(name), saved)
            for call in (built.search(search_request("tags")), built.ingest(ingest_request("direct", "Unit."))):
                with pytest.raises(Exception) as caught:
                    asyncio.run(call)
                for text in shown(caught.value):
                    for secret in (token, wrong_token, password, body_secret, env["MEMGATE_DEV_UPSTREAM_API_KEY"]):
                        assert secret not in text, f"{secret[:12]} in an exception of {name} {sorted(entered)}"
    finally:
        for fake in fakes:
            fake.close()
    assert all(fake.seen >= 1 for fake in fakes), "every fake gateway was reached"
    formatter = logging.Formatter("%(message)s")
    logged = [formatter.format(record) for record in caplog.records]
    assert any("failed after 3 attempts" in line for line in logged), "the retry loop logged"
    summaries = [entry["response_summary"] for entry in service.event_log]
    assert len(summaries) == len(cases)
    for text in logged + summaries:
        for secret in (token, wrong_token, password, body_secret, env["MEMGATE_DEV_UPSTREAM_API_KEY"]):
            assert secret not in text, f"{secret[:12]} stored or logged: {text[:200]}"


# --- The doubles model Nexent's real behaviour ------------------------------------------------------


def test_the_retry_double_retries_any_exception_but_degradable_and_non_retryable(pauses):
    from nexent.memory.models import ProviderError

    attempts = []

    async def flaky():
        attempts.append(1)
        if len(attempts) < 3:
            raise ValueError("not yet")
        return "done"

    assert asyncio.run(execute_with_retry(flaky, RetryConfig(), "op")) == "done"
    assert len(attempts) == 3 and len(pauses) == 2

    def error(code, severity):
        return ProviderError(code=code, message="m", severity=severity)

    async def refused():
        attempts.append(1)
        raise RetryableProviderError("retryable but unauthorized", error("unauthorized", "retryable"))

    attempts.clear()
    exc = failure(execute_with_retry(refused, RetryConfig(), "op"), NonRetryableProviderError)
    assert (len(attempts), str(exc), exc.error.code) == (1, "op failed with non-retryable error", ProviderErrorCode.UNAUTHORIZED)

    async def broken():
        raise TypeError("no provider error")

    exc = failure(execute_with_retry(broken, RetryConfig(), "op"), RetryableProviderError)
    assert (str(exc), exc.error.code, exc.error.message) == ("op failed after 3 attempts", ProviderErrorCode.UNKNOWN,
                                                              "Max retry attempts exceeded")


def test_the_model_doubles_validate_as_nexents_pydantic_models():
    import pydantic

    assert pydantic.VERSION.startswith("2.")
    with pytest.raises(pydantic.ValidationError):
        MemorySearchResult(content="c", score=1.0, metadata={1: "int keys are refused"})
    with pytest.raises(pydantic.ValidationError):
        MemorySearchResult(content=7, score=1.0)
    with pytest.raises(pydantic.ValidationError):
        UnitIngestResult(unit_id="u", status="maybe")
    result = MemorySearchResult(content="c", score=1, source="s", is_external=True)
    assert (result.score, result.memory_id, result.metadata, result.layer) == (1.0, None, {}, None)
    assert MemoryIngestResult(provider="p", status="ok").model_dump()["unit_results"] == []
    request = MemoryIngestRequest(tenant_id="t", user_id="u", units=[{"event_id": "e", "event_type": "m", "unit_type": "agent",
                                                                       "unit_content": "c"}], idempotency_key="k")
    assert request.model_copy(update={"units": []}).units == []
    assert ProviderErrorSeverity("retryable") is ProviderErrorSeverity.RETRYABLE
