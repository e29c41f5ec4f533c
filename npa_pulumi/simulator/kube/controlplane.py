"""One local cluster's control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
kwok (fake kubelets), started by kwokctl's binary runtime with every listener on 127.0.0.1.

Layout, under `<local-cloud dir>/kube/<cluster id>/`:

    kwok/            kwokctl's workdir (its cluster dir holds the PKI, etcd data, pid files, logs)
    agent.lock       flock held by the cluster's agent for its whole life: the kernel drops it when the
                     agent dies, so "is an agent running" never depends on PID bookkeeping
    access.json      where the API is and which files authenticate to it, written once it is ready
    tokens.csv       the bearer tokens the API server accepts (kube-apiserver --token-auth-file): the local
                     IAM's token of the cluster's tenant, as an mk8s cluster accepts its tenant's IAM tokens
    agent.log        the agent's log

kwokctl starts the components as background processes and exits; this module records their pids (with
their start times, so a reused pid is never killed) and stops them itself when needed, so a control
plane can be stopped even after its directory was deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npa_pulumi.runtime import pins
from npa_pulumi.runtime.locks import FileLock, held_elsewhere
from npa_pulumi.runtime.processes import EXIT_WAIT_S, process_alive, start_ticks, wait_while
from npa_pulumi.simulator.kube import binaries

CLUSTER_NAME = "cluster"  # kwokctl's name for the one cluster in each workdir
FIELD_MANAGER = "nebius-mk8s"


def kube_root(cloud_dir: Path) -> Path:
    return cloud_dir / "kube"


def cluster_dir(cloud_dir: Path, cluster_id: str) -> Path:
    return kube_root(cloud_dir) / cluster_id


@dataclass(frozen=True)
class Access:
    """How to reach one cluster's API as its administrator."""

    server: str
    ca_file: str
    cert_file: str
    key_file: str

    def kubeconfig_dict(self, context: str) -> dict[str, Any]:
        from npa_pulumi.kube.kubeconfig import ClientCertificate, ClusterAccess

        return ClusterAccess(
            self.server,
            Path(self.ca_file).read_text(),
            ClientCertificate(Path(self.cert_file).read_text(), Path(self.key_file).read_text()),
        ).kubeconfig(context)

    def client(self, timeout_s: float = 10.0) -> Any:
        from npa_pulumi.kube.client import KubeClient
        from npa_pulumi.kube.kubeconfig import dump

        return KubeClient.from_kubeconfig(dump(self.kubeconfig_dict("local")), timeout_s=timeout_s)


def read_access(cloud_dir: Path, cluster_id: str) -> Access | None:
    try:
        data = json.loads((cluster_dir(cloud_dir, cluster_id) / "access.json").read_text())
        return Access(**data)
    except (OSError, ValueError, TypeError):
        return None


# --------------------------------------------------------------------------------- processes


@dataclass(frozen=True)
class Component:
    """One process of a control plane; its start time tells it from a later process that reuses the pid."""

    name: str
    pid: int
    started: int  # clock ticks since boot: exact, whatever the wall clock does

    def alive(self) -> bool:
        return process_alive(self.pid, ticks=self.started)


def components(workdir: Path) -> list[Component]:
    """The processes kwokctl started for the cluster in `workdir`, from its pid files."""
    pid_dir = workdir / "clusters" / CLUSTER_NAME / "pids"
    found = []
    for pid_file in sorted(pid_dir.glob("*.pid")) if pid_dir.is_dir() else []:
        with contextlib.suppress(OSError, ValueError):
            pid = int(pid_file.read_text().strip())
            started = start_ticks(pid)
            if started is not None and process_alive(pid):
                found.append(Component(pid_file.stem, pid, started))
    return found


def terminate(procs: list[Component], grace_s: float = 2.0) -> None:
    """SIGTERM, then SIGKILL what is still there after `grace_s`. Only the recorded processes are touched."""
    for proc in procs:
        if proc.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)  # a stopped (faulted) apiserver must see the TERM
                os.kill(proc.pid, signal.SIGTERM)
    wait_while(lambda: any(p.alive() for p in procs), grace_s)
    for proc in procs:
        if proc.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
    # SIGKILL is delivered asynchronously: wait until they are gone.
    wait_while(lambda: any(p.alive() for p in procs), EXIT_WAIT_S, interval_s=0.02)


# --------------------------------------------------------------------------------- kwokctl


def _kube_version(apiserver: Path) -> str:
    out = subprocess.run([str(apiserver), "--version"], capture_output=True, text=True, check=False).stdout
    return out.strip().rsplit(" ", 1)[-1] or f"v{pins.pin('kubernetes')}"


def kwokctl_config(found: dict[str, Path], token_file: Path | None = None) -> str:
    """kwokctl's configuration: 127.0.0.1 only, our binaries (never a download), Stages as CRDs so the
    simulator can add fault stages at run time; `token_file`: the bearer tokens the API server accepts."""
    options = {
        "runtime": "binary",
        "bindAddress": "127.0.0.1",
        "kubeVersion": _kube_version(found["kube-apiserver"]),
        "kubeApiserverBinary": str(found["kube-apiserver"]),
        "kubeControllerManagerBinary": str(found["kube-controller-manager"]),
        "kubeSchedulerBinary": str(found["kube-scheduler"]),
        "kubectlBinary": str(found["kubectl"]),
        "etcdBinary": str(found["etcd"]),
        "kwokControllerBinary": str(found["kwok"]),
        "enableCRDs": ["Stage"],
        "quietPull": True,
    }
    # One controller manager and one scheduler per cluster: leader election only lets a paused API server
    # (`local-cloud fault api`) make them give up their lease and exit, which a managed control plane's
    # supervisor would not allow; without it they reconnect once the API answers again.
    patches = [
        {"name": name, "extraArgs": [{"key": "leader-elect", "value": "false"}]}
        for name in ("kube-controller-manager", "kube-scheduler")
    ]
    if token_file is not None:
        patches.append(
            {"name": "kube-apiserver", "extraArgs": [{"key": "token-auth-file", "value": str(token_file)}]}
        )
    return json.dumps(
        {
            "kind": "KwokctlConfiguration",
            "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
            "options": options,
            "componentsPatches": patches,
        }
    )


def _kwokctl(found: dict[str, Path], workdir: Path, args: list[str], timeout_s: float) -> None:
    env = dict(os.environ, KWOK_WORKDIR=str(workdir), KWOK_RUNTIME="binary")
    proc = subprocess.run(
        [str(found["kwokctl"]), *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise RuntimeError(f"kwokctl {' '.join(args[:2])} failed (exit {proc.returncode}):\n{tail}")


# Who a token authenticates as: cluster administrators, as mk8s maps its tenant's admins (the API server's
# RBAC lets system:masters do anything).
TOKEN_GROUPS = "system:masters"


def write_tokens(home: Path, tokens: dict[str, str]) -> Path:
    """kube-apiserver's static token file (token,user,uid,"groups"), private: it holds credentials."""
    path = home / "tokens.csv"
    lines = [f'{token},{user},{user},"{TOKEN_GROUPS}"' for token, user in sorted(tokens.items())]
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text("".join(line + "\n" for line in lines))
    return path


def start(
    cloud_dir: Path, cluster_id: str, timeout_s: float = 120.0, tokens: dict[str, str] | None = None
) -> tuple[Access, list[Component]]:
    """Start (or restart, keeping etcd's data) the cluster's control plane; returns how to reach it and
    the processes that make it up. `tokens`: bearer token -> user name, what the API server accepts
    besides the administrator's client certificate (read once, at start)."""
    found = binaries.require_all()
    home = cluster_dir(cloud_dir, cluster_id)
    workdir = home / "kwok"
    workdir.mkdir(parents=True, exist_ok=True)
    token_file = write_tokens(home, tokens or {})
    config = home / "kwokctl.json"
    config.write_text(kwokctl_config(found, token_file))
    cluster_files = workdir / "clusters" / CLUSTER_NAME
    stale = components(workdir)
    if stale:  # a previous agent died: its control plane is ours to replace
        terminate(stale)
    kubeconfig = home / "kwokctl.kubeconfig"  # kwokctl would otherwise merge into ~/.kube/config
    # kwokctl picks free ports and then binds them: two clusters starting at once can pick the same ones
    # (and one API server would then serve the other's etcd). One start at a time, machine-wide.
    with _start_lock():
        if (cluster_files / "kwok.yaml").exists():
            _kwokctl(found, workdir, ["start", "cluster", "--name", CLUSTER_NAME, "--wait", "60s"], timeout_s)
        else:
            args = ["create", "cluster", "--name", CLUSTER_NAME, "--config", str(config)]
            _kwokctl(found, workdir, [*args, "--kubeconfig", str(kubeconfig), "--wait", "60s"], timeout_s)
    access = Access(
        server=_server_of(cluster_files / "kubeconfig.yaml"),
        ca_file=str(cluster_files / "pki" / "ca.crt"),
        cert_file=str(cluster_files / "pki" / "admin.crt"),
        key_file=str(cluster_files / "pki" / "admin.key"),
    )
    (home / "access.json").write_text(json.dumps(access.__dict__))
    return access, components(workdir)


def start_lock_path() -> Path:
    """Machine-wide, as ports are: every local cloud of this user on this machine shares it, whatever TMPDIR
    each process was given (a per-process TMPDIR made it per-process: two clusters starting at once then
    took the same ports, and one's nodes never became Ready)."""
    shared = Path("/tmp")
    directory = shared if shared.is_dir() else Path(tempfile.gettempdir())
    return directory / f"npa-local-cloud-ports-{os.getuid()}.lock"


def _start_lock() -> FileLock:
    return FileLock(start_lock_path())


def _server_of(kubeconfig: Path) -> str:
    import yaml

    config = yaml.safe_load(kubeconfig.read_text())
    return str(config["clusters"][0]["cluster"]["server"])


# --------------------------------------------------------------------------------- the agent's lock


def agent_running(cloud_dir: Path, cluster_id: str) -> bool:
    """Whether an agent holds the cluster's lock (the kernel releases it when the agent dies)."""
    return held_elsewhere(cluster_dir(cloud_dir, cluster_id) / "agent.lock")


def agent_pid(cloud_dir: Path, cluster_id: str) -> int | None:
    try:
        return int((cluster_dir(cloud_dir, cluster_id) / "agent.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
