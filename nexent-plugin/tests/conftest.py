"""The harness: the Nexent SDK test doubles on ``sys.path``, the running processes started by
``run.sh`` (dev upstream, gateway), the plugin folder written by the real
``memgate-gateway write-nexent-plugins``, Nexent's loader and provider service over it, and the
retry loop's pauses recorded instead of slept."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "sdk_doubles"))  # the `nexent` TEST DOUBLE, never the real SDK
sys.path.insert(0, HERE)

import nexent_loader  # noqa: E402
import nexent_service  # noqa: E402
from nexent.memory.providers import retry  # noqa: E402

ENV = {
    name: os.environ.get(name, "")
    for name in (
        "MEMGATE_GATEWAY",
        "MEMGATE_GATEWAY_BIN",
        "MEMGATE_CONFIG_DIR",
        "MEMGATE_PLUGINS_DIR",
        "MEMGATE_DEV_UPSTREAM",
        "MEMGATE_DEV_UPSTREAM_API_KEY",
        "MEMGATE_CALLER_TOKEN",
    )
}


@pytest.fixture(scope="session")
def env():
    missing = [name for name, value in ENV.items() if not value]
    assert not missing, f"run through nexent-plugin/tests/run.sh (missing {missing})"
    return ENV


@pytest.fixture(scope="session")
def plugins(env):
    return nexent_loader.PluginLoader(env["MEMGATE_PLUGINS_DIR"]).load_all()


@pytest.fixture
def service(plugins):
    return nexent_service.ProviderService(plugins)


@pytest.fixture(autouse=True)
def pauses(monkeypatch):
    """The retry loop's back-off pauses, recorded instead of slept."""
    recorded = []

    async def record(seconds):
        recorded.append(seconds)

    monkeypatch.setattr(retry, "_sleep", record)
    return recorded
