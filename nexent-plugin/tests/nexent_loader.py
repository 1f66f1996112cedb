"""Loads plugin directories the way Nexent's backend does (``reference/nexent.md`` §1).

- every direct child of the plugin folder is a candidate; ``plugin.yaml`` is read with
  ``yaml.safe_load``; required keys ``name``, ``version`` (a string), ``entry_point``,
  ``class_name``, ``implements`` (a non-empty list of ``searchable`` / ``ingestible``);
- the entry file (exact name) is imported as module ``memory_plugin_<name>`` with
  ``importlib.util.spec_from_file_location``;
- the class must have a callable ``search`` for ``searchable`` and ``ingest`` for ``ingestible``;
- a bad candidate is skipped with a reason, never fatal;
- a provider is built per call from the saved parameters (``plugin.name`` and ``plugin.<key>``):
  required keys must be non-empty (the config service's only check; no types or defaults are
  applied), the ``plugin.`` prefix is stripped and ``timeout_seconds`` added.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, field

import yaml

REQUIRED_KEYS = ("name", "version", "entry_point", "class_name", "implements")
CAPABILITIES = {"searchable": "search", "ingestible": "ingest"}


@dataclass
class LoadedPlugin:
    name: str
    directory: str
    manifest: dict
    provider_class: type
    module_name: str


@dataclass
class Scan:
    loaded: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)


def scan(folder):
    """Every plugin of ``folder``, as Nexent's loader would see it now."""
    result = Scan()
    for child in sorted(os.listdir(folder)):
        directory = os.path.join(folder, child)
        try:
            plugin = _load(directory)
        except Exception as err:  # the loader logs and skips a bad plugin
            result.skipped[child] = f"{type(err).__name__}: {err}"
            continue
        result.loaded[plugin.name] = plugin
    return result


def _load(directory):
    if not os.path.isdir(directory):
        raise ValueError("not a directory")
    with open(os.path.join(directory, "plugin.yaml"), encoding="utf-8") as handle:
        manifest = yaml.safe_load(handle)
    if not isinstance(manifest, dict):
        raise ValueError("plugin.yaml is not a mapping")
    missing = [key for key in REQUIRED_KEYS if not manifest.get(key)]
    if missing:
        raise ValueError(f"missing keys {missing}")
    if not isinstance(manifest["version"], str):
        raise ValueError("version must be a quoted string")
    implements = manifest["implements"]
    if not isinstance(implements, list) or not implements or any(i not in CAPABILITIES for i in implements):
        raise ValueError("implements must list searchable and/or ingestible")
    entry = manifest["entry_point"]
    if entry not in os.listdir(directory):  # case matters
        raise ValueError(f"entry point {entry} not found")
    module_name = f"memory_plugin_{manifest['name']}"
    spec = importlib.util.spec_from_file_location(module_name, os.path.join(directory, entry))
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    provider_class = getattr(module, manifest["class_name"])
    for capability in implements:
        if not callable(getattr(provider_class, CAPABILITIES[capability], None)):
            raise ValueError(f"{capability} without a callable {CAPABILITIES[capability]}")
    return LoadedPlugin(manifest["name"], directory, manifest, provider_class, module_name)


def saved_parameters(plugin, **entered):
    """What Nexent's UI saves: ``plugin.name`` plus each schema key, pre-filled with its default
    and overridden by what the operator ``entered``."""
    params = {"plugin.name": plugin.name}
    for item in plugin.manifest.get("config_schema") or []:
        value = entered.get(item["key"], item.get("default"))
        params[f"plugin.{item['key']}"] = "" if value is None else value
    return params


def build_provider(plugin, params, timeout_seconds):
    """``MemoryExternalProviderService.build_provider``: a fresh provider from saved parameters."""
    for item in plugin.manifest.get("config_schema") or []:
        if item.get("required") and not params.get(f"plugin.{item['key']}"):
            raise ValueError(f"required parameter {item['key']} is empty")
    keys = {item["key"] for item in plugin.manifest.get("config_schema") or []}
    kwargs = {k[len("plugin."):]: v for k, v in params.items() if k[len("plugin."):] in keys}
    return plugin.provider_class(**kwargs, timeout_seconds=timeout_seconds)
