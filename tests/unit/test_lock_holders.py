"""Who holds a stack's engine lock, read from the engine's refusal (any DIY backend, s3:// included)."""

from __future__ import annotations

import os
import socket
import subprocess
from datetime import UTC, datetime

from npa_pulumi.engine.automation.stacks import lock_holders

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


def test_no_holders_in_other_errors() -> None:
    assert lock_holders("error: the stack is currently locked by 1 lock(s).") == []
    assert lock_holders("error: some other failure") == []


def test_only_a_gone_local_owner_is_provably_gone() -> None:
    here = socket.gethostname()
    finished = subprocess.Popen(["true"])
    finished.wait()
    now = datetime.now(UTC).isoformat()  # taken after this process started: not a reused pid
    text = (
        f"  x: created by u@{here} (pid {finished.pid}) at 2026-12-01T10:00:00Z\n"
        f"  y: created by u@{here} (pid {os.getpid()}) at {now}\n"
        "  z: created by u@elsewhere.example (pid 1) at 2020-01-01T00:00:00Z\n"
    )
    gone, alive, remote = lock_holders(text)
    assert gone.provably_gone and gone.local
    assert not alive.provably_gone
    assert not remote.provably_gone and not remote.local
