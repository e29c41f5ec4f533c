"""The per-cluster agent: the local cloud's stand-in for the mk8s service's control of one cluster.

    python -m npa_pulumi.simulator.kube.agent --cloud-dir DIR --cluster ID

It holds the cluster's `agent.lock` for its whole life, starts the control plane, then once a second
reads the cluster and its node groups from the simulator and makes the API server hold what a real
cluster would (Nodes for RUNNING groups, the recipe's objects, fault stages). Where the cluster stack
installed the fleet's KubeRay operator, it runs the real operator binary for the cluster as a child
process (kuberay.py). It stops the operator and the control plane and exits when asked (SIGTERM), when
the cluster is deleted, or when the local cloud itself is gone (its database deleted or emptied), so no
apiserver, etcd or operator outlives what owns it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

from npa_pulumi.kube.gpu_operator import OPERATOR_NAMESPACE
from npa_pulumi.runtime.locks import FileLock
from npa_pulumi.simulator.kube import binaries, controlplane, device_plugin, kuberay, shapes, slurm, system
from npa_pulumi.simulator.kube.fabric import FabricModel
from npa_pulumi.simulator.kube.gpus import GpuModel
from npa_pulumi.simulator.kube.storage import StorageModel

POLL_S = 1.0
RESYNC_S = 30.0  # re-apply everything this often, so objects deleted by hand come back
JSON = dict[str, Any]


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


class Agent:
    def __init__(self, cloud_dir: Path, cluster_id: str) -> None:
        from npa_pulumi.simulator.simulator import LocalSimulator

        self.cloud_dir = cloud_dir
        self.cluster_id = cluster_id
        self.home = controlplane.cluster_dir(cloud_dir, cluster_id)
        self.sim = LocalSimulator(cloud_dir, auto_init=False)
        self.stopping = False
        self.applied: dict[str, str] = {}  # object path -> digest of what was last applied
        self.taint_events: dict[str, int] = {}  # node -> mig_not_ready_taint events carried out
        self.first_sync = True  # events counted before this agent started are history
        self.last_full_sync = 0.0
        self.storage = StorageModel(cloud_dir, self.sim)  # the filesystem CSI driver and probe kubelet
        self.gpus = GpuModel()  # what nvidia-smi says on each node
        self.fabric = FabricModel()  # what NCCL's all-reduce measures on NVLink and InfiniBand
        self.operator: kuberay.OperatorProcess | None = None  # KubeRay, once the control plane is up
        self.slurm = slurm.SlurmOperator()  # soperator clusters: the operator's status reconcile

    # ------------------------------------------------------------------ ownership

    def owner_gone(self) -> bool:
        """The cluster's owner is the simulator record: gone when the database or the record is."""
        return self.snapshot() is None

    def snapshot(self) -> tuple[JSON, list[JSON]] | None:
        if not self.sim.path.is_file():
            return None
        try:
            return self.sim.cluster_snapshot(self.cluster_id)
        except Exception as err:  # a locked or half-reset database: try again next tick
            log(f"cannot read the simulator: {err}")
            return self.last_snapshot

    last_snapshot: tuple[JSON, list[JSON]] | None = None

    # ------------------------------------------------------------------ sync

    def apply(self, client: Any, obj: JSON, force: bool) -> None:
        from npa_pulumi.kube.client import object_path

        path = object_path(obj)
        digest = _digest(obj)
        if not force and self.applied.get(path) == digest:
            return
        if obj["kind"] == "Node":
            obj = self._keep_foreign_taints(client, path, obj)
        client.apply(path, obj, controlplane.FIELD_MANAGER)
        if obj["kind"] == "Node":  # status is a subresource: capacity, allocatable and the boot id
            client.apply(
                path + "/status",
                {**obj, "metadata": {"name": obj["metadata"]["name"]}},
                controlplane.FIELD_MANAGER,
            )
        self.applied[path] = digest

    @staticmethod
    def _keep_foreign_taints(client: Any, path: str, obj: JSON) -> JSON:
        """A node's taints are one list in the API: re-applying ours must keep those others set (the GPU
        operator's, a user's), as mk8s keeps what it does not manage."""
        current = client.get_or_none(path)
        ours = obj["spec"].get("taints") or []
        theirs = [t for t in ((current or {}).get("spec") or {}).get("taints") or [] if t not in ours]
        # One taint per key and effect: where theirs holds the slot (the operator's mig-not-ready in place
        # of the GPU taint), theirs stays.
        held = {(t.get("key"), t.get("effect")) for t in theirs}
        ours = [t for t in ours if (t.get("key"), t.get("effect")) not in held]
        return {**obj, "spec": {**obj["spec"], "taints": [*ours, *theirs]}}

    def inject_taint_events(self, client: Any, cluster: JSON) -> None:
        """`mig_not_ready_taint` is an event (a counter): each new one taints the node the way the GPU
        operator leaves a replaced node, once; whoever removes the taint removes it for good."""
        for node, faults in (cluster.get("node_faults") or {}).items():
            count = int(faults.get("mig_not_ready_taint", 0))
            if count <= self.taint_events.setdefault(node, count if self.first_sync else 0):
                continue
            taint = {"key": "nvidia.com/gpu", "value": "mig-not-ready", "effect": "NoSchedule"}
            current = client.get_or_none(f"/api/v1/nodes/{node}")
            if current is not None:
                # It takes the slot of any taint with its key and effect (the API allows one per pair).
                taints = [
                    t
                    for t in (current.get("spec") or {}).get("taints") or []
                    if (t.get("key"), t.get("effect")) != (taint["key"], taint["effect"])
                ]
                patch = [{"op": "add", "path": "/spec/taints", "value": [*taints, taint]}]
                client.request("PATCH", f"/api/v1/nodes/{node}", patch, "application/json-patch+json")
                log(f"node {node}: tainted nvidia.com/gpu=mig-not-ready:NoSchedule")
            self.taint_events[node] = count

    def sync(self, client: Any, cluster: JSON, groups: list[JSON]) -> None:
        from npa_pulumi.kube.client import KubeError

        force = time.monotonic() - self.last_full_sync > RESYNC_S
        try:  # once per cluster (its marker): a budget a teardown removed is never re-applied
            system.install_once(client, self.home, log)
        except KubeError as err:
            log(f"system workloads: {err}")
        nodes = slurm.with_faults(cluster, shapes.desired_nodes(cluster, groups))
        nodes = device_plugin.with_stale_resources(client, cluster, nodes)
        faulted = [n for n, f in (cluster.get("node_faults") or {}).items() if f.get("pod_failure")]
        rtx = [
            n for n, o in nodes.items() if "RTX" in o["metadata"]["labels"].get("nvidia.com/gpu.product", "")
        ]
        not_ready = [n for n, f in (cluster.get("node_faults") or {}).items() if f.get("not_ready")]
        stages = [
            shapes.pod_failure_stage(faulted),
            shapes.smoke_stage(faulted),
            *shapes.graphics_stages(rtx, faulted),
        ]
        slurm_cluster = slurm.slurm_of(cluster)
        slurm_objects = slurm.desired_objects(slurm_cluster) if slurm_cluster else []
        recipe = shapes.recipe_objects(cluster, self.repository_files(client, cluster))
        for obj in [*stages, *nodes.values(), *recipe, *slurm_objects]:
            try:
                self.apply(client, obj, force)
            except KubeError as err:
                log(f"apply {obj['kind']} {obj['metadata']['name']}: {err}")
        selector = f"{shapes.MANAGED_BY}={shapes.LOCAL_CLOUD}"
        for node in client.list("/api/v1/nodes", selector):
            name = node["metadata"]["name"]
            if name not in nodes:
                client.delete(f"/api/v1/nodes/{name}")
                self.applied.pop(f"/api/v1/nodes/{name}", None)
                log(f"node {name} removed")
        self.inject_taint_events(client, cluster)
        try:
            self.slurm.sync(client, cluster, controlplane.FIELD_MANAGER)
        except KubeError as err:
            log(f"slurm operator: {err}")
        try:
            self.storage.sync(client, cluster, groups)
        except (KubeError, OSError) as err:
            log(f"storage: {err}")
        try:
            self.gpus.answer_probes(client, cluster, groups)
        except KubeError as err:
            log(f"gpus: {err}")
        try:
            self.fabric.answer_probes(client, cluster, groups)
        except KubeError as err:
            log(f"fabric: {err}")
        if self.operator is not None:
            try:
                self.operator.sync(kuberay.installed(client))
                kuberay.follow_node_readiness(client, not_ready, log)
            except KubeError as err:  # the API down: the operator keeps running, as a pod would
                log(f"kuberay: {err}")
        self.first_sync = False
        if force:
            self.last_full_sync = time.monotonic()

    @staticmethod
    def repository_files(client: Any, cluster: JSON) -> list[str] | None:
        """The files of the ConfigMap the RTX values' repoConfig names, read as the GPU operator reads it
        to render the driver's mounts; None when there is none (or no such setting)."""
        addons = cluster.get("addons") or {}
        configmap = shapes.rtx_driver(addons.get("rtx_driver") or {}).repo_config_map
        if addons.get("gpu_driver") != "operator" or not configmap:
            return None
        found = client.get_or_none(f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/configmaps/{configmap}")
        return None if found is None else sorted((found.get("data") or {}).keys())

    def install_stages(self, client: Any) -> None:
        kwok = binaries.find("kwok")
        stage_dir = kwok.resolve().parent / "stages" if kwok else None
        for stage in shapes.kwok_stages(stage_dir):
            self.apply(client, stage, force=True)

    def tokens(self) -> dict[str, str]:
        """The bearer tokens the cluster's API server accepts: the local IAM's token of its tenant."""
        from npa_pulumi.simulator.projects import LOCAL_SUBJECT, iam_token

        tenant = str(self.sim.principal()["tenant_id"])
        return {iam_token(tenant): f"{LOCAL_SUBJECT}@{tenant}"}

    # ------------------------------------------------------------------ life

    def run(self) -> int:
        first = self.snapshot()
        if first is None:
            log("the cluster does not exist: nothing to do")
            return 0
        try:
            access, procs = controlplane.start(self.cloud_dir, self.cluster_id, tokens=self.tokens())
        except Exception as err:
            (self.home / "failed").write_text(str(err))
            log(f"the control plane did not start: {err}")
            return 1
        log(f"control plane up at {access.server}: {', '.join(f'{p.name}={p.pid}' for p in procs)}")
        client = access.client()
        self.operator = kuberay.OperatorProcess(self.home, access.kubeconfig_dict("kuberay-operator"), log)
        self.install_stages(client)
        self.last_snapshot = first
        try:
            self.sync(client, *first)
        except Exception as err:
            log(f"first sync failed: {err}")
        (self.home / "ready").write_text(access.server + "\n")
        while not self.stopping:
            snap = self.snapshot()
            if snap is None:
                log("the cluster or the local cloud is gone: stopping")
                break
            self.last_snapshot = snap
            try:
                self.sync(client, *snap)
            except Exception as err:  # the API down (a fault) or restarting: keep going
                log(f"sync failed: {err}")
            time.sleep(POLL_S)
        if self.operator is not None:
            self.operator.stop()
        controlplane.terminate(procs)
        if self.snapshot() is None:
            shutil.rmtree(self.home, ignore_errors=True)
        log("stopped")
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m npa_pulumi.simulator.kube.agent")
    parser.add_argument("--cloud-dir", required=True, type=Path)
    parser.add_argument("--cluster", required=True)
    args = parser.parse_args(argv)
    home = controlplane.cluster_dir(args.cloud_dir, args.cluster)
    home.mkdir(parents=True, exist_ok=True)
    lock = FileLock(home / "agent.lock")  # held for the agent's whole life; the kernel drops it at exit
    if not lock.acquire(blocking=False):
        return 0  # another agent runs this cluster
    (home / "agent.pid").write_text(f"{os.getpid()}\n")
    (home / "failed").unlink(missing_ok=True)
    agent = Agent(args.cloud_dir, args.cluster)

    def stop(_signum: int, _frame: Any) -> None:
        agent.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return agent.run()


if __name__ == "__main__":
    sys.exit(main())
