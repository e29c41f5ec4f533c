"""Starting, waiting for and stopping a cluster's agent (and with it, its control plane).

The simulator calls these from whatever process runs an operation (the CLI, or the recipe's local-exec
provisioners): the agent is started detached, in its own session, with no inherited pipes or secrets, so
it outlives the short-lived caller but never holds terraform's output open.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from pathlib import Path

from npa_pulumi.runtime.daemons import spawn_python_daemon
from npa_pulumi.runtime.processes import EXIT_WAIT_S, process_alive, wait_while
from npa_pulumi.simulator.kube import controlplane
from npa_pulumi.simulator.kube.controlplane import Access


class ControlPlaneError(Exception):
    pass


def spawn_agent(cloud_dir: Path, cluster_id: str) -> None:
    """The cluster's agent, detached (nothing secret reaches it: it needs no cloud credentials)."""
    home = controlplane.cluster_dir(cloud_dir, cluster_id)
    home.mkdir(parents=True, exist_ok=True)
    for marker in ("ready", "failed"):
        (home / marker).unlink(missing_ok=True)
    spawn_python_daemon(
        "npa_pulumi.simulator.kube.agent",
        ["--cloud-dir", str(cloud_dir), "--cluster", cluster_id],
        home / "agent.log",
    )


def ensure_running(cloud_dir: Path, cluster_id: str, timeout_s: float) -> Access:
    """The cluster's API, started if no agent runs it; waits until it answers (bounded)."""
    home = controlplane.cluster_dir(cloud_dir, cluster_id)
    if not controlplane.agent_running(cloud_dir, cluster_id):
        spawn_agent(cloud_dir, cluster_id)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (home / "failed").exists():
            reason = (home / "failed").read_text().strip()
            raise ControlPlaneError(
                f"the Kubernetes API of cluster {cluster_id} did not start: {reason} "
                f"(log: {home / 'agent.log'})"
            )
        if (home / "ready").exists():
            access = controlplane.read_access(cloud_dir, cluster_id)
            if access is not None:
                return access
        time.sleep(0.1)
    raise ControlPlaneError(
        f"the Kubernetes API of cluster {cluster_id} was not ready after {timeout_s:g}s "
        f"(log: {home / 'agent.log'})"
    )


def wait_for_nodes(access: Access, node_group_id: str, count: int, timeout_s: float) -> None:
    """Until the group's `count` nodes are registered and Ready (the agent creates them; kwok makes them
    Ready), so a RUNNING node group also means nodes a workload can use."""
    from npa_pulumi.kube.client import KubeError
    from npa_pulumi.simulator.kube.shapes import NODE_GROUP_ID

    client = access.client()
    deadline = time.monotonic() + timeout_s
    ready = 0
    while True:
        try:
            nodes = client.list("/api/v1/nodes", f"{NODE_GROUP_ID}={node_group_id}")
            ready = sum(1 for n in nodes if _is_ready(n))
            if len(nodes) == count and ready == count:
                return
        except KubeError:
            pass
        if time.monotonic() >= deadline:
            raise ControlPlaneError(
                f"node group {node_group_id}: {ready} of {count} nodes Ready after {timeout_s:g}s"
            )
        time.sleep(0.2)


def _is_ready(node: dict[str, object]) -> bool:
    status = node.get("status") or {}
    conditions = status.get("conditions") or [] if isinstance(status, dict) else []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def stop(cloud_dir: Path, cluster_id: str, timeout_s: float = 20.0) -> None:
    """Stop the cluster's agent and control plane and remove its files. Safe when nothing runs."""
    home = controlplane.cluster_dir(cloud_dir, cluster_id)
    if not home.exists():
        return
    pid = controlplane.agent_pid(cloud_dir, cluster_id)
    if pid is not None and controlplane.agent_running(cloud_dir, cluster_id):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not wait_while(lambda: controlplane.agent_running(cloud_dir, cluster_id), timeout_s):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        # The lock goes when the agent closes it on its way out, a moment before the process is gone:
        # "stopped" means gone (or a zombie), so wait for that too (bounded).
        wait_while(lambda: process_alive(pid), EXIT_WAIT_S, interval_s=0.02)
    # Whatever the agent left (it was SIGKILLed, say): the pid files name the components.
    controlplane.terminate(controlplane.components(home / "kwok"))
    shutil.rmtree(home, ignore_errors=True)


def stop_all(cloud_dir: Path) -> int:
    root = controlplane.kube_root(cloud_dir)
    stopped = 0
    for home in sorted(root.iterdir()) if root.is_dir() else []:
        if home.is_dir():
            stop(cloud_dir, home.name)
            stopped += 1
    return stopped


def running(cloud_dir: Path) -> dict[str, str]:
    """cluster id -> API server address, for every cluster whose agent runs."""
    root = controlplane.kube_root(cloud_dir)
    found: dict[str, str] = {}
    for home in sorted(root.iterdir()) if root.is_dir() else []:
        if controlplane.agent_running(cloud_dir, home.name):
            access = controlplane.read_access(cloud_dir, home.name)
            found[home.name] = access.server if access else ""
    return found


def pause_api(cloud_dir: Path, cluster_id: str, paused: bool) -> bool:
    """SIGSTOP (or SIGCONT) the cluster's kube-apiserver; False when it has none running."""
    procs = [c for c in controlplane.components(controlplane.cluster_dir(cloud_dir, cluster_id) / "kwok")]
    apiservers = [c for c in procs if c.name == "kube-apiserver" and c.alive()]
    for proc in apiservers:
        os.kill(proc.pid, signal.SIGSTOP if paused else signal.SIGCONT)
    return bool(apiservers)
