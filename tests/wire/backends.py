"""Backends for the shared scenario suite: the same scenarios, against any `CloudPort` adapter.

A backend is an adapter plus the few things a scenario cannot do through the port: seeding an mk8s
cluster (the port can read and delete clusters, not create them). `nebius` runs through the loopback
gRPC fake; `local` (the embedded simulator, when `npa_pulumi.simulator.LocalCloud` exists) is seeded
from the same tenant fixture and creates clusters through its simulator-only operations.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest
import yaml

from .coverage import RecordingCloud
from .world import TENANT_FIXTURE, WireWorld, wire_world

REGION = "eu-north1"
GPU_PLATFORM = "gpu-h100-sxm"
GPU_PRESET = "8gpu-128vcpu-1600gb"


@dataclass(frozen=True)
class SeededCluster:
    cluster_id: str
    running_group: str  # 2 CPU nodes, all ready
    starved_group: str  # 4 on-demand GPU nodes where the GPU quota is 0: stays PROVISIONING
    filesystem_id: str
    gpu_cluster_id: str


@dataclass(frozen=True)
class SeededHoldings:
    """What a user could put into a project outside the fleet (a teardown must find each of it)."""

    instance_id: str
    disk_id: str
    registry_id: str
    group_id: str
    security_group_id: str  # a security group of the user's, in `network_id`


class Backend(Protocol):
    kind: str
    cloud: RecordingCloud
    tenant_id: str

    def seed_cluster(self, project_id: str) -> SeededCluster: ...
    def seed_holdings(self, project_id: str, network_id: str) -> SeededHoldings:
        """A VM, a disk, a container registry, an IAM group and a security group in the project."""
        ...

    def project_with_defaults(self, name: str, labels: dict[str, str]) -> str:
        """A project created as Nebius makes one: with its default network, default subnet and that
        network's default security group; its id."""
        ...

    def put_object(self, bucket_id: str, bucket_name: str, key: str) -> None:
        """Leave an object in a bucket, as a job's upload would."""
        ...


def local_available() -> bool:
    if importlib.util.find_spec("npa_pulumi.simulator.cloud") is None:
        return False
    module = importlib.import_module("npa_pulumi.simulator")
    return hasattr(module, "LocalCloud")


def backend_kinds() -> list[str]:
    return ["nebius", "local"] if local_available() else ["nebius"]


class WireBackend:
    kind = "nebius"

    def __init__(self, world: WireWorld) -> None:
        self.world = world
        self.cloud = RecordingCloud(world.cloud())
        self.tenant_id = world.tenant_id

    def seed_cluster(self, project_id: str) -> SeededCluster:
        fake = self.world.fake
        with fake.lock:
            cid = fake.add_cluster(project_id, "train-a", subnet_id="vpcsubnet-e00seeded")
            running = fake.add_node_group(cid, "cpu", target=2, ready=2)
            starved = fake.add_node_group(
                cid,
                "gpu",
                target=4,
                ready=0,
                state="PROVISIONING",
                platform=GPU_PLATFORM,
                preset=GPU_PRESET,
                quota_failure_on=("compute.instance.gpu.h100", 0, 4),
            )
            fs = fake.add_filesystem(project_id, "shared", 100)
            gpu = fake.add_gpu_cluster(project_id, "fabric", "fabric-3")
        return SeededCluster(cid, running, starved, fs, gpu)

    def put_object(self, bucket_id: str, bucket_name: str, key: str) -> None:
        with self.world.fake.lock:
            self.world.fake.objects.setdefault(bucket_name, {})[key] = b"data"

    def seed_holdings(self, project_id: str, network_id: str) -> SeededHoldings:
        fake = self.world.fake
        with fake.lock:
            return SeededHoldings(
                fake.add_instance(project_id, "users-vm"),
                fake.add_disk(project_id, "users-disk", 64),
                fake.add_registry(project_id, "users-registry"),
                fake.add_group(project_id, "users-group"),
                fake.add_security_group(project_id, network_id, "users-sg"),
            )

    def project_with_defaults(self, name: str, labels: dict[str, str]) -> str:
        project = self.cloud.inner.create_project(self.tenant_id, name, REGION, labels=labels)
        network = self.cloud.inner.create_network(project.id, "default-network")
        self.cloud.inner.create_subnet(project.id, network.id, "default-subnet-wire")
        fake = self.world.fake
        with fake.lock:
            fake.add_security_group(project.id, network.id, "default-security-group-wire", default=True)
        return str(project.id)


class LocalBackend:
    kind = "local"

    def __init__(self, directory: Path) -> None:
        local = importlib.import_module("npa_pulumi.simulator")
        fixture = directory.parent / "tenant.yaml"
        fixture.write_text(yaml.safe_dump(TENANT_FIXTURE), encoding="utf-8")
        local.LocalSimulator(directory, auto_init=False).initialise(fixture)
        self.inner: Any = local.LocalCloud(directory, auto_init=False)
        self.cloud = RecordingCloud(self.inner)
        self.tenant_id = TENANT_FIXTURE["tenant_id"]

    def seed_cluster(self, project_id: str) -> SeededCluster:
        cloud = self.inner
        network = cloud.create_network(project_id, "seed-net")
        subnet = cloud.create_subnet(project_id, network.id, "seed-subnet")
        cluster = cloud.create_cluster(project_id, "train-a", subnet.id, k8s_version="1.31")
        running = cloud.create_node_group(cluster.id, "cpu", 2, "cpu-d3", "4vcpu-16gb")
        starved = cloud.create_node_group(cluster.id, "gpu", 4, GPU_PLATFORM, GPU_PRESET)
        fs = cloud.create_filesystem(project_id, "shared", 100 * 1024**3)
        gpu = cloud.create_gpu_cluster(project_id, "fabric", "fabric-3")
        return SeededCluster(cluster.id, running.id, starved.id, fs.id, gpu.id)

    def put_object(self, bucket_id: str, bucket_name: str, key: str) -> None:
        self.inner.simulator.put_object(bucket_id, key, "data")

    def seed_holdings(self, project_id: str, network_id: str) -> SeededHoldings:
        simulator = self.inner.simulator
        return SeededHoldings(
            simulator.create_instance(project_id, "users-vm")["id"],
            simulator.create_disk(project_id, "users-disk", 64 * 1024**3)["id"],
            simulator.create_registry(project_id, "users-registry")["id"],
            simulator.create_group(project_id, "users-group")["id"],
            simulator.create_security_group(project_id, network_id, "users-sg")["id"],
        )

    def project_with_defaults(self, name: str, labels: dict[str, str]) -> str:
        simulator = self.inner.simulator
        simulator.set_setting("project_default_network", 1)  # as Nebius does
        try:
            return str(simulator.create_project(self.tenant_id, name, REGION, labels)["id"])
        finally:
            simulator.set_setting("project_default_network", 0)


@contextmanager
def open_backend(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    if kind == "nebius":
        with wire_world(tmp_path, monkeypatch) as world:
            yield WireBackend(world)
        return
    directory = tmp_path / "local-cloud"
    monkeypatch.setenv("NPA_LOCAL_CLOUD_DIR", str(directory))
    try:
        yield LocalBackend(directory)
    finally:
        from npa_pulumi.simulator import seaweedd

        seaweedd.stop(directory)  # the S3 server a scenario started (an object written) outlives nothing
