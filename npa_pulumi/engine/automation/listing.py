"""Which stacks a backend holds: their names (the one `stack_names`), the fleet's stacks with their
details for `npa-pulumi stacks`, and the name a StackReference gives a stack."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from npa_pulumi.engine.automation import diy_backend
from npa_pulumi.engine.automation.tags import TAG_FLEET
from npa_pulumi.engine.automation.workspace import PROJECT_NAME, EngineSettings
from npa_pulumi.errors import NpaError
from npa_pulumi.runtime.toolchain import find_pulumi


class StackListingFailed(NpaError):
    kind = "stack-listing"


def stack_names(
    backend_url: str, project_name: str = PROJECT_NAME, *, engine: EngineSettings | None = None
) -> list[str]:
    """The project's stacks in the backend, plain names (`<fleet>.<project>[.<cluster>]`), sorted.

    Read from a DIY (file://) backend's checkpoint files where npa-pulumi knows their layout: what
    `pulumi stack ls` reads, without an engine start (~0.15 s of CPU each time); on an s3:// backend
    readable from here, from a listing of its keys. Elsewhere the engine
    lists them (`pulumi stack ls`, StackListingFailed when it cannot) when `engine` gives its settings;
    without them, none ([]): the callers that must not start an engine for it (`doctor`, which checks a
    machine read-only; adopt's look for clusters other stacks hold, which reads their checkpoints
    anyway) pass none."""
    names = diy_backend.stack_names(backend_url, project_name)
    if names is not None:
        return names
    if engine is None:
        return []
    listed = _stack_ls(engine, project_name)
    # A stack of another organization or project would be qualified (`org/project/stack`); the fleet's
    # are the project's, named plainly.
    return sorted({str(row.get("name", "")).rsplit("/", 1)[-1] for row in listed} - {""})


def _stack_ls(settings: EngineSettings, project_name: str, fleet: str | None = None) -> list[dict[str, Any]]:
    """`pulumi stack ls --json` of the project (the fleet's stacks, by their `npa:fleet` tag, with
    `fleet`)."""
    cmd = [str(find_pulumi()), "stack", "ls", "--json", "--project", project_name]
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
    listed = json.loads(proc.stdout or "[]")
    return [row for row in listed if isinstance(row, dict)] if isinstance(listed, list) else []


def list_fleet_stacks(backend: str | None = None, fleet: str | None = None) -> list[dict[str, Any]]:
    """The fleet's stacks in a backend with their npa tags, through `pulumi stack ls`."""
    stacks = _stack_ls(EngineSettings.resolve(backend), PROJECT_NAME, fleet)
    return [
        {
            "name": s.get("name"),
            "last_update": s.get("lastUpdate"),
            "resource_count": s.get("resourceCount"),
            "update_in_progress": s.get("updateInProgress", False),
        }
        for s in stacks
    ]


def stack_reference_name(stack: str, project_name: str = PROJECT_NAME) -> str:
    """The fully qualified name a StackReference needs on a DIY backend (the org is literally
    `organization`)."""
    return f"organization/{project_name}/{stack}"
