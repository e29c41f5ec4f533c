"""The one liveness check (runtime.processes): a running process is alive; an exited one, a zombie (a killed
engine nobody reaped still answers kill(pid, 0)) and a pid reused by a later process are not; another
host's process is assumed alive. The Pulumi lock owner check (diy_backend.LockInfo) is this check."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from npa_pulumi.engine.automation.diy_backend import LockInfo
from npa_pulumi.runtime.processes import (
    is_zombie,
    parent_pid,
    parse_timestamp,
    process_alive,
    start_time,
)


def _wait_for_state(pid: int, state: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat[stat.rfind(")") + 2] == state:
            return
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} never reached state {state}")


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    """A child that runs until its stdin closes; always closed and reaped at the end."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        yield proc
    finally:
        if proc.stdin is not None and not proc.stdin.closed:
            proc.stdin.close()
        proc.wait(timeout=30)


def _lock(pid: int, timestamp: str, hostname: str | None = None) -> LockInfo:
    return LockInfo("lock.json", pid, hostname or socket.gethostname(), "user", timestamp)


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat()


def test_procfs_is_there() -> None:
    # Zombie and pid-reuse detection read /proc; on a machine without it they would silently say "alive".
    assert Path("/proc/self/stat").exists()
    assert parent_pid(os.getpid()) == os.getppid()


def test_running_exited_and_zombie_processes(child: subprocess.Popen[bytes]) -> None:
    assert process_alive(child.pid) and not is_zombie(child.pid)
    assert child.stdin is not None
    child.stdin.close()  # the child exits; unreaped, it is a zombie
    _wait_for_state(child.pid, "Z")
    assert is_zombie(child.pid)
    assert not process_alive(child.pid)
    child.wait()
    assert not process_alive(child.pid)  # reaped: no such process


def test_a_pid_reused_after_the_record_was_written_is_not_the_writer(
    child: subprocess.Popen[bytes],
) -> None:
    started = start_time(child.pid)
    assert started is not None and abs(started - time.time()) < 60
    assert process_alive(child.pid, since=time.time())  # written after the process started: it is its writer
    assert not process_alive(child.pid, since=time.time() - 3600)  # written an hour before it started


def test_another_hosts_process_is_assumed_alive() -> None:
    assert process_alive(1, hostname="some-other-host.example")
    assert process_alive(2**22 + 12345, hostname="some-other-host.example", since=0.0)


def test_impossible_pids_are_not_alive() -> None:
    assert not process_alive(0)
    assert not process_alive(-1)


def test_timestamps_of_records() -> None:
    # Pulumi's lock files (Go RFC 3339 with nanoseconds and a zone) and the run registry's records.
    assert parse_timestamp("2026-11-29T10:00:00.123456789+01:00") == pytest.approx(
        datetime(2026, 11, 29, 9, 0, 0, 123456, tzinfo=UTC).timestamp()
    )
    assert parse_timestamp("2026-11-29T10:00:00+0000") == datetime(2026, 11, 29, 10, tzinfo=UTC).timestamp()
    assert parse_timestamp("2026-11-29T00:00:00Z") == datetime(2026, 11, 29, tzinfo=UTC).timestamp()
    assert parse_timestamp("") is None
    assert parse_timestamp("yesterday") is None


def test_pulumi_lock_owner_liveness_uses_the_one_check(child: subprocess.Popen[bytes]) -> None:
    now = _iso(time.time())
    assert _lock(child.pid, now).owner_alive
    assert not _lock(child.pid, _iso(time.time() - 3600)).owner_alive  # the pid was reused since
    assert _lock(child.pid, "not a time").owner_alive  # unreadable time: the pid alone decides
    assert _lock(1, now, hostname="some-other-host.example").owner_alive
    assert child.stdin is not None
    child.stdin.close()
    _wait_for_state(child.pid, "Z")
    assert not _lock(child.pid, now).owner_alive
