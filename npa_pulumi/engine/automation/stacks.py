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
The locks of an `s3://` backend are read the same way when the access key is in the environment
(diy_backend.s3_bucket); otherwise the engine's refusal names the holder (`recover_engine_lock`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine.automation.diy_backend import LockInfo, S3Unreadable, read_locks, remove_locks
from npa_pulumi.engine.automation.workspace import PROJECT_NAME, EngineSettings
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


# backend/diy/lock.go checkForLock: "\n  <lock url>: created by <user>@<host> (pid <pid>) at <RFC 3339>"
_LOCK_LINE = re.compile(
    r"^\s*(?P<where>\S+): created by (?P<user>.*)@(?P<host>[^@\s]+) \(pid (?P<pid>\d+)\) at (?P<ts>\S+)"
)


def lock_holders(engine_error: str) -> list[LockInfo]:
    """The locks the engine names when it refuses to lock a stack (its `ConcurrentUpdateError`): the one
    way to learn them on a backend whose files npa-pulumi does not read (gs://, azblob://, s3:// without a
    key here). Their location is the URL the engine printed."""
    holders = []
    for line in engine_error.splitlines():
        match = _LOCK_LINE.match(line)
        if match:
            holders.append(
                LockInfo(
                    match["where"], int(match["pid"]), match["host"], match["user"], match["ts"].rstrip(".,;")
                )
            )
    return holders


def engine_said(engine_error: str) -> str:
    """The end of the engine's refusal (where its lock lines are) on one line, for a message to quote."""
    return " ".join(engine_error.split())[-600:]


def locked_message(stack: str, holder: str, *, live_here: bool) -> str:
    if live_here:
        return (
            f"stack {stack} is being changed by another run ({holder}); wait for it to finish. That process "
            "is alive on this machine, so --break-lock does not take its lock over; if it is not that run, "
            f"clear the lock with: pulumi cancel --stack {stack} --yes"
        )
    return (
        f"stack {stack} is being changed by another run ({holder}); wait for it to finish. Nothing was "
        "changed on this stack. If that run is gone (killed, or its machine lost), rerun with --break-lock "
        "to take the lock over (pending operations are cleared; every create is idempotent)"
    )


def _take_over(stack_name: str, locks: list[LockInfo], break_lock: bool, remove: Callable[[], Any]) -> str:
    """Remove `locks` (with `remove`) when every owner is provably gone, or with `break_lock` when the live
    ones run on other machines, and say what was done; raise StackLocked naming a holder otherwise."""
    live = [lock for lock in locks if lock.owner_alive]
    for lock in live:
        if not break_lock or lock.local:
            raise StackLocked(locked_message(stack_name, lock.describe(), live_here=lock.local))
    remove()
    if live:
        return f"broke the lock held by {live[0].describe()} (--break-lock)"
    return f"removed a stale lock left by {locks[0].describe()} (that process is gone)"


def clear_stale_lock(
    stack: auto.Stack, backend_url: str, project_name: str = PROJECT_NAME, break_lock: bool = False
) -> str | None:
    """Remove a lock left by a dead process (or, with `break_lock`, one held by another machine); raise
    StackLocked if a live process holds it. Returns a note describing what was recovered, or None when
    there was no lock (or the backend's locks are not readable here: the engine then names the holder)."""
    locks = read_locks(backend_url, project_name, stack.name)
    return _take_over(stack.name, locks, break_lock, stack.cancel) if locks else None


def recover_engine_lock(stack: auto.Stack, engine_error: str, break_lock: bool = False) -> str | None:
    """After the engine refused to lock `stack`: remove the lock when every holder is provably gone (or,
    with `break_lock`, held by another machine) and return a note; raise StackLocked naming the holder
    otherwise. None when the error names no holder (the caller reports the engine's error)."""
    holders = lock_holders(engine_error)
    return _take_over(stack.name, holders, break_lock, stack.cancel) if holders else None


def clear_creation_lock(
    backend_url: str, project_name: str, stack_name: str, engine_error: str, break_lock: bool = False
) -> str:
    """After the engine refused to create `stack_name` because it is locked: the engine locks a stack
    while it creates it, so a run killed in that moment leaves the lock of a stack that does not exist,
    which `pulumi cancel` cannot reach (it needs the stack). Judged like any lock and removed from the
    backend directly; StackLocked when it must stay or cannot be removed from here."""
    locks = read_locks(backend_url, project_name, stack_name)
    if locks:
        try:
            return _take_over(stack_name, locks, break_lock, lambda: remove_locks(backend_url, locks))
        except S3Unreadable as err:
            raise StackLocked(
                f"stack {stack_name} cannot be created: the lock a killed run left for it could not be "
                f"removed ({err}); delete {locks[0].location} from the state bucket and rerun"
            ) from None
    holders = lock_holders(engine_error)
    if not holders:
        said = engine_said(engine_error)
        raise StackLocked(f"stack {stack_name} cannot be created: the engine says it is locked ({said})")

    def cannot_remove() -> None:
        raise StackLocked(
            f"stack {stack_name} cannot be created: the lock left by {holders[0].describe()} may be "
            f"removed, but npa-pulumi cannot delete this backend's locks; delete "
            f"{', '.join(h.location for h in holders)} and rerun"
        )

    return _take_over(stack_name, holders, break_lock, cannot_remove)


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
