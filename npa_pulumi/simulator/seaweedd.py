"""The local cloud's S3 server, SeaweedFS: starting, finding and stopping it (one per cloud directory), and
the daemon that runs `weed server -s3` for it.

    python -m npa_pulumi.simulator.seaweedd --cloud-dir DIR [--port N]

Like a cluster's agent (kube/lifecycle.py), the daemon is started detached, in its own session, with no
inherited pipes and no secrets in its environment (it derives the keys' secrets from the cloud's master key),
holds `s3/server.lock` for its life (so "running" is "the lock is held", whatever happened to it), and stops
on `local-cloud reset`, on `local-cloud s3 stop`, on SIGTERM, or by itself when the cloud's database is gone.
Its S3 port is chosen once and recorded in `s3/port`: a restarted (or killed and replaced) server listens on
the same port, so the backend URL `backend init` printed stays valid. It writes `ready` once S3 answers with
the cloud's buckets and keys in place (seaweed.py). `weed` is its child, on 127.0.0.1 only, with its data
under `s3/seaweedfs`; it is started with PR_SET_PDEATHSIG, so a daemon killed outright (SIGKILL) takes its
`weed` with it, and a new daemon first ends a `weed` a killed one left (`s3/endpoints.json` names its pid).

Why `weed server -s3` (master, volume server, filer and S3 gateway in one process) rather than `weed mini`
(which adds an admin UI and maintenance workers) or `weed s3` beside a separate filer: it is the lightest
arrangement that keeps S3's versioning and multipart uploads, which live in the filer.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from npa_pulumi.cloud.nebius.s3 import S3Client
from npa_pulumi.errors import NpaError
from npa_pulumi.runtime.daemons import daemon_env, spawn_python_daemon
from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.locks import FileLock
from npa_pulumi.runtime.processes import process_alive
from npa_pulumi.runtime.toolchain import find_weed
from npa_pulumi.simulator import db, seaweed
from npa_pulumi.simulator.seaweed import Desired, Endpoints, endpoint_of, recorded_port, s3_dir

SERVER = "seaweedfs"  # `local-cloud s3 status`'s `server`
ENSURE_TIMEOUT_S = 90.0  # SeaweedFS answers S3 in about 10 s on an idle machine; CI's is not idle
POLL_S = 0.5
START_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0
VOLUME_SIZE_LIMIT_MB = 64  # small volumes: a local cloud holds state files, not datasets
_LOCAL_HOSTS = ("127.0.0.1", "localhost")


# --------------------------------------------------------------- starting, finding and stopping the server


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
            "server": SERVER if self.running else None,
            "pid": self.pid,
            "port": self.port,
            "endpoint": self.endpoint,
            "log": self.log,
        }


def is_running(cloud_dir: Path) -> bool:
    return seaweed.daemon_running(cloud_dir)


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


def _older_server(cloud_dir: Path) -> bool:
    """A server of an older version (the home-made one) runs: ready, but no SeaweedFS endpoints."""
    home = s3_dir(cloud_dir)
    return is_running(cloud_dir) and (home / "ready").exists() and seaweed.endpoints(cloud_dir) is None


def ensure_running(cloud_dir: Path, *, port: int | None = None, timeout_s: float = ENSURE_TIMEOUT_S) -> str:
    """The cloud's S3 endpoint, its server started if none runs (on the recorded port, else `port`, else
    a free one); waits until it listens (bounded). Serialised per cloud, so two callers start one server."""
    home = s3_dir(cloud_dir)
    if seaweed.serving(cloud_dir):
        found = recorded_port(cloud_dir)
        if found is not None and (port is None or port == found):
            return endpoint_of(found)
    with FileLock(home / "start.lock", timeout_s=timeout_s):
        if is_running(cloud_dir) and port is not None and port != recorded_port(cloud_dir):
            stop(cloud_dir)  # asked for another port: the one recorded changes
        if _older_server(cloud_dir):
            stop(cloud_dir)  # the port stays
        if not is_running(cloud_dir):
            (home / "ready").unlink(missing_ok=True)
            (home / "failed").unlink(missing_ok=True)
            if port is not None:
                write_atomically(home / "port", f"{port}\n")
            args = ["--cloud-dir", str(cloud_dir), *(["--port", str(port)] if port else [])]
            spawn_python_daemon("npa_pulumi.simulator.seaweedd", args, home / "server.log")
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
    """Stop the cloud's S3 server, its `weed` with it (its port stays recorded); False when none ran."""
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


def forget_data(cloud_dir: Path) -> None:
    """Remove the stopped server's objects and what it applied (`local-cloud reset`); its ports stay."""
    if is_running(cloud_dir):
        return  # a server started again meanwhile owns them
    home = s3_dir(cloud_dir)
    shutil.rmtree(home / "seaweedfs", ignore_errors=True)
    for name in ("applied.json", "endpoints.json", "identities.json"):
        (home / name).unlink(missing_ok=True)


# ------------------------------------------------------------------------------------------- the daemon


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports on 127.0.0.1 (bound together, so none repeats)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def wait_free(port: int, timeout_s: float = 10.0) -> bool:
    """Whether `port` is free, waiting a little: a weed just ended may hold it a moment."""
    deadline = time.monotonic() + timeout_s
    while not port_free(port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def internal_ports(home: Path, s3_port: int) -> list[int]:
    """weed's seven other ports (master, volume server, filer, each with gRPC; S3's gRPC), chosen once and
    recorded in `ports.json`: the master keeps its state in a directory named by its port, and a master
    started on another port has a new cluster id, for which the volume server's data is another cluster's
    (SeaweedFS then freezes volume growth: no write succeeds)."""
    path = home / "ports.json"
    try:
        recorded = [int(p) for p in json.loads(path.read_text())]
        if len(recorded) == 7 and s3_port not in recorded:
            return recorded
    except (OSError, ValueError, TypeError):
        pass
    chosen = [p for p in free_ports(8) if p != s3_port][:7]
    write_atomically(path, json.dumps(chosen) + "\n")
    return chosen


def weed_command(weed: Path, home: Path, s3_port: int, ports: list[int], identities: Path) -> list[str]:
    master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3_grpc = ports
    return [
        str(weed),
        "-logtostderr=true",
        f"-config_dir={home / 'seaweedfs-config'}",
        "server",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-dir={home / 'seaweedfs'}",
        f"-master.port={master}",
        f"-master.port.grpc={master_grpc}",
        f"-master.volumeSizeLimitMB={VOLUME_SIZE_LIMIT_MB}",
        "-master.telemetry=false",
        f"-volume.port={volume}",
        f"-volume.port.grpc={volume_grpc}",
        "-volume.max=0",
        "-volume.preStopSeconds=0",  # no peers to tell: stop at once (its default waits 10 s)
        "-filer",
        f"-filer.port={filer}",
        f"-filer.port.grpc={filer_grpc}",
        "-s3",
        f"-s3.port={s3_port}",
        f"-s3.port.grpc={s3_grpc}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.config={identities}",
        "-s3.allowDeleteBucketNotEmpty=false",
        "-s3.autoCreateBucket=false",
        "-s3.iam=false",
    ]


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the daemon dies, however it dies (Linux PR_SET_PDEATHSIG)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


def end_left_over_weed(home: Path) -> None:
    """A `weed` a killed daemon left (its pid in endpoints.json, still running weed): ended first, so the
    new one gets the ports and the data directory."""
    where = seaweed.endpoints(home.parent)
    (home / "endpoints.json").unlink(missing_ok=True)
    if where is None or not process_alive(where.weed_pid):
        return
    try:
        cmdline = Path(f"/proc/{where.weed_pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return
    if not cmdline.endswith(b"weed"):
        return
    log(f"ending the weed (pid {where.weed_pid}) a stopped server left")
    with contextlib.suppress(ProcessLookupError):
        os.kill(where.weed_pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while process_alive(where.weed_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(where.weed_pid, signal.SIGKILL)


def _cloud_gone(cloud_dir: Path) -> bool:
    path = db.db_path(cloud_dir)
    try:
        return not db.is_initialised(path)
    except Exception:  # a database being reset or locked: not gone
        return not path.is_file()


def wait_until_serving(client: S3Client, child: subprocess.Popen[bytes], stopping: threading.Event) -> None:
    """Until the S3 gateway answers the admin identity (the filer behind it up), bounded."""
    deadline = time.monotonic() + START_TIMEOUT_S
    last = ""
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"weed exited ({child.returncode}) while starting")
        if stopping.is_set():
            raise RuntimeError("asked to stop while starting")
        try:
            answer = client.request("GET", "")
            if answer.status == 200:
                return
            last = answer.error_code() or f"HTTP {answer.status}"
        except OSError as err:
            last = str(err)
        time.sleep(0.2)
    raise RuntimeError(f"S3 did not answer within {START_TIMEOUT_S:g}s ({last})")


def wait_until_writable(where: Endpoints, stopping: threading.Event) -> None:
    """Until a file written through the filer lands on a volume (S3 answers before the volume server has
    reported to the master, when a write fails), bounded; the probe file is removed."""
    url = f"http://127.0.0.1:{where.filer_port}/.npa-local-cloud/ready-probe"
    deadline = time.monotonic() + START_TIMEOUT_S
    last = ""
    while time.monotonic() < deadline and not stopping.is_set():
        try:
            put = urllib.request.Request(url, data=b"ready", method="PUT")
            with urllib.request.urlopen(put, timeout=10):
                pass
            with urllib.request.urlopen(urllib.request.Request(url, method="DELETE"), timeout=10):
                return
        except (OSError, urllib.error.HTTPError) as err:
            last = str(err)
        time.sleep(0.2)
    raise RuntimeError(f"SeaweedFS took no write within {START_TIMEOUT_S:g}s ({last})")


def stop_weed(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after STOP_GRACE_S: weed's graceful stop closes the volume server and the
    filer's store within a second, then one of its servers can hang (measured: a stop of 15 s)."""
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


# ---------------------------------------------------------------------- a server of its own, outside a cloud


def identity(name: str, key_id: str, secret: str, actions: list[str]) -> dict[str, Any]:
    """One entry of SeaweedFS's S3 configuration (`-s3.config`): a name, its key, its allowed actions."""
    return {"name": name, "credentials": [{"accessKey": key_id, "secretKey": secret}], "actions": actions}


@dataclass
class Standalone:
    """A `weed server -s3` of its own, on 127.0.0.1, with the identities its user chooses: the s3://
    backend's tests and the benchmarks run one (a local cloud's server is `ensure_running`'s, with the
    cloud's keys). Changed identities are written and the server reloads them (SIGHUP); an identity left out
    is not forgotten by a reload, so a revoked key must stay, disabled (`revoked`)."""

    home: Path
    child: subprocess.Popen[bytes]
    where: Endpoints
    generation: int = 0

    @property
    def endpoint(self) -> str:
        return self.where.s3

    @property
    def identities_file(self) -> Path:
        return self.home / "identities.json"

    @classmethod
    def start(
        cls, home: Path, admin: tuple[str, str], identities: list[dict[str, Any]] | None = None
    ) -> Standalone:
        """Start it under `home` (its data, logs and identities), with `admin` (key id, secret) allowed
        everything, and wait until it takes a write (bounded); S3ServerError when it does not."""
        weed = find_weed()
        if weed is None:
            raise S3ServerError("SeaweedFS's weed is not built: run `make tools` (or set NPA_WEED_BIN)")
        home.mkdir(parents=True, exist_ok=True)
        (home / "seaweedfs").mkdir(exist_ok=True)
        (home / "seaweedfs-config").mkdir(exist_ok=True)
        s3_port, *ports = free_ports(8)
        document = [identity("admin", *admin, list(seaweed.ADMIN_ACTIONS)), *(identities or [])]
        write_atomically(home / "identities.json", json.dumps({"identities": document}) + "\n", mode=0o600)
        with (home / "weed.log").open("ab") as out:
            child = subprocess.Popen(
                weed_command(weed, home, s3_port, ports, home / "identities.json"),
                cwd=home,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=daemon_env(),
                start_new_session=True,
            )
        server = cls(home, child, Endpoints(s3_port, ports[4], child.pid))
        client = S3Client(server.endpoint, seaweed.ADMIN_REGION, admin[0], SecretStr(admin[1]), timeout_s=5)
        try:
            wait_until_serving(client, child, threading.Event())
            wait_until_writable(server.where, threading.Event())
        except (RuntimeError, OSError) as err:
            server.stop()
            raise S3ServerError(f"SeaweedFS did not start: {err} (log: {home / 'weed.log'})") from None
        return server

    def set_identities(self, admin: tuple[str, str], identities: list[dict[str, Any]]) -> None:
        """Replace the identities beside the admin's and wait until the server holds them."""
        self.generation += 1
        canary = (f"NPACANARY{self.generation:011d}", secrets.token_urlsafe(30))
        document = [
            identity("admin", *admin, list(seaweed.ADMIN_ACTIONS)),
            identity(f"canary-{self.generation}", *canary, []),
            *identities,
        ]
        write_atomically(self.identities_file, json.dumps({"identities": document}) + "\n", mode=0o600)
        seaweed.reload(self.where, *canary)

    def cpu_s(self) -> float:
        """The CPU seconds `weed` has used so far (user and system, from /proc)."""
        fields = Path(f"/proc/{self.child.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        stop_weed(self.child)


def revoked(key_id: str) -> dict[str, Any]:
    """A key no longer allowed: disabled, with a secret nobody holds (a reload keeps identities it held)."""
    entry = identity(key_id, key_id, secrets.token_urlsafe(30), [])
    entry["credentials"][0]["status"] = "Inactive"
    return {**entry, "disabled": True}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m npa_pulumi.simulator.seaweedd")
    parser.add_argument("--cloud-dir", required=True, type=Path)
    parser.add_argument("--port", type=int, default=0, help="0: the recorded port, else a free one")
    args = parser.parse_args(argv)
    cloud_dir: Path = args.cloud_dir
    home = s3_dir(cloud_dir)
    home.mkdir(parents=True, exist_ok=True)
    lock = FileLock(home / "server.lock")  # held for the daemon's whole life; the kernel drops it at exit
    if not lock.acquire(blocking=False):
        return 0  # another server runs for this cloud
    write_atomically(home / "server.pid", f"{os.getpid()}\n")
    (home / "ready").unlink(missing_ok=True)
    (home / "failed").unlink(missing_ok=True)
    end_left_over_weed(home)

    def fail(why: str) -> int:
        (home / "failed").write_text(why + "\n")
        log(why)
        return 1

    weed = find_weed()
    if weed is None:
        return fail("SeaweedFS's weed is not built: run `make tools` (or set NPA_WEED_BIN)")
    port = args.port or recorded_port(cloud_dir) or free_ports(1)[0]
    if not wait_free(port):
        return fail(f"cannot listen on 127.0.0.1:{port}: the port is in use")
    write_atomically(home / "port", f"{port}\n")  # stable from now on: backend URLs name it
    ports = internal_ports(home, port)
    busy = [p for p in ports if not wait_free(p)]
    if busy:
        return fail(
            f"SeaweedFS's internal port(s) {', '.join(map(str, busy))} on 127.0.0.1 are in use; they are "
            f"recorded in {home / 'ports.json'} (its master keeps its state by port)"
        )
    (home / "seaweedfs").mkdir(exist_ok=True)
    (home / "seaweedfs-config").mkdir(exist_ok=True)
    seaweed.write_identities(cloud_dir, Desired((), (), ()), 0)  # the admin only, until the first apply
    stopping = threading.Event()

    def on_signal(_signum: int, _frame: Any) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    started = time.monotonic()
    with (home / "weed.log").open("ab") as weed_log:
        child = subprocess.Popen(
            weed_command(weed, home, port, ports, seaweed.identities_path(cloud_dir)),
            cwd=home,
            stdin=subprocess.DEVNULL,
            stdout=weed_log,
            stderr=subprocess.STDOUT,
            env=daemon_env(),
            preexec_fn=_die_with_parent,  # the daemon has started no thread yet
        )
    where = Endpoints(port, ports[4], child.pid)
    write_atomically(
        home / "endpoints.json",
        json.dumps({"s3_port": port, "filer_port": ports[4], "weed_pid": child.pid}) + "\n",
    )
    try:
        wait_until_serving(seaweed.admin_client(cloud_dir, where, timeout_s=5), child, stopping)
        wait_until_writable(where, stopping)
        seaweed.apply(cloud_dir, force=True)
    except (RuntimeError, seaweed.SeaweedSyncError, OSError) as err:
        stop_weed(child)
        return fail(f"the SeaweedFS server did not start: {err} (log: {home / 'weed.log'})")
    (home / "ready").write_text(f"{port}\n")
    log(
        f"serving the local cloud {cloud_dir} with SeaweedFS at {where.s3} "
        f"(weed pid {child.pid}, ready in {time.monotonic() - started:.1f} s)"
    )
    code = 0
    while not stopping.wait(POLL_S):
        if child.poll() is not None:
            log(f"weed exited ({child.returncode}): stopping")
            code = 1
            break
        if _cloud_gone(cloud_dir):
            log("the local cloud's database is gone: stopping")
            break
        try:
            seaweed.apply(cloud_dir, lock_timeout_s=5)  # a key past its expiry leaves here
        except (seaweed.SeaweedSyncError, TimeoutError, OSError) as err:
            log(f"sync: {err}")
    (home / "ready").unlink(missing_ok=True)
    stop_weed(child)
    (home / "endpoints.json").unlink(missing_ok=True)
    log("stopped")
    return code


if __name__ == "__main__":
    sys.exit(main())
