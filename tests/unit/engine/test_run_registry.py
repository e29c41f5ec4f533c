"""One mutating run per stack (engine.runlock): an overlapping live run is refused before anything starts,
a disjoint one is not, and the record of a killed run (its file lock released by the kernel) is removed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from npa_pulumi.engine.automation import StackLocked
from npa_pulumi.engine.runlock import exclusive_run, registry_dir

REPO = Path(__file__).resolve().parents[3]
HOLDER = """
import sys, time
from npa_pulumi.engine.runlock import exclusive_run
with exclusive_run(sys.argv[1], "fleet", "up", ["fleet.a", "fleet.a.c1"]):
    print("running", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def backend(tmp_path: Path) -> str:
    return f"file://{tmp_path / 'state'}"


def test_overlapping_runs_are_refused_and_disjoint_ones_run(backend: str) -> None:
    with exclusive_run(backend, "fleet", "up", ["fleet.a", "fleet.a.c1"]) as notes:
        assert notes == []
        records = list(registry_dir(backend, "fleet").glob("*.json"))
        assert len(records) == 1
        record = json.loads(records[0].read_text())
        assert record["pid"] == os.getpid() and record["lock"] == "flock"
        refused = pytest.raises(StackLocked, match=r"stack fleet\.a\.c1 is being changed by another run")
        with refused, exclusive_run(backend, "fleet", "destroy", ["fleet.a.c1"]):
            pass
        with exclusive_run(backend, "fleet", "up", ["fleet.b", "fleet.b.c1"]):
            assert len(list(registry_dir(backend, "fleet").glob("*.json"))) == 2
    assert list(registry_dir(backend, "fleet").glob("*.json")) == []


def test_the_record_of_a_killed_run_is_removed(backend: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, backend], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "running"
        with (
            pytest.raises(StackLocked, match=f"pid {holder.pid}"),
            exclusive_run(backend, "fleet", "up", ["fleet.a.c1"]),
        ):
            pass
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    with exclusive_run(backend, "fleet", "up", ["fleet.a.c1"]) as notes:
        assert len(notes) == 1 and f"pid {holder.pid}" in notes[0]


def _legacy_record(backend: str, pid: int, hostname: str) -> Path:
    """A record as versions without record locks wrote it: pid and time only."""
    directory = registry_dir(backend, "fleet")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "legacy.json"
    body = {"pid": pid, "hostname": hostname, "timestamp": "2000-01-01T00:00:00+0000", "stacks": ["fleet.a"]}
    path.write_text(json.dumps(body))
    return path


def test_records_without_a_lock_fall_back_to_the_liveness_check(backend: str) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    dead_pid = int(gone.stdout)
    path = _legacy_record(backend, dead_pid, socket.gethostname())
    with exclusive_run(backend, "fleet", "up", ["fleet.a"]) as notes:
        assert len(notes) == 1 and not path.exists()
    _legacy_record(backend, 1, "another-host.example")  # another host's run: assumed live
    with pytest.raises(StackLocked), exclusive_run(backend, "fleet", "up", ["fleet.a"]):
        pass
