#!/usr/bin/env python3
"""Regenerates the committed seed corpora of the fuzz targets from the repository's fixtures.

Run from the repository root: python3 fuzz/seeds/generate.py  (needs PyYAML). It rewrites
fuzz/seeds/<target>/ from examples/, testdata/invalid/ and presets/dialects/*/fixtures.yaml, planting the marker
credential of fuzz/src/lib.rs in every Secret value, so the targets can check that no error shows it.
"""
import base64
import json
import pathlib
import re
import shutil

import yaml

MARKER = "FUZZMARKERSECRET51c2e9"
ROOT = pathlib.Path(__file__).resolve().parents[2]
SEEDS = ROOT / "fuzz" / "seeds"


def write(target, name, data):
    folder = SEEDS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def plant(text):
    """Secret values replaced by the marker (stringData) or its base64 (data)."""
    docs = list(yaml.safe_load_all(text))
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "Secret":
            for key in list((doc.get("stringData") or {}).keys()):
                doc["stringData"][key] = MARKER
            for key in list((doc.get("data") or {}).keys()):
                doc["data"][key] = base64.b64encode(MARKER.encode()).decode()
    return "---\n".join(yaml.safe_dump(d, sort_keys=False) for d in docs if d is not None)


def main():
    for target in ["manifest_documents", "config_snapshot", "validation_rules", "request_url",
                   "normalize_response", "nexent_requests", "mcp_direct_read", "upstream_answer"]:
        shutil.rmtree(SEEDS / target, ignore_errors=True)

    examples = sorted((ROOT / "examples").rglob("*.yaml")) + sorted((ROOT / "testdata/invalid").glob("*.yaml"))
    for path in examples:
        name = f"{path.parent.name}-{path.name}"
        planted = plant(path.read_text())
        for target in ["manifest_documents", "config_snapshot", "validation_rules"]:
            write(target, name, planted)
    secret_data = (
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata: {name: mem0-api, namespace: agents}\n"
        f"  data: {{api-key: {base64.b64encode(MARKER.encode()).decode()}}}\n"
    )
    write("manifest_documents", "list-secret-data.yaml", secret_data)
    quickstart = (ROOT / "examples/quickstart/mem0-oss.yaml").read_text()
    mounted = re.sub(r"secretRef: \{name: mem0-api", "secretRef: {name: mounted", quickstart)
    write("config_snapshot", "mounted-secret.yaml", plant(mounted))

    for fixtures_path in sorted((ROOT / "presets/dialects").glob("*/fixtures.yaml")):
        dialect = fixtures_path.parent.name
        fixtures = yaml.safe_load(fixtures_path.read_text())
        provider = fixtures["provider"]
        scope = provider.get("scope") or {}
        for index, case in enumerate(fixtures.get("search", [])):
            lines = [
                "https://memory.example.com", provider.get("basePath", ""), case["request"]["path"][len(provider.get("basePath", "").rstrip("/")):],
                case["query"], scope.get("userId", ""), scope.get("agentId", ""), scope.get("appId", ""),
                "\x01\x00\x00\x01\x03\x00\x01\x02\x05\x02",
            ]
            write("request_url", f"{dialect}-{index}", "\n".join(lines))
            response = case.get("response", {})
            body = json.dumps(response.get("body")) if "body" in response else ""
            write("normalize_response", f"{dialect}-{index}", bytes([0, 0, 0, 0, 0, 0, 0, 0, 5]) + body.encode())
            write("normalize_response", f"{dialect}-{index}-root", bytes([1, 1, 1, 1, 1, 0, 1, 1, 20]) + body.encode())
    write("nexent_requests", "search", json.dumps({"query": "release checklist", "limit": 7, "tenant_id": "t", "user_id": "u"}))
    write("nexent_requests", "ingest", json.dumps({
        "tenant_id": "t", "user_id": "u", "agent_id": None, "conversation_id": "c",
        "idempotency_key": "k-1", "metadata": {"x": 1.5},
        "units": [
            {"event_id": "evt-1", "event_type": "message", "unit_type": "fact", "unit_content": "The build uses cargo.", "unit_index": 0, "metadata": {}},
            {"event_id": "evt-2", "event_type": "message", "unit_type": "preference", "unit_content": "Prefers short answers.", "unit_index": 1, "metadata": {}},
        ],
    }))

    # mcp_direct_read: the first byte picks the era (0: 2025-11-25, 1: 2026-07-28), the rest is the
    # body; the calls the SDKs and the benchmark send, and one with escapes and keys out of order.
    arguments = {"query": "deploy checklist"}
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "2.3.0"},
    }
    legacy = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "context_search", "arguments": arguments}}
    modern = {"jsonrpc": "2.0", "id": "c-7", "method": "tools/call",
              "params": {"name": "context_search", "arguments": arguments, "_meta": meta}}
    write("mcp_direct_read", "legacy", b"\x00" + json.dumps(legacy).encode())
    write("mcp_direct_read", "modern", b"\x01" + json.dumps(modern).encode())
    escaped = '{"params":{"arguments":{"\\u0071uery":"caf\\u00e9 <b>"},"name":"context\\u005fsearch"},"method":"tools/call","id":-3,"jsonrpc":"2.0"}'
    write("mcp_direct_read", "escaped", b"\x00" + escaped.encode())
    upstream_answer_seeds()


def upstream_answer_seeds():
    """upstream_answer: the first byte picks how the answer is cut into reads, the rest is an
    upstream's answer: each framing the engine reads, an interim head, a refusal."""
    body = json.dumps({"results": [{"id": "m1", "memory": "The build uses cargo.", "score": 0.9}]})
    answers = {
        "length": f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n{body}",
        "chunked": "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                   f"{len(body[:20]):x};x=1\r\n{body[:20]}\r\n{len(body[20:]):x}\r\n{body[20:]}\r\n0\r\nx-sum: 1\r\n\r\n",
        "until_close": f"HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n{body}",
        "interim": f"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: {len(body)}\r\n\r\n{body}",
        "refusal": "HTTP/1.1 429 Too Many Requests\r\nretry-after: 3\r\ncontent-length: 0\r\n\r\n",
        # Near the bounds: chunk-size lines of 4 KiB, 16 KiB of extensions and of trailers.
        "extensions": "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                      + f"1;{'e' * 4090}\r\nx\r\n" * 4 + "0\r\n\r\n",
        "trailers": "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n"
                    + f"x-t: {'t' * 16364}\r\n\r\n",
    }
    for cut, (name, answer) in enumerate(answers.items()):
        write("upstream_answer", name, bytes([cut * 5]) + answer.encode())


if __name__ == "__main__":
    main()
