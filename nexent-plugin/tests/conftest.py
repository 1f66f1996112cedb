"""The harness: the Nexent SDK test doubles on ``sys.path``, the running processes started by
``run.sh`` (dev upstream, gateway) and the plugin folder written by the real
``memgate-gateway write-nexent-plugins``."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "sdk_doubles"))  # the `nexent` TEST DOUBLE, never the real SDK
sys.path.insert(0, HERE)

import nexent_loader  # noqa: E402

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
    scan = nexent_loader.scan(env["MEMGATE_PLUGINS_DIR"])
    return scan
