"""Stale locks and pending operations: what a killed run leaves behind, recovered before the next one.

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

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine.automation.diy_backend import LockInfo, S3Unreadable, read_locks, remove_locks
from npa_pulumi.engine.automation.events import plain_text
from npa_pulumi.engine.automation.workspace import PROJECT_NAME
from npa_pulumi.errors import NpaError

if TYPE_CHECKING:
    from pulumi import automation as auto

    from npa_pulumi.output.progress import Progress


class StackLocked(NpaError):
    kind = "stack-locked"


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


def locked_by_engine_message(stack: str, engine_error: str) -> str:
    """A stack the engine refused to lock, naming no holder npa-pulumi can judge: what it did say (its lock
    lines), with the commands that clear the lock if no other run is active."""
    said = engine_said(plain_text(engine_error))
    return (
        f"stack {stack} is locked by another update; if no other run is "
        f"active: {recovery_command(stack)} (the engine said: {said})"
    )


class LockRecovery:
    """The runner's lock handling for one command: a stale lock cleared before a run, a lock the engine
    refused recovered once, a killed creation's lock removed; a live holder raised as StackLocked.
    Every recovery is reported on the progress view."""

    def __init__(self, backend_url: str, project_name: str, break_lock: bool, progress: Progress) -> None:
        self.backend_url = backend_url
        self.project_name = project_name
        self.break_lock = break_lock  # `--break-lock`: take over a lock another machine holds
        self.progress = progress

    def before_run(self, stack: auto.Stack) -> None:
        """Locks first: setting a tag on a stack another process holds fails with the engine's generic
        "locked" error, before a stale lock could be recovered or a live one named."""
        note = clear_stale_lock(stack, self.backend_url, self.project_name, self.break_lock)
        if note is not None:
            self._recovered(stack, note)

    def after_refusal(self, stack: auto.Stack, engine_error: str) -> bool:
        """The engine refused to lock `stack` (only it can read a lock on a backend other than file://: it
        names the holder): recover and say True, so the caller runs again; False when it named none."""
        note = recover_engine_lock(stack, engine_error, self.break_lock)
        if note is None:
            return False
        self._recovered(stack, note)
        return True

    def creating(self, stack_name: str, create: Callable[[], auto.Stack]) -> auto.Stack:
        """`create()`, recovering once from the lock a run killed while it created this stack left
        behind (the engine locks a stack it creates; `before_run` can only clear the locks of existing
        stacks)."""
        from pulumi import automation as auto

        try:
            return create()
        except auto.ConcurrentUpdateError as err:
            note = clear_creation_lock(
                self.backend_url, self.project_name, stack_name, plain_text(str(err)), self.break_lock
            )
            self.progress.message(f"{stack_name}: recovered from an interrupted run: {note}")
            return create()

    def _recovered(self, stack: auto.Stack, note: str) -> None:
        cleared = clear_pending_operations(stack)
        if cleared:
            note += f"; cleared {len(cleared)} pending operation(s) (their creates are idempotent)"
        self.progress.message(f"{stack.name}: recovered from an interrupted run: {note}")
