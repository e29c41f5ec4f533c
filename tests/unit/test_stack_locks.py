"""Whether a lock's owner is alive: a running process is, an exited one is not, and neither is a zombie
(a killed engine nobody reaped still answers kill(pid, 0))."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npa_pulumi.engine.stacks import LockInfo


def _lock(pid: int, hostname: str | None = None) -> LockInfo:
    return LockInfo(Path("lock.json"), pid, hostname or socket.gethostname(), "user", "2026-11-29T00:00:00Z")


def _wait_for_state(pid: int, state: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat[stat.rfind(")") + 2] == state:
            return
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} never reached state {state}")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs procfs to observe a zombie")
def test_running_exited_and_zombie_owners() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert _lock(child.pid).owner_alive
        assert child.stdin is not None
        child.stdin.close()  # the child exits; unreaped, it is a zombie
        _wait_for_state(child.pid, "Z")
        assert not _lock(child.pid).owner_alive
    finally:
        child.wait()
    assert not _lock(child.pid).owner_alive  # reaped: no such process


def test_owner_on_another_host_is_assumed_alive() -> None:
    assert _lock(1, hostname="some-other-host.example").owner_alive
