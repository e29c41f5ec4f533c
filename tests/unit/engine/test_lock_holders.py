"""Who holds a stack's engine lock, read from the engine's refusal (any DIY backend, s3:// included), and
the recovery of the lock a run killed while it created a stack leaves behind (a stack not yet there)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from npa_pulumi.engine.automation.locks import StackLocked, clear_creation_lock, lock_holders

# The pinned engine's message (backend/diy/lock.go checkForLock), as the Automation API raises it.
REFUSAL = (
    "code: 255\n stdout: \n stderr: error: the stack is currently locked by 2 lock(s). Either wait for the "
    "other process(es) to end or delete the lock file with `pulumi cancel`.\n"
    "  s3://state/.pulumi/locks/organization/npa-fleet/f.p.c/6b1c.json?endpoint=http%3A%2F%2F127.0.0.1"
    "%3A9000&region=us-east-1: created by alice@machine-a.example (pid 4242) at 2026-12-01T10:38:14Z\n"
    "  s3://state/.pulumi/locks/organization/npa-fleet/f.p.c/77aa.json: created by dom\\bob@build-7 (pid 17) "
    "at 2026-12-01T11:00:00+01:00\n"
)


def test_holders_are_parsed_from_the_engine_refusal() -> None:
    holders = lock_holders(REFUSAL)
    assert [(h.username, h.hostname, h.pid, h.timestamp) for h in holders] == [
        ("alice", "machine-a.example", 4242, "2026-12-01T10:38:14Z"),
        ("dom\\bob", "build-7", 17, "2026-12-01T11:00:00+01:00"),
    ]
    assert "pid 4242 on machine-a.example, user alice" in holders[0].describe()
    assert holders[1].location == "s3://state/.pulumi/locks/organization/npa-fleet/f.p.c/77aa.json"


def test_no_holders_in_other_errors() -> None:
    assert lock_holders("error: the stack is currently locked by 1 lock(s).") == []
    assert lock_holders("error: some other failure") == []


def _gone_pid() -> int:
    finished = subprocess.Popen(["true"])
    finished.wait()
    return finished.pid


def test_only_a_gone_local_owner_is_provably_gone() -> None:
    here = socket.gethostname()
    gone_pid = _gone_pid()
    now = datetime.now(UTC).isoformat()  # taken after this process started: not a reused pid
    text = (
        f"  x: created by u@{here} (pid {gone_pid}) at 2026-12-01T10:00:00Z\n"
        f"  y: created by u@{here} (pid {os.getpid()}) at {now}\n"
        "  z: created by u@elsewhere.example (pid 1) at 2020-01-01T00:00:00Z\n"
    )
    gone, alive, remote = lock_holders(text)
    assert not gone.owner_alive and gone.local
    assert alive.owner_alive
    assert remote.owner_alive and not remote.local


STACK = "team.project-a"


def _creation_lock(backend: Path, *, pid: int, host: str) -> Path:
    """A lock as the engine writes one while it creates a stack (backend/diy/lock.go), with no stack."""
    folder = backend / ".pulumi" / "locks" / "organization" / "npa-fleet" / STACK
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{pid}-{host}.json"
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    path.write_text(json.dumps({"pid": pid, "username": "alice", "hostname": host, "timestamp": now}))
    return path


def test_a_killed_creators_lock_is_removed_and_a_live_ones_kept(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    here = socket.gethostname()
    dead = _creation_lock(tmp_path, pid=_gone_pid(), host=here)
    note = clear_creation_lock(url, "npa-fleet", STACK, "error: the stack is currently locked by 1 lock(s).")
    assert note.startswith("removed a stale lock left by pid") and "(that process is gone)" in note
    assert not dead.exists()

    # Another machine's run may still be creating it: named, kept, unless --break-lock.
    remote = _creation_lock(tmp_path, pid=4242, host="machine-a.example")
    with pytest.raises(StackLocked, match=r"pid 4242 on machine-a\.example.*--break-lock"):
        clear_creation_lock(url, "npa-fleet", STACK, "")
    assert remote.exists()
    note = clear_creation_lock(url, "npa-fleet", STACK, "", break_lock=True)
    assert note.startswith("broke the lock held by pid 4242 on machine-a.example")
    assert not remote.exists()

    # A live process of this machine keeps its lock even against --break-lock.
    live = _creation_lock(tmp_path, pid=os.getpid(), host=here)
    with pytest.raises(StackLocked, match="alive on this machine"):
        clear_creation_lock(url, "npa-fleet", STACK, "", break_lock=True)
    assert live.exists()


def test_a_backend_not_read_here_gets_the_objects_to_delete_named() -> None:
    gone = f"  gs://state/.pulumi/locks/x.json: created by u@{socket.gethostname()} (pid {_gone_pid()}) at "
    refusal = "error: the stack is currently locked by 1 lock(s).\n" + gone + "2026-12-01T10:00:00Z\n"
    with pytest.raises(StackLocked, match=r"may be removed.*delete gs://state/\S+x\.json and rerun"):
        clear_creation_lock("gs://state", "npa-fleet", STACK, refusal)
    with pytest.raises(StackLocked, match="the engine says it is locked"):
        clear_creation_lock(
            "gs://state", "npa-fleet", STACK, "error: the stack is currently locked by 1 lock(s)."
        )
