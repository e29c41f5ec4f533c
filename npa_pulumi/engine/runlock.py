"""One mutating run per stack at a time, decided before anything starts.

Pulumi locks each stack only while its own update runs. Two `up` runs of one fleet would otherwise
interleave: each takes whichever stack it reaches first, and each fails on the stacks the other holds, so
neither finishes. A run therefore registers the stacks it selected (`<backend>/.npa-runs/<fleet>/<id>.json`
on a file:// backend, under `~/.npa-pulumi/runs/` otherwise) before its first step, under a short
exclusive lock on the registry. A run whose selection overlaps a live run's fails at once with the same
message a locked stack gives (who holds it, since when), having changed nothing; disjoint selections of
one fleet still run side by side.

A run holds a file lock on its own record for as long as it runs (`runtime.locks`): the kernel releases it
when the run's process ends, however it ends, so a record whose lock is free was left by a killed run and
is removed; no pid is trusted for that. A record of another host is taken as live (its lock is not
visible from here on every filesystem), and so is one that a version of npa-pulumi without record locks
wrote while its process still runs (`runtime.processes`).
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from npa_pulumi.engine.automation import StackLocked, file_backend_root
from npa_pulumi.runtime.home import npa_home
from npa_pulumi.runtime.locks import FileLock, held_elsewhere
from npa_pulumi.runtime.processes import parse_timestamp, process_alive, start_ticks

log = logging.getLogger(__name__)

RECORD_LOCKED = "flock"  # the `lock` field of a record whose run holds a file lock on it


@dataclass(frozen=True)
class RunRecord:
    path: Path
    pid: int
    hostname: str
    username: str
    timestamp: str
    command: str
    stacks: frozenset[str]
    locked: bool = True
    ticks: int | None = None  # the writer's start in clock ticks since boot (exact; see runtime.processes)

    @property
    def alive(self) -> bool:
        if self.hostname != socket.gethostname():
            return True  # another machine's run: assume it is real
        if self.locked:
            return held_elsewhere(self.path)
        return process_alive(self.pid, since=parse_timestamp(self.timestamp), ticks=self.ticks)


def registry_dir(backend_url: str, fleet: str) -> Path:
    root = file_backend_root(backend_url)
    if root is not None:
        return root / ".npa-runs" / fleet
    digest = hashlib.sha256(backend_url.encode()).hexdigest()[:16]
    return npa_home() / "runs" / digest / fleet


def read_run_record(path: Path) -> RunRecord | None:
    try:
        data = json.loads(path.read_text())
        return RunRecord(
            path,
            int(data["pid"]),
            str(data.get("hostname", "")),
            str(data.get("username", "")),
            str(data.get("timestamp", "")),
            str(data.get("command", "")),
            frozenset(str(s) for s in data.get("stacks", [])),
            data.get("lock") == RECORD_LOCKED,
            ticks if isinstance(ticks := data.get("start_ticks"), int) else None,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


@contextlib.contextmanager
def exclusive_run(
    backend_url: str, fleet: str, command: str, stacks: Iterable[str], break_lock: bool = False
) -> Iterator[list[str]]:
    """Hold the selected stacks for this run; yields notes about stale records it removed. With
    `break_lock`, an overlapping record of another host is removed too (never a live run of this host)."""
    wanted = frozenset(stacks)
    directory = registry_dir(backend_url, fleet)
    notes: list[str] = []
    mine = FileLock(directory / f"{uuid.uuid4().hex}.json")
    with FileLock(directory / ".lock"):
        for path in sorted(directory.glob("*.json")):
            record = read_run_record(path)
            if record is None:
                continue
            if not record.alive:
                path.unlink(missing_ok=True)
                notes.append(
                    f"removed the record of an interrupted run (pid {record.pid}, {record.timestamp})"
                )
                continue
            overlap = sorted(record.stacks & wanted)
            if overlap and break_lock and record.hostname != socket.gethostname():
                path.unlink(missing_ok=True)
                notes.append(
                    f"--break-lock: removed the record of a run on {record.hostname} (pid {record.pid}, "
                    f"user {record.username}, since {record.timestamp})"
                )
                continue
            if overlap:
                more = f" and {len(overlap) - 1} more" if len(overlap) > 1 else ""
                raise StackLocked(
                    f"stack {overlap[0]}{more} is being changed by another run (pid {record.pid} on "
                    f"{record.hostname}, user {record.username}, since {record.timestamp}, "
                    f"`npa-pulumi {record.command}`); wait for it to finish. Nothing was changed. If that "
                    f"run is gone, remove {record.path}"
                )
        body = {
            "pid": os.getpid(),
            "start_ticks": start_ticks(os.getpid()),
            "hostname": socket.gethostname(),
            "username": _user(),
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": command,
            "stacks": sorted(wanted),
            "lock": RECORD_LOCKED,
        }
        # Created, locked and written under the registry lock: no other run sees it unlocked or empty.
        mine.acquire()
        mine.write(json.dumps(body, indent=2) + "\n")
    try:
        yield notes
    finally:
        mine.path.unlink(missing_ok=True)
        mine.release()


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return str(os.getuid())
