"""Nexent's memory provider plugin loader, reproduced for the harness.

Mirrors ``PluginLoader`` of Nexent's backend (``backend/services/memory_provider_plugin_loader.py``;
the search index holds it only from the fork qianfenaichou/nexent at commit
a15343c7b477530d87ace7b693271ff57e899c99, the upstream service that calls it is in
ModelEngine-Group/nexent at 828d302f9614d7def132de1deaf35891509327c9):

- every direct child DIRECTORY of the plugin folder is a candidate (files are passed over without a
  word); ``plugin.yaml`` must exist and is read with ``yaml.safe_load``; it must be a mapping
  holding the keys ``name``, ``version``, ``entry_point``, ``class_name`` and ``implements`` (a
  list; only their presence is checked, not their values);
- the entry file must exist (exact name) and is imported as module ``memory_plugin_<name>`` with
  ``importlib.util.spec_from_file_location``;
- the class must exist and have a callable ``search`` for ``searchable`` and ``ingest`` for
  ``ingestible``; any other entry in ``implements`` fails the plugin;
- a failing candidate is logged and skipped, never fatal;
- ``build_provider(name, config)`` returns ``provider_class(config)``: the settings dict is ONE
  POSITIONAL ARGUMENT.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import yaml

REQUIRED_KEYS = ("name", "version", "entry_point", "class_name", "implements")
CAPABILITIES = {"searchable": "search", "ingestible": "ingest"}


@dataclass
class PluginInfo:
    """One loaded plugin, as Nexent records it."""

    name: str
    version: Any
    description: str
    implements: list
    config_schema: list
    plugin_dir: str
    module_name: str
    provider_class: type
    manifest: dict


@dataclass
class PluginLoader:
    """The plugins of one folder; ``skipped`` says why each failing directory was left out."""

    folder: str
    plugins: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)

    def load_all(self):
        """Scan the folder as Nexent's loader does."""
        self.plugins, self.skipped = {}, {}
        for child in sorted(os.listdir(self.folder)):
            directory = os.path.join(self.folder, child)
            if not os.path.isdir(directory):
                continue
            try:
                plugin = _load(directory)
            except Exception as err:  # the loader logs and skips a bad plugin
                self.skipped[child] = f"{type(err).__name__}: {err}"
                continue
            self.plugins[plugin.name] = plugin
        return self

    def get_plugin(self, name):
        """The loaded plugin ``name`` or None."""
        return self.plugins.get(name)

    def build_provider(self, name, config):
        """A fresh provider: ``provider_class(config)``, as Nexent constructs it."""
        plugin = self.plugins.get(name)
        if plugin is None:
            raise ValueError(f"Memory provider plugin not found: {name!r}")
        return plugin.provider_class(config)


def _load(directory):
    manifest_path = os.path.join(directory, "plugin.yaml")
    if not os.path.isfile(manifest_path):
        raise ValueError("plugin.yaml not found")
    with open(manifest_path, encoding="utf-8") as handle:
        manifest = yaml.safe_load(handle)
    if not isinstance(manifest, dict):
        raise ValueError("plugin.yaml is not a mapping")
    missing = [key for key in REQUIRED_KEYS if key not in manifest]
    if missing:
        raise ValueError(f"missing keys {missing}")
    if not isinstance(manifest["implements"], list):
        raise ValueError("implements must be a list")
    entry = os.path.join(directory, manifest["entry_point"])
    if not os.path.isfile(entry):
        raise ValueError("entry point not found")
    module_name = f"memory_plugin_{manifest['name']}"
    spec = importlib.util.spec_from_file_location(module_name, entry)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    provider_class = getattr(module, manifest["class_name"], None)
    if provider_class is None:
        raise ValueError(f"class {manifest['class_name']} not found")
    for capability in manifest["implements"]:
        method = CAPABILITIES.get(capability)
        if method is None or not callable(getattr(provider_class, method, None)):
            raise ValueError(f"{capability} not implemented")
    return PluginInfo(
        name=manifest["name"],
        version=manifest.get("version", "0.0.0"),
        description=manifest.get("description", ""),
        implements=manifest["implements"],
        config_schema=manifest.get("config_schema", []),
        plugin_dir=directory,
        module_name=module_name,
        provider_class=provider_class,
        manifest=manifest,
    )


def saved_parameters(plugin, **entered):
    """What Nexent's UI saves for a provider: ``plugin.name`` plus ``plugin.<key>`` for each schema
    key, pre-filled with its default and overridden by what the operator ``entered``. Nexent's
    config service only checks that ``required`` keys are non-empty."""
    params = {"plugin.name": plugin.name}
    for item in plugin.config_schema or []:
        value = entered.get(item["key"], item.get("default"))
        params[f"plugin.{item['key']}"] = "" if value is None else value
    for item in plugin.config_schema or []:
        if item.get("required") and not params[f"plugin.{item['key']}"]:
            raise ValueError(f"required parameter {item['key']} is empty")
    return params
