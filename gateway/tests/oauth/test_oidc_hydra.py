"""memgate as an MCP authorization resource server, against a real OpenID provider (Ory Hydra).

Accepted tokens and every key come from Hydra. Refused tokens are crafted here (PyJWT, or by hand
where a library would refuse to build them): signed with a key Hydra generated and publishes but with
a wrong claim, signed with a key Hydra does not publish, `alg: none`, HS256 keyed with the published
RSA public key, and a real token whose payload was edited.
"""

import base64
import hashlib
import hmac
import json
import re
import subprocess
import time
from pathlib import Path

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from conftest import GATEWAY_BIN, SCOPE, free_port, http, wait_for

FIXED_401 = {"code": "unauthorized", "severity": "non_retryable", "message": "Authentication required.", "retry_after_seconds": None}


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(part):
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def claims_of(token):
    return json.loads(unb64(token.split(".")[1]))


def header_of(token):
    return json.loads(unb64(token.split(".")[0]))


def good_token(hydra, robot, stack, scope=SCOPE):
    return hydra.client_credentials_token(*robot, scope=scope, audience=f"{stack.public}/mcp/team")


def test_discovery_starts_from_a_401_challenge(stack, hydra):
    status, headers, body = stack.mcp("team", None)
    assert status == 401 and json.loads(body) == FIXED_401
    metadata_url = f"{stack.public}/.well-known/oauth-protected-resource/mcp/team"
    assert headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}", scope="{SCOPE}"'
    # Qwen Code probes the MCP URL with HEAD before discovery: the same challenge.
    status, headers, _ = stack.mcp("team", None, method="HEAD")
    assert status == 401 and headers["www-authenticate"].startswith(f'Bearer resource_metadata="{metadata_url}"')

    status, _, body = http("GET", metadata_url)
    assert status == 200
    assert json.loads(body) == {
        "resource": f"{stack.public}/mcp/team",
        "authorization_servers": [hydra.issuer],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": "memgate team",
    }
    # Root form: only one OIDC provider serves MCP here, so it is that one.
    status, _, body = http("GET", f"{stack.public}/.well-known/oauth-protected-resource")
    assert status == 200 and json.loads(body)["resource"] == f"{stack.public}/mcp/team"
    # No metadata for a provider without MCP, or an unknown one.
    for path in ["mcp/alice-only", "mcp/nope"]:
        assert http("GET", f"{stack.public}/.well-known/oauth-protected-resource/{path}")[0] == 404


def test_a_token_with_the_right_audience_and_scope_is_accepted(stack, hydra, robot):
    token = good_token(hydra, robot, stack)
    assert claims_of(token)["iss"] == hydra.issuer
    status, _, body = stack.search("team", token)
    assert status == 200, body
    status, _, body = stack.mcp("team", token)
    assert status == 200 and b"context_search" in body, body


def test_oidc_callers_are_audited_by_issuer_and_subject(stack, hydra, robot):
    """One audit event per call through each surface, naming the verified OIDC caller and the
    user id bound to it; never the query; valid against the repository's audit event schema."""
    from jsonschema import Draft202012Validator

    token = good_token(hydra, robot, stack)
    before = len(stack.audit_lines())
    query = "planted oidc query 4e7a"
    status, _, body = stack.search("team", token, query=query)
    assert status == 200, body
    status, _, body = stack.context_search("team", token, query)
    assert status == 200 and b'"isError":false' in body.replace(b" ", b""), body
    deadline = time.time() + 10
    while len(stack.audit_lines()) < before + 2 and time.time() < deadline:
        time.sleep(0.05)
    lines = stack.audit_lines()[before:]
    assert len(lines) == 2, lines
    assert not any(query in line or token in line for line in lines)
    events = [json.loads(line) for line in lines]
    schema = json.loads((Path(__file__).parents[2] / "schema" / "audit-event.schema.json").read_text())
    validator = Draft202012Validator(schema)
    for event in events:
        assert not list(validator.iter_errors(event)), event
    issuer_hash = hashlib.sha256(hydra.issuer.encode()).hexdigest()[:16]
    subject = claims_of(token)["sub"]
    assert sorted((e["surface"], e["operation"]) for e in events) == [("mcp", "context_search"), ("nexent", "search")]
    for event in events:
        assert event["caller"] == f"oidc:{hydra.issuer}#{subject}" and event["callerKind"] == "oidc", event
        assert event["scope"] == {"userId": f"oidc:{issuer_hash}:s:{subject}", "agentId": "qwen-code"}, event
        assert event["outcome"] == "ok" and event["provider"] == "agents/team", event


def test_the_refusal_matrix(stack, hydra, robot):
    real = good_token(hydra, robot, stack)
    kid = header_of(real)["kid"]
    now = int(time.time())
    claims = claims_of(real)

    # A key Hydra generated and publishes (its private half comes back from the admin API), so a
    # token signed with it differs from a real one only in the claim under test.
    published = hydra.create_signing_key("hydra.jwt.access-token", "memgate-matrix")
    signing = jwt.PyJWK(published).key

    def signed(**changes):
        body = dict(claims, iat=now, nbf=now, exp=now + 300)
        body.update(changes)
        return jwt.encode(body, signing, algorithm="RS256", headers={"kid": "memgate-matrix"})

    # A control: the same construction with no change is accepted, so each refusal below is
    # caused by its one change.
    assert stack.search("team", signed())[0] == 200

    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = signing.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    hs_header = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "memgate-matrix"}).encode())
    hs_payload = b64(json.dumps(dict(claims, exp=now + 300)).encode())
    hs_signature = b64(hmac.new(public_pem, f"{hs_header}.{hs_payload}".encode(), hashlib.sha256).digest())
    header, payload, signature = real.split(".")
    tampered_payload = b64(json.dumps(dict(claims, sub="someone-else")).encode())
    none_header = b64(json.dumps({"alg": "none", "typ": "JWT"}).encode())

    refused = {
        "wrong audience": hydra.client_credentials_token(*robot, scope=SCOPE, audience="https://elsewhere.example"),
        "no audience": hydra.client_credentials_token(*robot, scope=SCOPE),
        "wrong issuer": signed(iss=hydra.issuer + "/other"),
        "issuer with trailing slash": signed(iss=hydra.issuer + "/"),
        "expired": signed(exp=now - 120),
        "not yet valid": signed(nbf=now + 600),
        "no expiry": jwt.encode({k: v for k, v in claims.items() if k != "exp"}, signing, algorithm="RS256", headers={"kid": "memgate-matrix"}),
        "other key, published kid": jwt.encode(dict(claims, exp=now + 300), other_key, algorithm="RS256", headers={"kid": kid}),
        "other key, unknown kid": jwt.encode(dict(claims, exp=now + 300), other_key, algorithm="RS256", headers={"kid": "not-published"}),
        "alg none": f"{none_header}.{payload}.",
        "HS256 keyed with the public key": f"{hs_header}.{hs_payload}.{hs_signature}",
        "tampered payload": f"{header}.{tampered_payload}.{signature}",
    }
    for case, token in refused.items():
        status, headers, body = stack.search("team", token)
        assert status == 401, f"{case}: {status} {body}"
        assert json.loads(body) == FIXED_401, case
        status, headers, _ = stack.mcp("team", token)
        assert status == 401 and "resource_metadata=" in headers["www-authenticate"], case

    # A valid token without the required scope: 403 insufficient_scope, so clients can step up.
    no_scope = hydra.client_credentials_token(*robot, scope="other", audience=f"{stack.public}/mcp/team")
    status, headers, body = stack.mcp("team", no_scope)
    assert status == 403, body
    assert headers["www-authenticate"].startswith('Bearer error="insufficient_scope"'), headers["www-authenticate"]
    assert f'scope="{SCOPE}"' in headers["www-authenticate"]
    assert json.loads(body)["code"] == "forbidden"

    logs = stack.logs()
    for token in [real, no_scope, *refused.values()]:
        assert token not in logs and token.split(".")[2] not in logs or token.endswith(".")
    status, _, metrics = http("GET", f"{stack.public}/metrics")
    metrics = metrics.decode()
    # A token naming another issuer is not routed to this provider's OIDC verifier at all, and
    # `alg: none` (empty signature) is not even taken for a JWT.
    assert 'operation="none",outcome="refused",error_code="unknown_token"' in metrics
    for reason in ["audience", "expired", "not_yet_valid", "signature", "unknown_key", "algorithm", "insufficient_scope"]:
        assert f'operation="oidc",outcome="refused",error_code="{reason}"' in metrics, reason
    assert "robot" not in metrics and "someone-else" not in metrics


def test_the_providers_key_rotation_is_followed(stack, hydra, robot):
    before = good_token(hydra, robot, stack)
    assert stack.search("team", before)[0] == 200
    hydra.create_signing_key("hydra.jwt.access-token", "memgate-rotated")
    after = good_token(hydra, robot, stack)
    assert header_of(after)["kid"] == "memgate-rotated" != header_of(before)["kid"]
    # The gateway has not seen this kid: it refetches the JWKS (at most every 200 ms in this suite).
    time.sleep(0.3)
    status, _, body = stack.search("team", after)
    assert status == 200, body
    assert stack.search("team", before)[0] == 200, "older keys stay published and accepted"


def test_subject_allow_list(stack, hydra):
    for name in ["alice", "bob"]:
        hydra.create_client(
            client_id=name, client_secret=f"{name}-secret-0123456789", grant_types=["client_credentials"],
            scope=SCOPE, audience=[f"{stack.public}/mcp/team"], token_endpoint_auth_method="client_secret_basic",
        )
    tokens = {
        name: hydra.client_credentials_token(name, f"{name}-secret-0123456789", scope=SCOPE, audience=f"{stack.public}/mcp/team")
        for name in ["alice", "bob"]
    }
    assert stack.search("alice-only", tokens["alice"])[0] == 200
    status, _, body = stack.search("alice-only", tokens["bob"])
    assert status == 403 and json.loads(body)["code"] == "forbidden"


def oidc_user_id(issuer, subject):
    """The documented rendering (README, `auth::subject`): issuer hash, then the readable subject."""
    return f"oidc:{hashlib.sha256(issuer.encode()).hexdigest()[:16]}:s:{subject}"


def test_two_subjects_see_only_their_own_memories(stack, hydra):
    for name in ["carol", "dave"]:
        hydra.create_client(
            client_id=name, client_secret=f"{name}-secret-0123456789", grant_types=["client_credentials"],
            scope=SCOPE, audience=[f"{stack.public}/mcp/team"], token_endpoint_auth_method="client_secret_basic",
        )
        stack.store(oidc_user_id(hydra.issuer, name), f"{name} keeps the release checklist in the wiki")
    for name, other in [("carol", "dave"), ("dave", "carol")]:
        token = hydra.client_credentials_token(name, f"{name}-secret-0123456789", scope=SCOPE, audience=f"{stack.public}/mcp/team")
        status, _, body = stack.search("team", token, query="release checklist wiki")
        assert status == 200, body
        contents = [item["content"] for item in json.loads(body)]
        assert contents and all(c.startswith(name) for c in contents), contents
        assert not any(c.startswith(other) for c in contents)
    assert not re.search(r"oidc:[0-9a-f]{16}", stack.logs()), "a bound user id reached the logs"


def test_the_oauth_example_is_served_as_is(workdir):
    """`examples/oauth/` starts as it is and publishes its issuer (keys are fetched on first use, so no
    identity provider needs to run for this)."""
    example = Path(__file__).resolve().parents[3] / "examples" / "oauth"
    public = f"http://127.0.0.1:{free_port()}"
    log = open(Path(workdir) / "example-gateway.log", "wb")
    argv = [GATEWAY_BIN, "serve", "--config", str(example), "--listen", public.removeprefix("http://"), "--public-url", public]
    process = subprocess.Popen(argv, stdout=log, stderr=log)
    try:
        wait_for(f"{public}/readyz", process, "gateway on examples/oauth")
        status, _, body = http("GET", f"{public}/.well-known/oauth-protected-resource/mcp/team-memory")
        assert status == 200, body
        document = json.loads(body)
        assert document["authorization_servers"] == ["http://127.0.0.1:4444"]
        assert document["resource"] == f"{public}/mcp/team-memory"
        assert document["scopes_supported"] == ["memory.read"]
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def test_the_gateway_survives_the_issuer_going_away(stack, hydra, robot):
    """Runs last: stops Hydra. Keys already fetched keep verifying; an unknown kid is refused (401)."""
    token = good_token(hydra, robot, stack)
    assert stack.search("team", token)[0] == 200
    hydra.stop()
    status, _, body = stack.search("team", token)
    assert status == 200, body
    claims = claims_of(token)
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    unknown = jwt.encode(claims, other_key, algorithm="RS256", headers={"kid": "after-the-outage"})
    time.sleep(0.3)
    assert stack.search("team", unknown)[0] == 401
    assert stack.search("team", token)[0] == 200, "a failed refetch keeps the last good keys"
