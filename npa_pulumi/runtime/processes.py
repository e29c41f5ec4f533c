"""Whether a process is still there: the one liveness check, and the /proc facts it and the watchdog use.

Prefer a lock the kernel releases (`runtime.locks`) where the record's writer can hold one; this check is
for records whose format is not ours, such as the Pulumi engine's own stack lock files. A record names a
pid, a host and when it was written. Its writer is taken to be gone when, on this host:

* no process has that pid (ESRCH);
* the process is a zombie: it exited but nothing reaped it (in a container whose init does not reap, it
  stays one forever), and `kill(pid, 0)` still succeeds on it;
* the process started after the record was written: the pid was reused by another program.

A record of ours also names the process's start in clock ticks since boot (`start_ticks`): the kernel's
own identity of that process, compared exactly. A wall-clock time is compared with a slack, and only
where the record has no ticks (the engine's own lock files): a VM's wall clock can step away from its
boot clock (a paused or migrated VM, NTP), which moves every start time derived from /proc/stat's btime.

A record from another host is assumed live: nothing here can tell.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

# Only light standard modules at import (datetime and socket where they are used; not pathlib, not typing):
# the engine starts a policy relay (runtime/analyzer_relay.py) per stack operation, and it imports this.

# A SIGKILLed process, or one that dropped its lock on the way out, is gone a moment later, not at once.
EXIT_WAIT_S = 5.0

# /proc/<pid>/stat's starttime is in clock ticks since boot; /proc/stat's btime is in whole seconds, so a
# start time read this way may be off by up to a second.
_START_TIME_SLACK_S = 2.0


def stat_fields(pid: int) -> list[str] | None:
    """The fields of `/proc/<pid>/stat` after "pid (comm)": state, ppid, ...; None without the process
    or without procfs."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as file:
            stat = file.read()
    except OSError:
        return None
    # comm may contain spaces and parentheses, so split after the last ")".
    return stat.rsplit(")", 1)[-1].split()


def parent_pid(pid: int) -> int | None:
    fields = stat_fields(pid)
    return int(fields[1]) if fields and len(fields) > 1 else None


def run_is_gone(parent: int, grandparent: int | None) -> bool:
    """Whether the run that started this process is over: this process was reparented (its `parent`, the
    plugin launcher, is gone), or that launcher was (its `grandparent`, the engine, is gone)."""
    if os.getppid() != parent:
        return True
    return grandparent is not None and parent_pid(parent) not in (grandparent, None)


def is_zombie(pid: int) -> bool:
    """Whether the process has exited but was not reaped. False without procfs (macOS)."""
    fields = stat_fields(pid)
    return fields is not None and len(fields) > 0 and fields[0] in ("Z", "X")


def _boot_time() -> float | None:
    try:
        with open("/proc/stat", encoding="utf-8") as file:
            lines = file.read().splitlines()
        for line in lines:
            if line.startswith("btime "):
                return float(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def start_ticks(pid: int) -> int | None:
    """When the process started, in clock ticks since boot (/proc/<pid>/stat's starttime): fixed for the
    life of the process and independent of the wall clock; None without the process or without procfs."""
    fields = stat_fields(pid)
    if fields is None or len(fields) < 20:
        return None
    try:
        return int(fields[19])  # field 22 of the whole line: starttime
    except ValueError:
        return None


def start_time(pid: int) -> float | None:
    """When the process started (seconds since the epoch); None without the process or without procfs."""
    fields = stat_fields(pid)
    boot = _boot_time()
    if fields is None or boot is None or len(fields) < 20:
        return None
    try:
        ticks = int(fields[19])  # field 22 of the whole line: starttime
    except ValueError:
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def parse_timestamp(text: str) -> float | None:
    """An ISO-8601 / RFC 3339 time as seconds since the epoch (Go's nanoseconds are truncated); None when
    it cannot be read. A time without a zone is taken as local time."""
    text = text.strip()
    if not text:
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def process_alive(
    pid: int, *, hostname: str | None = None, since: float | None = None, ticks: int | None = None
) -> bool:
    """Whether the process that wrote a record (`pid` on `hostname`, at `since` seconds since the epoch,
    or started at `ticks` since boot) still runs; see the module docstring. `hostname` None means this
    host; `since` and `ticks` None skip the pid reuse check; `ticks` wins over `since`."""
    if hostname is not None:
        import socket

        if hostname != socket.gethostname():
            return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    if is_zombie(pid):
        return False
    if ticks is not None:
        now_ticks = start_ticks(pid)
        return now_ticks is None or now_ticks == ticks
    if since is not None:
        started = start_time(pid)
        if started is not None and started > since + _START_TIME_SLACK_S:
            return False
    return True


def wait_while(condition: Callable[[], bool], timeout_s: float, interval_s: float = 0.05) -> bool:
    """Poll `condition` until it is false or `timeout_s` has passed; whether it became false. For a
    process being stopped: `wait_while(lambda: process_alive(pid), EXIT_WAIT_S)`."""
    deadline = time.monotonic() + timeout_s
    while condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)
    return True
