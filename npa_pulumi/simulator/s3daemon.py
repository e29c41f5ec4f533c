"""Starting, finding and stopping the local cloud's S3 server, one per cloud directory: SeaweedFS (`weed
server -s3`, run by seaweedd.py) where the setting `seaweedfs_s3` is 1 (or $NPA_LOCAL_CLOUD_SEAWEEDFS_S3
says so), else the home-made server (s3wire.py), kept as the fallback while the migration is partial.

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
from npa_pulumi.simulator import db

START_TIMEOUT_S = 90.0  # SeaweedFS answers S3 in about 10 s on an idle machine; CI's is not idle
SEAWEEDFS = "seaweedfs"
SETTING = "seaweedfs_s3"  # admin.SETTINGS: 1 SeaweedFS, 0 the home-made server (the default for now)
ENV_SEAWEEDFS_S3 = "NPA_LOCAL_CLOUD_SEAWEEDFS_S3"  # overrides the setting
BUILTIN = "builtin"
_DAEMONS = {SEAWEEDFS: "npa_pulumi.simulator.seaweedd", BUILTIN: "npa_pulumi.simulator.s3wire"}
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
    server: str | None  # seaweedfs | builtin, while one runs
    pid: int | None
    port: int | None
    endpoint: str | None  # http://127.0.0.1:PORT once a port was chosen
    log: str

    def to_json(self) -> dict[str, object]:
        return {
            "running": self.running,
            "server": self.server,
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


def wanted_kind(cloud_dir: Path) -> str:
    """Which server this cloud's S3 is: $NPA_LOCAL_CLOUD_SEAWEEDFS_S3 (1/0), else the `seaweedfs_s3`
    setting."""
    env = os.environ.get(ENV_SEAWEEDFS_S3, "").strip().lower()
    if env:
        return BUILTIN if env in ("0", "false", "no", "off") else SEAWEEDFS
    path = db.db_path(cloud_dir)
    if not path.is_file():
        return BUILTIN
    conn = db.connect(path)
    try:
        chosen = float(db.get_meta(conn, SETTING) or 0)
    except Exception:  # a database being reset: the default
        return BUILTIN
    finally:
        conn.close()
    return SEAWEEDFS if chosen else BUILTIN


def running_kind(cloud_dir: Path) -> str | None:
    """The server that runs for this cloud (`seaweedfs` or `builtin`), None when none does."""
    if not is_running(cloud_dir):
        return None
    try:
        kind = (s3_dir(cloud_dir) / "kind").read_text().strip()
    except OSError:
        return BUILTIN
    return kind if kind in _DAEMONS else BUILTIN


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
        running_kind(cloud_dir),
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


def _spawn(cloud_dir: Path, port: int | None, kind: str) -> None:
    args = ["--cloud-dir", str(cloud_dir), *(["--port", str(port)] if port else [])]
    write_atomically(s3_dir(cloud_dir) / "kind", f"{kind}\n")
    spawn_python_daemon(_DAEMONS[kind], args, s3_dir(cloud_dir) / "server.log")


def ensure_running(cloud_dir: Path, *, port: int | None = None, timeout_s: float = START_TIMEOUT_S) -> str:
    """The cloud's S3 endpoint, its server started if none runs (on the recorded port, else `port`, else
    a free one); waits until it listens (bounded). Serialised per cloud, so two callers start one server."""
    home = s3_dir(cloud_dir)
    kind = wanted_kind(cloud_dir)
    if running_kind(cloud_dir) == kind and (home / "ready").exists():
        found = recorded_port(cloud_dir)
        if found is not None and (port is None or port == found):
            return endpoint_of(found)
    with FileLock(home / "start.lock", timeout_s=timeout_s):
        if is_running(cloud_dir) and port is not None and port != recorded_port(cloud_dir):
            stop(cloud_dir)  # asked for another port: the one recorded changes
        if running_kind(cloud_dir) not in (None, kind):
            stop(cloud_dir)  # the other server: the setting changed (the port stays)
        if not is_running(cloud_dir):
            (home / "ready").unlink(missing_ok=True)
            (home / "failed").unlink(missing_ok=True)
            if port is not None:
                write_atomically(home / "port", f"{port}\n")
            _spawn(cloud_dir, port, kind)
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


def stop(cloud_dir: Path, timeout_s: float = 20.0) -> bool:
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
