"""Real processes for the OIDC suite: Ory Hydra (in-memory store) as the OpenID provider, the
`memgate-gateway dev-upstream` Mem0-compatible server, and `memgate-gateway serve` on a config with
OIDC-protected providers. `run.sh` provides the binaries (`MEMGATE_HYDRA`, `MEMGATE_GATEWAY_BIN`).
Every process listens on 127.0.0.1 only and is stopped at the end of the session."""

import base64
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

HYDRA = os.environ.get("MEMGATE_HYDRA", "")
GATEWAY_BIN = os.environ.get("MEMGATE_GATEWAY_BIN", "")
API_KEY = "oidc-suite-upstream-key"
SCOPE = "memory.read"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, headers=None, form=None, basic=None, timeout=10):
    """One HTTP request; returns (status, headers, body bytes). Never follows redirects."""
    data = None
    headers = dict(headers or {})
    if body is not None:
        data = json.dumps(body).encode()
        headers.setdefault("content-type", "application/json")
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        headers["content-type"] = "application/x-www-form-urlencoded"
    if basic is not None:
        headers["authorization"] = "Basic " + base64.b64encode(f"{basic[0]}:{basic[1]}".encode()).decode()
    request = urllib.request.Request(url, data=data, headers=headers, method=method)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=timeout) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()


def wait_for(url, process, what):
    for _ in range(300):
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        try:
            status, _, _ = http("GET", url, timeout=1)
            if status < 500:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not become ready")


class Hydra:
    """A running Hydra: `public` serves OAuth/OIDC, `admin` manages clients and keys."""

    def __init__(self, workdir):
        assert HYDRA, "run through gateway/tests/oauth/run.sh (MEMGATE_HYDRA)"
        self.public_port, self.admin_port = free_port(), free_port()
        self.issuer = f"http://127.0.0.1:{self.public_port}"
        self.admin = f"http://127.0.0.1:{self.admin_port}"
        # Login and consent are "apps" of the identity provider; the tests act as them through the
        # admin API (see `browser_sign_in`), so these URLs are never fetched.
        env = dict(
            os.environ,
            DSN="memory",
            URLS_SELF_ISSUER=self.issuer,
            URLS_LOGIN="http://127.0.0.1:9/login",
            URLS_CONSENT="http://127.0.0.1:9/consent",
            SERVE_PUBLIC_HOST="127.0.0.1",
            SERVE_PUBLIC_PORT=str(self.public_port),
            SERVE_ADMIN_HOST="127.0.0.1",
            SERVE_ADMIN_PORT=str(self.admin_port),
            STRATEGIES_ACCESS_TOKEN="jwt",
            SECRETS_SYSTEM="memgate-oidc-suite-system-secret-0123456789",
            LOG_LEVEL="warn",
        )
        self.log = open(Path(workdir) / "hydra.log", "wb")
        # --dev: plain-http issuer on loopback (no TLS here) and cookies without `Secure`.
        self.process = subprocess.Popen([HYDRA, "serve", "all", "--dev"], env=env, stdout=self.log, stderr=self.log)
        wait_for(f"{self.admin}/health/ready", self.process, "hydra")
        wait_for(f"{self.issuer}/.well-known/openid-configuration", self.process, "hydra public")

    def create_client(self, **client):
        status, _, body = http("POST", f"{self.admin}/admin/clients", body=client)
        assert status == 201, body
        return json.loads(body)

    def client_credentials_token(self, client_id, secret, scope=None, audience=None):
        form = {"grant_type": "client_credentials"}
        if scope is not None:
            form["scope"] = scope
        if audience is not None:
            form["audience"] = audience
        status, _, body = http("POST", f"{self.issuer}/oauth2/token", form=form, basic=(client_id, secret))
        assert status == 200, body
        return json.loads(body)["access_token"]

    def create_signing_key(self, key_set, kid):
        """A new RS256 key in `key_set`; Hydra answers with the private JWK. In the access-token set
        the new key becomes the one Hydra signs with (a key rotation)."""
        status, _, body = http("POST", f"{self.admin}/admin/keys/{key_set}", body={"alg": "RS256", "use": "sig", "kid": kid})
        assert status == 201, body
        return json.loads(body)["keys"][0]

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        if not self.log.closed:
            self.log.close()


PROVIDERS = """\
apiVersion: memgate.io/v1alpha1
kind: MemoryProvider
metadata: {{name: team, namespace: agents}}
spec:
  dialect: {{builtin: mem0-oss-rest-2026-08}}
  endpoint: {{origin: "http://{upstream}", allowInsecureHttp: true}}
  credentials: {{secretRef: {{name: mem0-api, key: api-key}}}}
  scope: {{agentId: qwen-code}}
  nexent: {{search: true}}
  access:
    oidc:
      issuer: "{issuer}"
      allowInsecureHttp: true
      requiredScopes: [{scope}]
    bindUserIdToSubject: true
---
apiVersion: memgate.io/v1alpha1
kind: MemoryProvider
metadata: {{name: alice-only, namespace: agents}}
spec:
  dialect: {{builtin: mem0-oss-rest-2026-08}}
  endpoint: {{origin: "http://{upstream}", allowInsecureHttp: true}}
  credentials: {{secretRef: {{name: mem0-api, key: api-key}}}}
  scope: {{userId: shared, agentId: qwen-code}}
  mcp: {{enabled: false}}
  nexent: {{search: true}}
  access:
    oidc:
      issuer: "{issuer}"
      allowInsecureHttp: true
      audiences: ["{public}/mcp/team"]
      allowedSubjects: [alice]
---
apiVersion: v1
kind: Secret
metadata: {{name: mem0-api, namespace: agents}}
stringData: {{api-key: {key}}}
"""


class Stack:
    """dev upstream + gateway serving PROVIDERS with `--public-url`."""

    def __init__(self, workdir, hydra):
        assert GATEWAY_BIN, "run through gateway/tests/oauth/run.sh (MEMGATE_GATEWAY_BIN)"
        self.upstream = f"127.0.0.1:{free_port()}"
        port = free_port()
        self.public = f"http://127.0.0.1:{port}"
        config = Path(workdir) / "config"
        config.mkdir()
        (config / "providers.yaml").write_text(
            PROVIDERS.format(upstream=self.upstream, issuer=hydra.issuer, scope=SCOPE, public=self.public, key=API_KEY)
        )
        self.gateway_log = Path(workdir) / "gateway.log"
        self.audit_log = Path(workdir) / "audit.jsonl"
        self.processes = []
        self.upstream_process = self._start(
            [GATEWAY_BIN, "dev-upstream", "--listen", self.upstream, "--api-key", API_KEY], Path(workdir) / "upstream.log"
        )
        self.gateway_process = self._start(
            [
                GATEWAY_BIN, "serve", "--config", str(config), "--listen", f"127.0.0.1:{port}",
                "--public-url", self.public, "--jwks-min-refresh-ms", "200",
                "--audit-log", str(self.audit_log),
            ],
            self.gateway_log,
        )
        wait_for(f"{self.public}/readyz", self.gateway_process, "gateway")
        wait_for(f"http://{self.upstream}/", self.upstream_process, "dev upstream")

    def _start(self, argv, log_path):
        log = open(log_path, "wb")
        process = subprocess.Popen(argv, stdout=log, stderr=log)
        self.processes.append((process, log))
        return process

    def store(self, user_id, text):
        body = {"messages": [{"role": "user", "content": text}], "user_id": user_id, "agent_id": "qwen-code", "infer": False}
        status, _, answer = http("POST", f"http://{self.upstream}/memories", body=body, headers={"x-api-key": API_KEY})
        assert status == 200, answer

    def search(self, provider, token, query="memory"):
        headers = {} if token is None else {"authorization": f"Bearer {token}"}
        return http("POST", f"{self.public}/nexent/v1/{provider}/search", body={"query": query}, headers=headers)

    def mcp(self, provider, token, method="POST"):
        headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"} if method == "POST" else None
        return http(method, f"{self.public}/mcp/{provider}", body=body, headers=headers)

    def context_search(self, provider, token, query):
        headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25",
                   "authorization": f"Bearer {token}"}
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "context_search", "arguments": {"query": query}}}
        return http("POST", f"{self.public}/mcp/{provider}", body=body, headers=headers)

    def audit_lines(self):
        """The audit log's lines so far (the gateway writes them from a thread of its own)."""
        return self.audit_log.read_text().splitlines() if self.audit_log.exists() else []

    def logs(self):
        return self.gateway_log.read_text(errors="replace")

    def stop(self):
        for process, log in self.processes:
            process.terminate()
        for process, log in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
            log.close()


@pytest.fixture(scope="session")
def workdir():
    with tempfile.TemporaryDirectory(prefix="memgate-oidc-") as path:
        yield path


@pytest.fixture(scope="session")
def hydra(workdir):
    server = Hydra(workdir)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def stack(workdir, hydra):
    running = Stack(workdir, hydra)
    yield running
    running.stop()


@pytest.fixture(scope="session")
def robot(hydra, stack):
    """A client-credentials client allowed the team resource as audience (and another one)."""
    secret = "robot-secret-0123456789"
    hydra.create_client(
        client_id="robot",
        client_secret=secret,
        grant_types=["client_credentials"],
        scope=f"{SCOPE} other",
        audience=[f"{stack.public}/mcp/team", "https://elsewhere.example"],
        token_endpoint_auth_method="client_secret_basic",
    )
    return ("robot", secret)
