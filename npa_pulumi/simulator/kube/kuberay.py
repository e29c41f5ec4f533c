"""The KubeRay operator of one local cluster: the pinned binary run by the cluster's agent as a child
process, against that cluster's API server, standing in for the operator pod kwok cannot run.

It runs exactly while the cluster holds the fleet's operator Deployment (`kuberay-system/kuberay-operator`,
labelled as the fleet's): the cluster stack installed it, so RayCluster status, head and worker pods,
their services and their recreation come from KubeRay itself. It stops when the Deployment goes (KubeRay
disabled, or the stack destroyed), when the agent stops (the cluster deleted, `local-cloud reset`), and,
through PR_SET_PDEATHSIG, when the agent dies any other way: it never outlives its owner.

Files, under the cluster's directory: `kuberay/kubeconfig` (the administrator's, 0600) and
`kuberay/operator.log`.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any

from npa_pulumi.kube.kuberay import FLEET_MANAGER, MANAGED_BY, OPERATOR_NAME, OPERATOR_NAMESPACE
from npa_pulumi.runtime.daemons import daemon_env
from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.processes import process_alive
from npa_pulumi.runtime.supervision import spawn_bound
from npa_pulumi.runtime.toolchain import find_kuberay_operator

RESTART_BACKOFF_S = 5.0
STOP_GRACE_S = 5.0
DEPLOYMENT_PATH = f"/apis/apps/v1/namespaces/{OPERATOR_NAMESPACE}/deployments/{OPERATOR_NAME}"


def operator_args() -> list[str]:
    """No listeners (metrics and probes off: many clusters share 127.0.0.1), no leader election (one
    operator per cluster), plain console logs."""
    return [
        "--enable-leader-election=false",
        "--metrics-addr=0",
        "--health-probe-bind-address=0",
        "--log-stdout-encoder=console",
    ]


NODE_NOT_READY = "NodeNotReady"  # the reason the node controller gives a pod it marks not Ready


def follow_node_readiness(client: Any, not_ready_nodes: list[str], log: Any) -> None:
    """Ray pods follow their node's readiness, as mk8s's node controller and the kubelet make them: a
    running Ray pod on a NotReady node is marked not Ready (reason NodeNotReady), and Ready again once its
    node is back. kwok re-evaluates its Stages only when a pod changes, so a fault on a node whose pods are
    already running has to be carried out here. Only KubeRay's pods, so what the GPU health gate reads of
    the driver stack on a faulted node stays as it was."""
    down = set(not_ready_nodes)
    for pod in client.list("/api/v1/pods", "ray.io/node-type"):
        meta, status = pod["metadata"], pod.get("status") or {}
        if meta.get("deletionTimestamp") or status.get("phase") != "Running":
            continue
        ready: dict[str, Any] = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {}
        )
        on_down_node = (pod.get("spec") or {}).get("nodeName") in down
        if on_down_node and ready.get("status") == "True":
            _set_ready(client, meta, False)
            log(f"pod {meta['namespace']}/{meta['name']}: not Ready (its node is NotReady)")
        elif not on_down_node and ready.get("status") == "False" and ready.get("reason") == NODE_NOT_READY:
            _set_ready(client, meta, True)
            log(f"pod {meta['namespace']}/{meta['name']}: Ready again")


def _set_ready(client: Any, meta: dict[str, Any], ready: bool) -> None:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = "True" if ready else "False"
    reason: dict[str, Any] = {"reason": None} if ready else {"reason": NODE_NOT_READY}  # null: removed
    conditions = [
        {"type": kind, "status": status, "lastTransitionTime": now, **reason}
        for kind in ("Ready", "ContainersReady")
    ]
    path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
    client.request(
        "PATCH", path, {"status": {"conditions": conditions}}, "application/strategic-merge-patch+json"
    )


def installed(client: Any) -> bool:
    """Whether the cluster holds the fleet's operator Deployment, wanting a replica and not being deleted."""
    deployment = client.get_or_none(DEPLOYMENT_PATH)
    if deployment is None:
        return False
    meta = deployment.get("metadata") or {}
    ours = (meta.get("labels") or {}).get(MANAGED_BY) == FLEET_MANAGER
    replicas = int((deployment.get("spec") or {}).get("replicas", 1) or 0)
    return ours and replicas > 0 and not meta.get("deletionTimestamp")


class OperatorProcess:
    def __init__(self, home: Path, kubeconfig: dict[str, Any], log: Any) -> None:
        self.dir = home / "kuberay"
        self.kubeconfig = kubeconfig
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.last_start = 0.0
        self.warned_missing = False

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def sync(self, wanted: bool) -> None:
        if not wanted:
            self.stop()
            return
        if self.proc is not None and self.proc.poll() is None:
            return
        if self.proc is not None:
            self.log(f"kuberay-operator exited with {self.proc.returncode}; restarting")
            self.proc = None
        if time.monotonic() - self.last_start < RESTART_BACKOFF_S:
            return
        self.start()

    def start(self) -> None:
        binary = find_kuberay_operator()
        if binary is None:
            if not self.warned_missing:
                self.log(
                    "the KubeRay operator is installed but kuberay-operator is not built: run `make tools`"
                )
                self.warned_missing = True
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        kubeconfig = self.dir / "kubeconfig"
        write_atomically(kubeconfig, json.dumps(self.kubeconfig), mode=0o600)
        env = dict(daemon_env(), KUBECONFIG=str(kubeconfig))
        self.last_start = time.monotonic()
        self.proc = spawn_bound([str(binary), *operator_args()], self.dir / "operator.log", env)
        (self.dir / "operator.pid").write_text(f"{self.proc.pid}\n")
        self.log(f"kuberay-operator started (pid {self.proc.pid})")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        with contextlib.suppress(OSError):
            (self.dir / "operator.pid").unlink()
        self.log(f"kuberay-operator stopped (pid {proc.pid})")


def running_pid(home: Path) -> int | None:
    """The operator's pid if one runs for this cluster (for `local-cloud status` and tests)."""
    try:
        pid = int((home / "kuberay" / "operator.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if process_alive(pid) else None
