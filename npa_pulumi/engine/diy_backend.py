"""The one module that reads and writes the Pulumi engine's own files in a DIY (file://) backend.

Everything else goes through the Automation API or the CLI's documented commands. These shortcuts stay
because each spares engine starts that were measured to matter, and each is checked against the format
version it understands, falling back to the API for anything else (another backend, another layout, a
newer version). The versions below are those of the pinned engine (pulumi v3.259, pkg/backend/diy);
tests/unit/test_diy_backend.py pins them, and an integration test checks that the engine writes them.

* `checkpoint_outputs` (stack outputs from `<stack>.json`): the CLI path is three engine invocations per
  stack (`stack select`, `stack output` twice, about 1.5 s of CPU), which dominated a no-op `up` of a
  large fleet.
* `write_tags` (`<stack>.pulumi-tags`): `pulumi stack tag set` is one engine start (~0.35 s of CPU) per
  tag, four per new cluster stack: about a third of the CPU a first deploy of a fleet spent on two cores.
* `read_locks` (`.pulumi/locks/...`): the engine offers no way to ask who holds a stack's lock; the
  owner's pid, host and time decide whether a lock is stale (then `pulumi cancel` removes it).
* `has_pending_operations` / `interrupted`: whether a killed update left the stack locked or with pending
  operations, without an engine start per stack on every `up`.
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.processes import parse_timestamp, process_alive

# Format versions this module understands (pinned engine: backend/diy/{meta,stack_tags}.go,
# apitype.DeploymentSchemaVersionCurrent).
META_VERSION: Final = 1  # `.pulumi/meta.yaml` `version: 1`: project-scoped stacks
TAGS_VERSION: Final = 1  # `<stack>.pulumi-tags`: {"version": 1, "tags": {...}}
CHECKPOINT_VERSION: Final = 3  # `<stack>.json`: {"version": 3, "checkpoint": {"latest": {...}}}

SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's marker of a secret value in a checkpoint
SECRET_PLACEHOLDER = "[secret]"
NO_FAST_PATH = object()  # "ask the engine": not a DIY backend, or not a layout this module knows


def diy_root(backend_url: str) -> Path | None:
    if not backend_url.startswith("file://"):
        return None
    # The engine's URL is absolute already (workspace.resolve_backend_url); a query is not part of the path.
    return Path(os.path.expanduser(backend_url[len("file://") :].partition("?")[0]))


def stacks_dir(backend_url: str, project_name: str) -> Path | None:
    """Where a project-scoped DIY (file://) backend keeps this project's checkpoints; None for any other
    backend, or a layout this module does not know (legacy or future), so callers ask the CLI instead."""
    root = diy_root(backend_url)
    if root is None:
        return None
    try:
        meta = (root / ".pulumi" / "meta.yaml").read_text()
    except FileNotFoundError:
        # A backend no stack was ever written to: the engine will create the current layout in it.
        return None if (root / ".pulumi").exists() else root / ".pulumi" / "stacks" / project_name
    except OSError:
        return None
    if not any(line.strip() == f"version: {META_VERSION}" for line in meta.splitlines()):
        return None
    return root / ".pulumi" / "stacks" / project_name


def stack_names(backend_url: str, project_name: str) -> list[str] | None:
    """The project's stacks on a DIY (file://) backend, from its checkpoint files (what `pulumi stack ls`
    reads, without an engine start); None for another backend, or a file this module does not know."""
    directory = stacks_dir(backend_url, project_name)
    if directory is None:
        return None
    names = []
    try:
        entries = list(directory.iterdir())
    except FileNotFoundError:
        return []
    except OSError:
        return None
    for entry in entries:
        name = entry.name
        if name.startswith(".") or ".json.bak" in name or name.endswith((".attrs", ".pulumi-tags")):
            continue  # temp files, backups, the blob store's attributes files, tags
        if name.endswith(".json"):
            names.append(name.removesuffix(".json"))
        elif name.endswith(".json.gz"):
            names.append(name.removesuffix(".json.gz"))
        else:
            return None  # another compression or layout: ask the CLI
    return sorted(set(names))


# ------------------------------------------------------------------------------------------- tags


def write_tags(backend_url: str, project_name: str, stack: str, tags: dict[str, str]) -> bool:
    """Set tags on a file:// backend by writing the stack's tags file as the engine does, merged with the
    tags already there. Returns False, writing nothing, when that is not possible (another backend or
    layout, no such stack, a tags file of another version): the caller then uses the API."""
    directory = stacks_dir(backend_url, project_name)
    if directory is None or not (directory / f"{stack}.json").is_file():
        return False
    path = directory / f"{stack}.pulumi-tags"
    current: dict[str, str] = {}
    if path.exists():
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError):
            return False
        if not isinstance(document, dict) or document.get("version") != TAGS_VERSION:
            return False
        current = {str(k): str(v) for k, v in (document.get("tags") or {}).items()}
    merged = {**current, **tags}
    if merged == current:
        return True
    # The blob store's attributes sidecar (content type, md5) describes the old content; it is optional.
    path.with_name(path.name + ".attrs").unlink(missing_ok=True)
    write_atomically(path, json.dumps({"version": TAGS_VERSION, "tags": dict(sorted(merged.items()))}))
    return True


# ------------------------------------------------------------------------------------ checkpoints


def _mask_secrets(value: Any) -> Any:
    if isinstance(value, dict):
        if SECRET_SIG in value:
            return SECRET_PLACEHOLDER
        return {k: _mask_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_secrets(v) for v in value]
    return value


def _latest_deployment(backend_url: str, stack: str, project_name: str) -> Any:
    """The `checkpoint.latest` of a stack on a project-scoped DIY backend ({} before its first update);
    None when the stack does not exist; `NO_FAST_PATH` for another backend, an unreadable file or another
    checkpoint version. The DIY backend writes checkpoints atomically (temp file + rename), so a
    concurrent update never shows a torn file."""
    directory = stacks_dir(backend_url, project_name)
    if directory is None:
        return NO_FAST_PATH
    base = directory / f"{stack}.json"
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
    if not isinstance(document, dict) or document.get("version") != CHECKPOINT_VERSION:
        return NO_FAST_PATH
    return (document.get("checkpoint") or {}).get("latest") or {}


def checkpoint_outputs(backend_url: str, stack: str, project_name: str) -> Any:
    """A stack's outputs read straight from its checkpoint, secrets masked as `[secret]`; None when the
    stack does not exist; `NO_FAST_PATH` when the caller must ask the engine instead."""
    latest = _latest_deployment(backend_url, stack, project_name)
    if latest is None or latest is NO_FAST_PATH:
        return latest
    for resource in latest.get("resources") or []:
        if resource.get("type") == "pulumi:pulumi:Stack" and not resource.get("parent"):
            return _mask_secrets(dict(resource.get("outputs") or {}))
    return {}


def has_pending_operations(backend_url: str, stack: str, project_name: str) -> bool:
    latest = _latest_deployment(backend_url, stack, project_name)
    return isinstance(latest, dict) and bool(latest.get("pending_operations"))


# ------------------------------------------------------------------------------------------ locks


@dataclass(frozen=True)
class LockInfo:
    """A stack lock file: `{"pid", "username", "hostname", "timestamp"}` (backend/diy/lock.go)."""

    path: Path
    pid: int
    hostname: str
    username: str
    timestamp: str

    @property
    def owner_alive(self) -> bool:
        """Whether the engine that took the lock still runs (runtime.processes: a zombie, or a pid reused
        since the lock was taken, is not it; another host's lock is assumed live)."""
        return process_alive(self.pid, hostname=self.hostname, since=parse_timestamp(self.timestamp))


def read_locks(backend_url: str, project_name: str, stack: str) -> list[LockInfo]:
    root = diy_root(backend_url)
    if root is None:
        return []
    lock_dir = root / ".pulumi" / "locks" / "organization" / project_name / stack
    if not lock_dir.is_dir():
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


def interrupted(backend_url: str, stack: str, project_name: str) -> bool:
    """Whether a file:// backend shows the stack locked or with pending operations: an update was killed
    (or is running) after it may already have written its outputs, so the stack must not be skipped as
    unchanged; running it recovers the lock (or reports who holds it)."""
    return bool(read_locks(backend_url, project_name, stack)) or has_pending_operations(
        backend_url, stack, project_name
    )
