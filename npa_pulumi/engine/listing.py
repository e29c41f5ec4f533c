"""Listing the fleet's stacks in a backend, with their npa tags, through the plain Pulumi CLI."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from npa_pulumi.engine.stacks import TAG_FLEET
from npa_pulumi.engine.workspace import PROJECT_NAME, EngineSettings
from npa_pulumi.errors import NpaError
from npa_pulumi.runtime.toolchain import find_pulumi


class StackListingFailed(NpaError):
    kind = "stack-listing"


def list_fleet_stacks(backend: str | None = None, fleet: str | None = None) -> list[dict[str, Any]]:
    settings = EngineSettings.resolve(backend)
    cmd = [str(find_pulumi()), "stack", "ls", "--json", "--project", PROJECT_NAME]
    if fleet:
        cmd += ["--tag", f"{TAG_FLEET}={fleet}"]
    proc = subprocess.run(
        cmd,
        cwd=settings.work_dir,
        env={**os.environ, **settings.env()},
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise StackListingFailed(f"pulumi stack ls failed: {proc.stderr.strip()[-500:]}")
    stacks = json.loads(proc.stdout or "[]")
    return [
        {
            "name": s.get("name"),
            "last_update": s.get("lastUpdate"),
            "resource_count": s.get("resourceCount"),
            "update_in_progress": s.get("updateInProgress", False),
        }
        for s in stacks
    ]
