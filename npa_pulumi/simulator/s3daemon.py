"""Starting, finding and stopping the local cloud's S3 server (s3wire.py), one per cloud directory.

Like a cluster's agent (kube/lifecycle.py), the server is started detached, in its own session, with no
inherited pipes and no secrets in its environment, holds `s3/server.lock` for its life (so "running" is
"the lock is held", whatever happened to it), and stops on `local-cloud reset`, on `stop`, or by itself when
the cloud's database is gone. Its port is chosen once and recorded in `s3/port`: a restarted (or killed and
replaced) server listens on the same port, so the backend URL `backend init` printed stays valid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from npa_pulumi.errors import NpaError
from npa_pulumi.runtime.daemons import spawn_python_daemon
from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.locks import FileLock, held_elsewhere

START_TIMEOUT_S = 30.0
# Nothing secret reaches the long-lived server: it derives the keys' secrets from the cloud's master key.
_LOCAL_HOSTS = ("127.0.0.1", "localhost")


def s3_dir(cloud_dir: Path) -> Path:
    """The server's files: server.lock (held while it runs), server.pid, port, ready/failed, server.log."""
    return cloud_dir / "s3"


class S3ServerError(NpaError):
    """The local cloud's S3 server could not be started."""

    kind = "local-s3-server"


@dataclass(frozen=True)
class S3ServerStatus:
    running: bool
    pid: int | None
    port: int | None
    endpoint: str | None  # http://127.0.0.1:PORT once a port was chosen
    log: str

    def to_json(self) -> dict[str, object]:
        return {
            "running": self.running,
            "pid": self.pid,
            "port": self.port,
            "endpoint": self.endpoint,
            "log": self.log,
        }


def recorded_port(cloud_dir: Path) -> int | None:
    try:
        port = int((s3_dir(cloud_dir) / "port").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return port if 0 < port < 65536 else None


def endpoint_of(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def is_running(cloud_dir: Path) -> bool:
    return held_elsewhere(s3_dir(cloud_dir) / "server.lock")


def _pid(cloud_dir: Path) -> int | None:
    try:
        return int((s3_dir(cloud_dir) / "server.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def status(cloud_dir: Path) -> S3ServerStatus:
    running = is_running(cloud_dir)
    port = recorded_port(cloud_dir)
    return S3ServerStatus(
        running,
        _pid(cloud_dir) if running else None,
        port,
        endpoint_of(port) if port else None,
        str(s3_dir(cloud_dir) / "server.log"),
    )


def serves(cloud_dir: Path, endpoint: str) -> bool:
    """Whether `endpoint` (a backend URL's `endpoint=`) is this cloud's S3 endpoint."""
    port = recorded_port(cloud_dir)
    if port is None:
        return False
    parsed = urllib.parse.urlsplit(endpoint if "://" in endpoint else "http://" + endpoint)
    return parsed.scheme == "http" and parsed.hostname in _LOCAL_HOSTS and parsed.port == port


def _spawn(cloud_dir: Path, port: int | None) -> None:
    args = ["--cloud-dir", str(cloud_dir), *(["--port", str(port)] if port else [])]
    spawn_python_daemon("npa_pulumi.simulator.s3wire", args, s3_dir(cloud_dir) / "server.log")


def ensure_running(cloud_dir: Path, *, port: int | None = None, timeout_s: float = START_TIMEOUT_S) -> str:
    """The cloud's S3 endpoint, its server started if none runs (on the recorded port, else `port`, else
    a free one); waits until it listens (bounded). Serialised per cloud, so two callers start one server."""
    home = s3_dir(cloud_dir)
    if is_running(cloud_dir) and (home / "ready").exists():
        found = recorded_port(cloud_dir)
        if found is not None and (port is None or port == found):
            return endpoint_of(found)
    with FileLock(home / "start.lock", timeout_s=timeout_s):
        if is_running(cloud_dir) and port is not None and port != recorded_port(cloud_dir):
            stop(cloud_dir)  # asked for another port: the one recorded changes
        if not is_running(cloud_dir):
            (home / "ready").unlink(missing_ok=True)
            (home / "failed").unlink(missing_ok=True)
            if port is not None:
                write_atomically(home / "port", f"{port}\n")
            _spawn(cloud_dir, port)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            failed = home / "failed"
            if failed.exists():
                raise S3ServerError(
                    f"the local cloud's S3 server did not start: {failed.read_text().strip()} "
                    f"(log: {home / 'server.log'})"
                )
            found = recorded_port(cloud_dir)
            if (home / "ready").exists() and is_running(cloud_dir) and found is not None:
                return endpoint_of(found)
            time.sleep(0.05)
    raise S3ServerError(
        f"the local cloud's S3 server did not start within {timeout_s:g}s (log: {home / 'server.log'})"
    )


def stop(cloud_dir: Path, timeout_s: float = 10.0) -> bool:
    """Stop the cloud's S3 server (its port stays recorded); False when none ran."""
    home = s3_dir(cloud_dir)
    if not is_running(cloud_dir):
        (home / "ready").unlink(missing_ok=True)
        return False
    pid = _pid(cloud_dir)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and is_running(cloud_dir):
            time.sleep(0.05)
        if is_running(cloud_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline and is_running(cloud_dir):
                time.sleep(0.05)
    (home / "ready").unlink(missing_ok=True)
    return True
