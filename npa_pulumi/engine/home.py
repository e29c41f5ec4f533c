"""The per-user npa-pulumi directory (state, passphrase, work dirs, logs, caches, the local cloud)."""

from __future__ import annotations

import os
from pathlib import Path


def npa_home() -> Path:
    """`$NPA_PULUMI_HOME`, else `~/.npa-pulumi`."""
    return Path(os.environ.get("NPA_PULUMI_HOME") or Path.home() / ".npa-pulumi")
