"""Stack bookkeeping: tags, listing the fleet's stacks, stale locks and pending operations.

A killed `npa-pulumi up` leaves two things behind in a DIY backend: a lock file naming the dead process,
and `pending_operations` for the resources that were mid-change. Both are recovered automatically:
* a lock whose owner is a dead process on this host is removed (`pulumi cancel`); a lock held by a live
  process — another run — is reported as such, with who holds it and since when;
* pending operations are dropped from the checkpoint (export → edit → import). That is safe here because
  every fleet resource's create is idempotent: it first finds what it would create (projects by name,
  owned subnets by label, clusters through the Terraform state kept in the stack's work dir).
Backends other than `file://` get the exact command to run instead.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine.workspace import PROJECT_NAME
from npa_pulumi.errors import NpaError
from npa_pulumi.runtime.home import write_atomically
from npa_pulumi.runtime.supervision import is_zombie

if TYPE_CHECKING:
    from pulumi import automation as auto

log = logging.getLogger(__name__)

TAG_FLEET = "npa:fleet"
TAG_PROJECT = "npa:project"
TAG_CLUSTER = "npa:cluster"
TAG_KIND = "npa:kind"


class StackLocked(NpaError):
    kind = "stack-locked"


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


def write_diy_tags(
    backend_url: str, stack: str, tags: dict[str, str], project_name: str = PROJECT_NAME
) -> bool:
    """Set tags on a file:// backend by writing the stack's tags file as the engine does
    (`<stack>.pulumi-tags`, `{"version": 1, "tags": {...}}`, pulumi v3.259 backend/diy/stack_tags.go),
    merged with the tags already there. Returns False, writing nothing, when that is not possible (another
    backend or layout, no such stack, a tags file of another version): the caller then uses the CLI.

    Why: `pulumi stack tag set` is one engine start (~0.35 s of CPU) per tag, four per new cluster
    stack: about a third of the CPU a first deploy of a fleet spent on two cores."""
    stacks_dir = diy_stacks_dir(backend_url, project_name)
    if stacks_dir is None or not (stacks_dir / f"{stack}.json").is_file():
        return False
    path = stacks_dir / f"{stack}.pulumi-tags"
    current: dict[str, str] = {}
    if path.exists():
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError):
            return False
        if not isinstance(document, dict) or document.get("version") != 1:
            return False
        current = {str(k): str(v) for k, v in (document.get("tags") or {}).items()}
    merged = {**current, **tags}
    if merged == current:
        return True
    # The blob store's attributes sidecar (content type, md5) describes the old content; it is optional.
    path.with_name(path.name + ".attrs").unlink(missing_ok=True)
    write_atomically(path, json.dumps({"version": 1, "tags": dict(sorted(merged.items()))}))
    return True


def stack_reference_name(stack: str, project_name: str = PROJECT_NAME) -> str:
    """The fully qualified name a StackReference needs on a DIY backend (the org is literally
    `organization`)."""
    return f"organization/{project_name}/{stack}"


def _diy_root(backend_url: str) -> Path | None:
    if not backend_url.startswith("file://"):
        return None
    return Path(os.path.expanduser(backend_url[len("file://") :]))


def _lock_dir(backend_url: str, stack: str, project_name: str = PROJECT_NAME) -> Path | None:
    root = _diy_root(backend_url)
    if root is None:
        return None
    return root / ".pulumi" / "locks" / "organization" / project_name / stack


@dataclass(frozen=True)
class LockInfo:
    path: Path
    pid: int
    hostname: str
    username: str
    timestamp: str

    @property
    def owner_alive(self) -> bool:
        if self.hostname != socket.gethostname():
            return True  # cannot tell for another host: assume it is a real, running update
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return not is_zombie(self.pid)  # a killed engine nothing reaped: its lock is stale


SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's marker of a secret value in a checkpoint
SECRET_PLACEHOLDER = "[secret]"
NO_FAST_PATH = object()


def _mask_secrets(value: Any) -> Any:
    if isinstance(value, dict):
        if SECRET_SIG in value:
            return SECRET_PLACEHOLDER
        return {k: _mask_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_secrets(v) for v in value]
    return value


def diy_stacks_dir(backend_url: str, project_name: str = PROJECT_NAME) -> Path | None:
    """Where a project-scoped DIY (file://) backend keeps this project's checkpoints; None for any other
    backend, or a layout this reader does not know (legacy or future), so callers ask the CLI instead."""
    root = _diy_root(backend_url)
    if root is None:
        return None
    try:
        meta = (root / ".pulumi" / "meta.yaml").read_text()
    except FileNotFoundError:
        # A backend no stack was ever written to: the engine will create the current layout in it.
        return None if (root / ".pulumi").exists() else root / ".pulumi" / "stacks" / project_name
    except OSError:
        return None
    if not any(line.strip() == "version: 1" for line in meta.splitlines()):
        return None
    return root / ".pulumi" / "stacks" / project_name


def _latest_deployment(backend_url: str, stack: str, project_name: str) -> Any:
    """The `checkpoint.latest` of a stack on a project-scoped DIY backend ({} before its first update);
    None when the stack does not exist; `NO_FAST_PATH` for another backend or an unreadable file. The DIY
    backend writes checkpoints atomically (temp file + rename), so a concurrent update never shows a torn
    file."""
    stacks_dir = diy_stacks_dir(backend_url, project_name)
    if stacks_dir is None:
        return NO_FAST_PATH
    base = stacks_dir / f"{stack}.json"
    try:
        if base.is_file():
            document = json.loads(base.read_text())
        elif base.with_suffix(".json.gz").is_file():
            with gzip.open(base.with_suffix(".json.gz"), "rt") as handle:
                document = json.load(handle)
        else:
            return None
    except (OSError, ValueError):
        return NO_FAST_PATH
    return (document.get("checkpoint") or {}).get("latest") or {}


def checkpoint_outputs(backend_url: str, stack: str, project_name: str = PROJECT_NAME) -> Any:
    """A stack's outputs read straight from a DIY (file://) backend's checkpoint, secrets masked as
    `[secret]`; None when the stack does not exist. Returns `NO_FAST_PATH` when the backend is not a
    project-scoped DIY backend (see `diy_stacks_dir`), so the caller asks the Pulumi CLI instead.

    Why: the CLI path costs three engine invocations per stack (`stack select` and `stack output`
    twice, about 1.5 s of CPU), which dominated a no-op `up` of a large fleet."""
    latest = _latest_deployment(backend_url, stack, project_name)
    if latest is None or latest is NO_FAST_PATH:
        return latest
    for resource in latest.get("resources") or []:
        if resource.get("type") == "pulumi:pulumi:Stack" and not resource.get("parent"):
            return _mask_secrets(dict(resource.get("outputs") or {}))
    return {}


def interrupted(backend_url: str, stack: str, project_name: str = PROJECT_NAME) -> bool:
    """Whether a file:// backend shows the stack locked or with pending operations: an update was killed
    (or is running) after it may already have written its outputs, so the stack must not be skipped as
    unchanged; running it recovers the lock (or reports who holds it)."""
    if read_locks(backend_url, stack):
        return True
    latest = _latest_deployment(backend_url, stack, project_name)
    return isinstance(latest, dict) and bool(latest.get("pending_operations"))


def read_locks(backend_url: str, stack: str) -> list[LockInfo]:
    lock_dir = _lock_dir(backend_url, stack)
    if lock_dir is None or not lock_dir.is_dir():
        return []
    locks = []
    for path in sorted(lock_dir.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        locks.append(
            LockInfo(
                path,
                int(data.get("pid", 0)),
                str(data.get("hostname", "")),
                str(data.get("username", "")),
                str(data.get("timestamp", "")),
            )
        )
    return locks


def clear_stale_lock(stack: auto.Stack, backend_url: str) -> str | None:
    """Remove a lock left by a dead process; raise StackLocked if a live process holds it.
    Returns a note describing what was recovered, or None when there was no lock."""
    locks = read_locks(backend_url, stack.name)
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
    """Drop pending operations from the checkpoint; returns the URNs that were pending."""
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
