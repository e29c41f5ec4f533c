"""Stack bookkeeping through the Automation API and the CLI: tags, listing the fleet's stacks, stale locks
and pending operations.

A killed `npa-pulumi up` leaves two things behind in a DIY backend: a lock file naming the dead process,
and `pending_operations` for the resources that were mid-change. Both are recovered automatically:
* a lock whose owner is gone (diy_backend.LockInfo) is removed with `pulumi cancel`; a lock held by a live
  process — another run — is reported as such, with who holds it and since when;
* pending operations are dropped from the checkpoint through `stack export` / `stack import`. That is safe
  here because every fleet resource's create is idempotent: it first finds what it would create (projects
  by name, owned subnets by label, clusters through the Terraform state kept in the stack's work dir).
  (`refresh --clear-pending-creates` would do the same for pending creates only, at the price of reading
  every resource of the stack again, terraform included.)
Backends other than `file://` get the exact command to run instead.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine.diy_backend import read_locks
from npa_pulumi.engine.workspace import PROJECT_NAME, EngineSettings
from npa_pulumi.errors import NpaError
from npa_pulumi.runtime.toolchain import find_pulumi

if TYPE_CHECKING:
    from pulumi import automation as auto

TAG_FLEET = "npa:fleet"
TAG_PROJECT = "npa:project"
TAG_CLUSTER = "npa:cluster"
TAG_KIND = "npa:kind"


class StackLocked(NpaError):
    kind = "stack-locked"


class StackListingFailed(NpaError):
    kind = "stack-listing"


def stack_tags(fleet: str, project_key: str, cluster: str | None) -> dict[str, str]:
    tags = {TAG_FLEET: fleet, TAG_PROJECT: project_key, TAG_KIND: "cluster" if cluster else "project"}
    if cluster:
        tags[TAG_CLUSTER] = cluster
    return tags


def ensure_tags(stack: auto.Stack, tags: dict[str, str], current: dict[str, str] | None = None) -> None:
    """Set only the tags that differ (each tag call is a CLI round trip); `current` spares listing them
    when the caller knows them (a stack it has just created has none)."""
    if current is None:
        try:
            current = dict(stack.list_tags())
        except Exception:
            current = {}
    for name, value in tags.items():
        if current.get(name) != value:
            stack.set_tag(name, value)


def stack_reference_name(stack: str, project_name: str = PROJECT_NAME) -> str:
    """The fully qualified name a StackReference needs on a DIY backend (the org is literally
    `organization`)."""
    return f"organization/{project_name}/{stack}"


def list_fleet_stacks(backend: str | None = None, fleet: str | None = None) -> list[dict[str, Any]]:
    """The fleet's stacks in a backend with their npa tags, through `pulumi stack ls`."""
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


def clear_stale_lock(stack: auto.Stack, backend_url: str, project_name: str = PROJECT_NAME) -> str | None:
    """Remove a lock left by a dead process; raise StackLocked if a live process holds it.
    Returns a note describing what was recovered, or None when there was no lock."""
    locks = read_locks(backend_url, project_name, stack.name)
    if not locks:
        return None
    live = [lock for lock in locks if lock.owner_alive]
    if live:
        lock = live[0]
        raise StackLocked(
            f"stack {stack.name} is being changed by another run (pid {lock.pid} on {lock.hostname}, "
            f"user {lock.username}, since {lock.timestamp}); wait for it to finish. If that run is gone, "
            f"clear the lock with: pulumi cancel --stack {stack.name} --yes"
        )
    stack.cancel()
    return f"removed a stale lock left by pid {locks[0].pid} ({locks[0].timestamp})"


def clear_pending_operations(stack: auto.Stack) -> list[str]:
    """Drop pending operations from the checkpoint (`stack export` / `stack import`); returns the URNs
    that were pending."""
    deployment = stack.export_stack()
    body: dict[str, Any] = dict(deployment.deployment or {})
    pending = body.get("pending_operations") or []
    if not pending:
        return []
    urns = [op.get("resource", {}).get("urn", "?") for op in pending]
    body["pending_operations"] = []
    deployment.deployment = body
    stack.import_stack(deployment)
    return urns


def recovery_command(stack: str) -> str:
    return (
        f"pulumi cancel --stack {stack} --yes && pulumi refresh --stack {stack} --clear-pending-creates --yes"
    )
