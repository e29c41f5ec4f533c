"""The one file-lock helper (runtime.locks): exclusive between open files, also within one process; free
again the moment its holder process dies, even by SIGKILL; waits boundedly when asked to."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npa_pulumi.runtime.locks import FileLock, held_elsewhere

HOLDER = """
import sys, time
from pathlib import Path
from npa_pulumi.runtime.locks import FileLock
lock = FileLock(Path(sys.argv[1]))
lock.acquire()
lock.write("held by a child\\n")
print("locked", flush=True)
time.sleep(600)
"""


def test_two_locks_of_one_path_exclude_each_other(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "a.lock"
    first, second = FileLock(path), FileLock(path)
    assert not held_elsewhere(path)  # no file yet
    with first:
        assert first.held and path.exists()
        assert held_elsewhere(path)
        assert not second.acquire(blocking=False)
        assert not second.held
    assert not held_elsewhere(path)
    assert second.acquire(blocking=False)
    second.release()


def test_a_bounded_wait_gives_up(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"
    with FileLock(path):
        started = time.monotonic()
        assert not FileLock(path).acquire(timeout_s=0.3)
        assert time.monotonic() - started >= 0.25  # it waited (a lower bound: load only lengthens it)
        with pytest.raises(TimeoutError), FileLock(path, timeout_s=0.1):
            pass


def test_write_replaces_the_content(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    with FileLock(path) as lock:
        lock.write("a much longer first text\n")
        lock.write("short\n")
        assert path.read_text() == "short\n"
    with pytest.raises(RuntimeError):
        lock.write("not held")


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    path = tmp_path / "held.lock"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        assert held_elsewhere(path)
        assert not FileLock(path).acquire(blocking=False)
        assert path.read_text() == "held by a child\n"
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert not held_elsewhere(path)
    lock = FileLock(path)
    assert lock.acquire(blocking=False)
    lock.release()


def test_a_waiting_lock_gets_it_when_the_holder_releases(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "a.lock"
    holder = FileLock(path)
    holder.acquire()
    got: list[float] = []

    def wait() -> None:
        with FileLock(path):
            got.append(time.monotonic())

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.2)
    assert got == []
    released = time.monotonic()
    holder.release()
    thread.join(timeout=10)
    assert got and got[0] >= released
