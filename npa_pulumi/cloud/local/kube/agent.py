"""The per-cluster agent: the local cloud's stand-in for the mk8s service's control of one cluster.

    python -m npa_pulumi.cloud.local.kube.agent --cloud-dir DIR --cluster ID

It holds the cluster's `agent.lock` for its whole life, starts the control plane, then once a second
reads the cluster and its node groups from the simulator and makes the API server hold what a real
cluster would (Nodes for RUNNING groups, the recipe's objects, fault stages). It stops the control plane
and exits when asked (SIGTERM), when the cluster is deleted, or when the local cloud itself is gone (its
database deleted or emptied), so no apiserver or etcd outlives what owns it.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

from npa_pulumi.cloud.local.kube import binaries, controlplane, shapes

POLL_S = 1.0
RESYNC_S = 30.0  # re-apply everything this often, so objects deleted by hand come back
JSON = dict[str, Any]


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


class Agent:
    def __init__(self, cloud_dir: Path, cluster_id: str) -> None:
        from npa_pulumi.cloud.local.simulator import LocalSimulator

        self.cloud_dir = cloud_dir
        self.cluster_id = cluster_id
        self.home = controlplane.cluster_dir(cloud_dir, cluster_id)
        self.sim = LocalSimulator(cloud_dir, auto_init=False)
        self.stopping = False
        self.applied: dict[str, str] = {}  # object path -> digest of what was last applied
        self.last_full_sync = 0.0

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
        client.apply(path, obj, controlplane.FIELD_MANAGER)
        if obj["kind"] == "Node":  # status is a subresource: capacity, allocatable and the boot id
            client.apply(
                path + "/status",
                {**obj, "metadata": {"name": obj["metadata"]["name"]}},
                controlplane.FIELD_MANAGER,
            )
        self.applied[path] = digest

    def sync(self, client: Any, cluster: JSON, groups: list[JSON]) -> None:
        from npa_pulumi.kube.client import KubeError

        force = time.monotonic() - self.last_full_sync > RESYNC_S
        nodes = shapes.desired_nodes(cluster, groups)
        faulted = [n for n, f in (cluster.get("node_faults") or {}).items() if f.get("pod_failure")]
        stages = [shapes.pod_failure_stage(faulted), shapes.smoke_stage(faulted)]
        for obj in [*stages, *nodes.values(), *shapes.recipe_objects(cluster)]:
            try:
                self.apply(client, obj, force)
            except KubeError as err:
                # e.g. a RayCluster before its CRD is established: the next tick applies it
                log(f"apply {obj['kind']} {obj['metadata']['name']}: {err}")
        selector = f"{shapes.MANAGED_BY}={shapes.LOCAL_CLOUD}"
        for node in client.list("/api/v1/nodes", selector):
            name = node["metadata"]["name"]
            if name not in nodes:
                client.delete(f"/api/v1/nodes/{name}")
                self.applied.pop(f"/api/v1/nodes/{name}", None)
                log(f"node {name} removed")
        if force:
            self.last_full_sync = time.monotonic()

    def install_stages(self, client: Any) -> None:
        kwok = binaries.find("kwok")
        stage_dir = kwok.resolve().parent / "stages" if kwok else None
        for stage in shapes.kwok_stages(stage_dir):
            self.apply(client, stage, force=True)

    # ------------------------------------------------------------------ life

    def run(self) -> int:
        first = self.snapshot()
        if first is None:
            log("the cluster does not exist: nothing to do")
            return 0
        try:
            access, procs = controlplane.start(self.cloud_dir, self.cluster_id)
        except Exception as err:
            (self.home / "failed").write_text(str(err))
            log(f"the control plane did not start: {err}")
            return 1
        log(f"control plane up at {access.server}: {', '.join(f'{p.name}={p.pid}' for p in procs)}")
        client = access.client()
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
        controlplane.terminate(procs)
        if self.snapshot() is None:
            shutil.rmtree(self.home, ignore_errors=True)
        log("stopped")
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m npa_pulumi.cloud.local.kube.agent")
    parser.add_argument("--cloud-dir", required=True, type=Path)
    parser.add_argument("--cluster", required=True)
    args = parser.parse_args(argv)
    home = controlplane.cluster_dir(args.cloud_dir, args.cluster)
    home.mkdir(parents=True, exist_ok=True)
    lock = (home / "agent.lock").open("a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
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
