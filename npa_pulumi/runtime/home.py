"""The per-user npa-pulumi directory and what lives where in it.

<npa home>/            $NPA_PULUMI_HOME, else ~/.npa-pulumi
  state/               the default DIY backend (file://)
  passphrase           the generated secrets passphrase (0600)
  workspace/           the Automation API work dir every stack shares (its Pulumi.yaml)
  work/<stack>/        a cluster stack's Terraform work dir (recipe, tfvars, state, terraform.log)
  logs/<fleet>/        the engine's output per stack and command
  cache/               facts that are slow to recompute (runtime.disk_cache), staged recipes, plugins
  bin/                 the plugin-host wrapper (runtime.plugin_host)
  runs/                registries of running fleet operations for non-file backends
  local-cloud/         the embedded simulator's database (unless $NPA_LOCAL_CLOUD_DIR)
"""

from __future__ import annotations

import os
from pathlib import Path


def npa_home() -> Path:
    """`$NPA_PULUMI_HOME`, else `~/.npa-pulumi`."""
    return Path(os.environ.get("NPA_PULUMI_HOME") or Path.home() / ".npa-pulumi")


def cache_dir() -> Path:
    return npa_home() / "cache"


def work_dir(key: str) -> Path:
    """A cluster stack's Terraform work dir."""
    return npa_home() / "work" / key


def logs_dir(fleet: str) -> Path:
    return npa_home() / "logs" / fleet
