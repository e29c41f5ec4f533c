"""The local cloud's SeaweedFS S3 server: a daemon that runs `weed server -s3` for one cloud directory.

    python -m npa_pulumi.simulator.seaweedd --cloud-dir DIR [--port N]

It keeps the home-made server's contract (s3daemon.py starts, finds and stops either): it holds
`s3/server.lock` for its life, records its pid and the S3 port (the same port on every restart: backend URLs
name it), writes `ready` once S3 answers with the cloud's buckets and keys in place (seaweed.py), and stops
on SIGTERM or when the cloud's database is gone. `weed` is its child, on 127.0.0.1 only, with its data
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
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from npa_pulumi.runtime.daemons import daemon_env
from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.locks import FileLock
from npa_pulumi.runtime.processes import process_alive
from npa_pulumi.runtime.toolchain import find_weed
from npa_pulumi.simulator import db, seaweed
from npa_pulumi.simulator.s3daemon import recorded_port, s3_dir
from npa_pulumi.simulator.seaweed import Desired, Endpoints

POLL_S = 0.5
START_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0
VOLUME_SIZE_LIMIT_MB = 64  # small volumes: a local cloud holds state files, not datasets


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


def weed_command(weed: Path, home: Path, s3_port: int, ports: list[int]) -> list[str]:
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
        f"-s3.config={seaweed.identities_path(home.parent)}",
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


def wait_until_serving(
    cloud_dir: Path, where: Endpoints, child: subprocess.Popen[bytes], stopping: threading.Event
) -> None:
    """Until the S3 gateway answers the admin identity (the filer behind it up), bounded."""
    client = seaweed.admin_client(cloud_dir, where, timeout_s=5)
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
    write_atomically(home / "kind", "seaweedfs\n")
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

    def stop(_signum: int, _frame: Any) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    started = time.monotonic()
    with (home / "weed.log").open("ab") as weed_log:
        child = subprocess.Popen(
            weed_command(weed, home, port, ports),
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
        wait_until_serving(cloud_dir, where, child, stopping)
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
