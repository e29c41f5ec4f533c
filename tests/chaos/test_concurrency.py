"""Concurrency: two `up` runs of one fleet at once. One proceeds and finishes; the other fails with a clear
lock message naming the first run's process, having changed nothing; the state stays consistent.

Checked while the first run updates its project stack and again while it updates cluster stacks, plus
the lock a stack itself holds (a run from outside the fleet's registry, e.g. a plain `pulumi up`)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

from chaos_helpers import (
    Background,
    FleetShape,
    assert_converged,
    assert_no_leaks,
    backend_root,
    lock_files,
    npa,
    secret_values,
)

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: rivals
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
projects:
  - project_id: project-existing1
    clusters:
      - name: r1
      - name: r2
      - name: r3
        cpu_nodes: {count: CPU}
"""
UP = ("up", "--yes", "-j", "3", "--output", "json", "--spec")
LOCKED = re.compile(r"is being changed by another run \(pid (\d+) on ")


def _wait_for_lock(run: Background, stack_suffix: str, timeout: float = 240) -> str:
    """Wait until the first run holds the engine lock of a stack whose name ends with `stack_suffix`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in lock_files():
            if path.parent.name.endswith(stack_suffix):
                return path.parent.name
        assert run.proc.poll() is None, f"the first run ended before locking *{stack_suffix}:\n{run.stderr()}"
        time.sleep(0.05)
    raise AssertionError(f"no lock on *{stack_suffix} within {timeout}s:\n{run.stderr()[-3000:]}")


def _second_fails_cleanly(spec: Path, first: Background) -> None:
    second = npa("up", "--spec", str(spec), "--yes", "-j", "3", "--output", "json")
    assert second.code == 1, second.why()
    found = LOCKED.search(second.stdout + second.stderr)
    assert found, f"no lock message:\n{second.why()}"
    assert int(found.group(1)) == first.proc.pid, (
        f"the message names pid {found.group(1)}, not {first.proc.pid}"
    )
    assert "Nothing was changed" in second.stdout + second.stderr
    assert "Traceback" not in second.stderr


def test_two_ups_of_one_fleet(chaos_home: Path, tmp_path: Path) -> None:
    npa("local-cloud", "set", "provisioning-seconds", "2", check=True)
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC.replace("CPU", "1"))
    shape = FleetShape.of(spec.read_text())

    # 1. while the first run creates the project stack
    first = Background.start(
        tmp_path / "runs", "up", "--spec", str(spec), "--yes", "-j", "3", "--output", "json"
    )
    _wait_for_lock(first, "rivals.project-existing1")
    _second_fails_cleanly(spec, first)
    assert first.wait() == 0, first.stderr()[-3000:]
    assert_converged(shape, "after the first pair of runs")

    # 2. while the first run updates cluster stacks (r3 grows a node: upstream resizes its node group in
    # place, which the cloud answers slowly here so that the second run meets the first one's lock)
    spec.write_text(SPEC.replace("CPU", "2"))
    shape = FleetShape.of(spec.read_text())
    slow = ["--op", "resize_node_group", "--latency-ms", "30000", "--count", "1"]
    npa("local-cloud", "fault", "add", *slow, check=True)
    first = Background.start(
        tmp_path / "runs", "up", "--spec", str(spec), "--yes", "-j", "3", "--output", "json"
    )
    _wait_for_lock(first, ".r3")
    _second_fails_cleanly(spec, first)
    assert first.wait() == 0, first.stderr()[-3000:]
    assert_converged(shape, "after the second pair of runs")

    # Nothing is left to do, and nothing was done twice.
    again = npa("up", "--spec", str(spec), "--yes", "--output", "json", check=True)
    assert {s["status"] for s in again.json()["stacks"]} == {"unchanged"}
    assert_no_leaks(chaos_home, secret_values(shape))


def test_a_stack_locked_outside_the_fleet_is_reported_with_its_holder(
    chaos_home: Path, tmp_path: Path
) -> None:
    """The engine's own per-stack lock, held by a process that is not an npa-pulumi run of this fleet (a
    plain `pulumi up`, another tool): that stack fails naming the holder and the exact command to clear
    the lock; the other stacks proceed. Once the holder is gone the lock is stale and is recovered."""
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC.replace("CPU", "1"))
    npa("up", "--spec", str(spec), "--yes", "-j", "3", "--output", "json", check=True)
    r2 = "rivals.project-existing1.r2"
    lock_dir = backend_root() / ".pulumi" / "locks" / "organization" / "npa-fleet" / r2
    lock_dir.mkdir(parents=True, exist_ok=True)  # the engine leaves the empty directory of a past lock
    sleeper = subprocess.Popen(["sleep", "300"])  # a live holder that is not a run of this fleet
    holder = {
        "pid": sleeper.pid,
        "username": "someone",
        "hostname": socket.gethostname(),
        # Taken now, as a live holder's lock is: one older than its process would be a reused pid's.
        "timestamp": datetime.now(UTC).isoformat(),
    }
    try:
        (lock_dir / "manual.json").write_text(json.dumps(holder))
        result = npa("up", "--spec", str(spec), "--yes", "-j", "3", "--refresh", "--output", "json")
        assert result.code == 1, result.why()
        stacks = {s["stack"]: s for s in result.json()["stacks"]}
        assert stacks[r2]["status"] == "failed"
        named = f"is being changed by another run (pid {sleeper.pid} on {socket.gethostname()}"
        assert named in stacks[r2]["error"], stacks[r2]
        assert f"pulumi cancel --stack {r2} --yes" in stacks[r2]["error"]
        others = {s: v["status"] for s, v in stacks.items() if s != r2}
        assert set(others.values()) == {"unchanged"}, others
    finally:
        sleeper.kill()
        sleeper.wait()
    result = npa("up", "--spec", str(spec), "--yes", "-j", "3", "--refresh", "--output", "json")
    assert result.code == 0, result.why()
    assert f"{r2}: recovered from an interrupted run" in result.stderr
    assert not (lock_dir / "manual.json").exists()
    assert_converged(FleetShape.of(spec.read_text()), "after the stale lock")
