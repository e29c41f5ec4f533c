"""The stand-in recipe `recipes/local-k8s-training`, applied and destroyed with real terraform (or tofu)
against the local cloud, with tfvars rendered by the product's own renderer from fleet specs. The
simulator's inventory is checked after every step."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from npa_pulumi.plan import read_recipe_variables, render_tfvars, resolve_targets
from npa_pulumi.runtime.retry import DEFAULT_ATTEMPTS
from npa_pulumi.runtime.toolchain import find_terraform
from npa_pulumi.simulator import LocalSimulator
from npa_pulumi.spec.parse import parse_spec

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "local-k8s-training"
SHORT_TENANT = REPO / "examples" / "local-tenant-short.yaml"
TENANT = "tenant-local"
REGION = "us-central1"
PROJECT = "project-existing1"
GIB = 2**30

SPEC = """
apiVersion: npa.fleet/v0.0.1
name: recipe-test
tenant_id: tenant-local
region: us-central1
projects:
  - project_id: project-existing1
    clusters:
      - name: cpu-only
        cpu_nodes: {count: 2, platform: cpu-d3, preset: 4vcpu-16gb}
        gpu_nodes: {count: 0}
        enable_filestore: false
      - name: reserved
        cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
        gpu_nodes: {count: 2, platform: gpu-rtx6000, preset: 2gpu-48vcpu-436gb,
                    capacity_block_group: capacityblockgroup-local1}
        enable_filestore: false
      - name: shared
        cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb, disk_size_gib: 200}
        gpu_nodes: {count: 1, platform: gpu-h200-sxm, preset: 8gpu-128vcpu-1600gb}
        enable_gpu_cluster: true
        infiniband_fabric: fabric-local
        enable_filestore: true
        filestore_disk_size_gibibytes: 256
        filestore_mount_path: /mnt/shared
        filestore_mount_tag: shared
      - name: starved
        cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
        gpu_nodes: {count: 2, platform: gpu-h200-sxm, preset: 8gpu-128vcpu-1600gb}
        enable_gpu_cluster: false
        enable_filestore: false
"""


def _rendered(cluster: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """terraform.tfvars.json and the runtime TF_VARs the product renders for one cluster of SPEC."""
    (target,) = [t for t in resolve_targets(parse_spec(SPEC)) if t.cluster_name == cluster]
    rendered = render_tfvars(target, read_recipe_variables(RECIPE))
    assert rendered.omitted == []  # the stand-in declares everything the renderer emits
    return rendered.file_vars, rendered.runtime_vars


@dataclass
class Workspace:
    """One cluster's terraform work dir, as the bridge materialises it."""

    directory: Path
    env: dict[str, str]
    simulator: LocalSimulator

    def terraform(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(find_terraform()), *args],
            cwd=self.directory,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if check:
            assert result.returncode == 0, f"terraform {args[0]} failed:\n{result.stdout}\n{result.stderr}"
        return result

    def apply(self, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.terraform("apply", "-auto-approve", "-input=false", "-no-color", check=check)

    def destroy(self) -> None:
        self.terraform("destroy", "-auto-approve", "-input=false", "-no-color")

    def outputs(self) -> dict[str, Any]:
        raw = json.loads(self.terraform("output", "-json").stdout)
        return {name: value["value"] for name, value in raw.items()}

    def inventory(self) -> dict[str, list[dict[str, Any]]]:
        return self.simulator.inventory()

    def usage(self, name: str) -> int:
        (quota,) = [
            q
            for q in self.inventory()["quotas"]
            if (q["name"], q["region"], q["scope"]) == (name, REGION, "tenant")
        ]
        return int(quota["usage"] or 0)

    def block_usage(self, block_id: str) -> int:
        (block,) = [b for b in self.inventory()["capacity_block_groups"] if b["id"] == block_id]
        return int(block["usage"] or 0)


@pytest.fixture
def make_workspace(tmp_path: Path) -> Iterator[Any]:
    home = tmp_path / "home"
    home.mkdir()
    cli_config = tmp_path / "terraformrc"
    cli_config.write_text("")
    cloud_dir = tmp_path / "cloud"
    # A clean, offline, registry-free terraform: no inherited TF_* settings, an empty CLI config.
    base = {k: v for k, v in os.environ.items() if not k.startswith("TF_")}
    base.update(
        {
            "HOME": str(home),
            "TF_CLI_CONFIG_FILE": str(cli_config),
            "TF_IN_AUTOMATION": "1",
            "CHECKPOINT_DISABLE": "1",
            "NPA_PYTHON": sys.executable,
            "NPA_LOCAL_CLOUD_DIR": str(cloud_dir),
            "NPA_LOCAL_CLOUD_WAIT_TIMEOUT_S": "1.5",
        }
    )
    simulator = LocalSimulator(cloud_dir)
    created: list[Workspace] = []

    def make(cluster: str, fixture: Path | None = None, copy: str = "") -> Workspace:
        if fixture is not None:
            simulator.initialise(fixture, force=True)
        subnet = simulator.list_subnets(PROJECT)[0]["id"]
        directory = tmp_path / f"{cluster}{copy}" / "k8s-training"
        shutil.copytree(RECIPE, directory, ignore=shutil.ignore_patterns(".terraform*", "*.tfstate*"))
        file_vars, runtime_vars = _rendered(cluster)
        (directory / "terraform.tfvars.json").write_text(json.dumps(file_vars, indent=2))
        env = dict(base)
        identity = {"tenant_id": TENANT, "parent_id": PROJECT, "region": REGION, "subnet_id": subnet}
        env.update({f"TF_VAR_{k}": v for k, v in identity.items()})
        env["TF_VAR_iam_token"] = "npa-local-iam-token"
        env.update({f"TF_VAR_{k}": json.dumps(v) for k, v in runtime_vars.items()})  # JSON is valid HCL
        workspace = Workspace(directory, env, simulator)
        workspace.terraform("init", "-input=false", "-no-color")
        created.append(workspace)
        return workspace

    yield make


def _only(records: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    found = [r for r in records if all(r.get(k) == v for k, v in match.items())]
    assert len(found) == 1, (match, records)
    return found[0]


def test_cpu_only_cluster(make_workspace: Any) -> None:
    ws: Workspace = make_workspace("cpu-only")
    ws.apply()
    out = ws.outputs()
    inventory = ws.inventory()
    cluster = _only(inventory["mk8s_clusters"], name="cpu-only")
    assert cluster["id"] == out["cluster_id"] == out["kube_cluster"]["id"]
    assert cluster["state"] == "RUNNING" and cluster["project_id"] == PROJECT
    assert cluster["endpoint"] == out["endpoint"] == out["kube_cluster"]["endpoints"]["public_endpoint"]
    group = _only(inventory["node_groups"], cluster_id=cluster["id"])
    assert group["id"] == out["cpu_node_group_id"] and out["node_group_ids"] == [group["id"]]
    assert (group["name"], group["state"], group["ready_node_count"]) == ("cpu-only-ng-cpu", "RUNNING", 2)
    assert (group["platform"], group["preset"], group["disk_size_gib"]) == ("cpu-d3", "4vcpu-16gb", 128)
    # terraform leaves null outputs out of `output -json`
    assert out["gpu_node_group_ids"] == [] and out.get("gpu_cluster_id") is None
    assert out.get("filesystem_id") is None and out.get("filesystem_mount") is None
    assert out["filesystem_attachments"] == []
    assert inventory["filesystems"] == [] and inventory["gpu_clusters"] == []
    assert ws.usage("mk8s.cluster.count") == 1
    assert ws.usage("compute.instance.count") == 2
    assert ws.usage("compute.instance.non-gpu.vcpu") == 8
    assert ws.usage("vpc.allocation.count") == 4
    assert ws.usage("compute.disk.size.network-ssd") == 2 * 128 * GIB

    ws.destroy()
    inventory = ws.inventory()
    assert inventory["mk8s_clusters"] == [] and inventory["node_groups"] == []
    for name in (
        "mk8s.cluster.count",
        "compute.instance.count",
        "compute.instance.non-gpu.vcpu",
        "vpc.allocation.count",
    ):
        assert ws.usage(name) == 0


def test_reserved_gpu_cluster_draws_on_its_capacity_block(make_workspace: Any) -> None:
    ws: Workspace = make_workspace("reserved")
    assert json.loads(ws.env["TF_VAR_gpu_nodes_reservation_policy"])["policy"] == "STRICT"
    assert "capacityblockgroup-local1" not in (ws.directory / "terraform.tfvars.json").read_text()
    ws.apply()
    out = ws.outputs()
    inventory = ws.inventory()
    gpu_groups = [g for g in inventory["node_groups"] if g["platform"] == "gpu-rtx6000"]
    assert sorted(g["id"] for g in gpu_groups) == sorted(out["gpu_node_group_ids"])
    assert len(gpu_groups) == 2  # a reserved pool of 2 renders 1 node x 2 groups
    for group in gpu_groups:
        assert group["state"] == "RUNNING" and group["target_node_count"] == 1
        assert group["reservation_policy"] == "STRICT"
        assert group["reservation_ids"] == ["capacityblockgroup-local1"]
    assert ws.block_usage("capacityblockgroup-local1") == 4  # 2 nodes x 2 GPUs
    assert ws.usage("compute.instance.gpu.rtx6000") == 0  # not on-demand quota
    assert ws.usage("compute.instance.count") == 3
    assert set(out["node_group_ids"]) == {out["cpu_node_group_id"], *out["gpu_node_group_ids"]}

    ws.destroy()
    assert ws.block_usage("capacityblockgroup-local1") == 0
    assert ws.inventory()["node_groups"] == []


def test_filestore_cluster_mounts_the_shared_filesystem_everywhere(make_workspace: Any) -> None:
    ws: Workspace = make_workspace("shared")
    ws.apply()
    out = ws.outputs()
    inventory = ws.inventory()
    filesystem = _only(inventory["filesystems"], name="shared-filesystem")
    assert filesystem["id"] == out["filesystem_id"] == out["shared-filesystem"]["id"]
    assert filesystem["size_bytes"] == 256 * GIB and filesystem["state"] == "READY"
    assert out["filesystem_mount"] == {
        "path": "/mnt/shared", "tag": "shared", "fs_type": "virtiofs", "options": "defaults,nofail",
    }  # fmt: skip
    assert out["filesystem_attachments"] == [
        {"node_group": "cpu", "attach_mode": "READ_WRITE", "mount_tag": "shared"},
        {"node_group": "gpu", "attach_mode": "READ_WRITE", "mount_tag": "shared"},
    ]
    groups = inventory["node_groups"]
    assert len(groups) == 2
    for group in groups:
        (attachment,) = group["filesystems"]
        assert attachment["filesystem_id"] == filesystem["id"]
        assert (attachment["attach_mode"], attachment["mount_tag"]) == ("READ_WRITE", "shared")
        assert group["mount"]["options"] == "defaults,nofail" and group["mount"]["path"] == "/mnt/shared"
    gpu_cluster = _only(inventory["gpu_clusters"], fabric="fabric-local")
    assert gpu_cluster["id"] == out["gpu_cluster_id"]
    assert _only(groups, platform="gpu-h200-sxm")["gpu_cluster_id"] == gpu_cluster["id"]
    assert _only(groups, platform="cpu-d3")["disk_size_gib"] == 200
    assert ws.usage("compute.filesystem.count") == 1
    assert ws.usage("compute.filesystem.size.network-ssd") == 256 * GIB
    assert ws.usage("compute.gpucluster.count") == 1
    assert ws.usage("compute.instance.gpu.h200") == 8

    ws.destroy()
    inventory = ws.inventory()
    assert (
        inventory["filesystems"] == []
        and inventory["gpu_clusters"] == []
        and inventory["mk8s_clusters"] == []
    )
    for name in (
        "compute.filesystem.count",
        "compute.filesystem.size.network-ssd",
        "compute.gpucluster.count",
    ):
        assert ws.usage(name) == 0


def test_a_quota_starved_gpu_pool_fails_the_apply_naming_the_quota(make_workspace: Any) -> None:
    ws: Workspace = make_workspace("starved", fixture=SHORT_TENANT)  # no on-demand GPU quota
    failed = ws.apply(check=False)
    assert failed.returncode != 0
    message = " ".join((failed.stdout + failed.stderr).split())
    assert "stayed PROVISIONING" in message
    assert "QuotaFailure" in message and "compute.instance.gpu.h200" in message
    inventory = ws.inventory()
    assert [g["platform"] for g in inventory["node_groups"]] == ["cpu-d3"]  # the GPU group was removed
    assert len(inventory["mk8s_clusters"]) == 1
    assert ws.usage("compute.instance.gpu.h200") == 0

    ws.destroy()
    inventory = ws.inventory()
    assert inventory["mk8s_clusters"] == [] and inventory["node_groups"] == []
    assert ws.usage("compute.instance.count") == 0


def test_an_apply_refused_by_the_cloud_can_be_retried(make_workspace: Any) -> None:
    ws: Workspace = make_workspace("cpu-only")
    # A keyed create is retried on `unavailable`: only a fault outlasting every attempt fails the apply.
    ws.simulator.add_fault("create_cluster", "unavailable", count=DEFAULT_ATTEMPTS)
    failed = ws.apply(check=False)
    assert failed.returncode != 0
    assert "unavailable" in " ".join((failed.stdout + failed.stderr).split())
    assert ws.simulator.list_faults() == []  # every attempt was made
    assert ws.inventory()["mk8s_clusters"] == []
    ws.apply()  # the tainted resource is replaced
    (cluster,) = ws.inventory()["mk8s_clusters"]
    assert cluster["id"] == ws.outputs()["cluster_id"]
    ws.destroy()
    assert ws.inventory()["mk8s_clusters"] == []


def test_a_transient_unavailable_is_retried_within_the_apply(make_workspace: Any) -> None:
    ws: Workspace = make_workspace("cpu-only")
    ws.simulator.add_fault("create_cluster", "unavailable", count=2)
    ws.simulator.add_fault("create_node_group", "unavailable", count=1)
    applied = ws.apply()
    assert "retrying in" in applied.stdout + applied.stderr
    (cluster,) = ws.inventory()["mk8s_clusters"]
    (group,) = ws.inventory()["node_groups"]
    assert cluster["id"] == ws.outputs()["cluster_id"] and group["cluster_id"] == cluster["id"]
    assert ws.simulator.list_faults() == []


def test_an_apply_whose_state_was_lost_adopts_what_it_created(make_workspace: Any) -> None:
    """A run killed while a create provisioner waits never records its terraform_data. The keys are
    stable, so the next apply replays the same creates and gets the same objects: no orphan, no
    duplicate-name refusal."""
    ws: Workspace = make_workspace("shared")
    ws.apply()
    before = ws.inventory()
    first = ws.outputs()
    for path in ws.directory.glob("terraform.tfstate*"):
        path.unlink()  # as if the apply had been killed before Terraform wrote its state
    ws.apply()
    after = ws.inventory()
    for kind in ("mk8s_clusters", "node_groups", "filesystems", "gpu_clusters"):
        assert sorted(o["id"] for o in after[kind]) == sorted(o["id"] for o in before[kind]), kind
    assert ws.outputs() == first
    ws.destroy()
    after = ws.inventory()
    for kind in ("mk8s_clusters", "node_groups", "filesystems", "gpu_clusters"):
        assert after[kind] == [], kind


def test_two_owners_never_share_objects(make_workspace: Any) -> None:
    """The same cluster name in one project from two owners (stacks) is refused, not silently shared."""
    first: Workspace = make_workspace("cpu-only")
    first.env["TF_VAR_npa_idempotency_scope"] = "fleet-a.project.cpu-only"
    first.apply()
    second: Workspace = make_workspace("cpu-only", copy="-again")
    second.env["TF_VAR_npa_idempotency_scope"] = "fleet-b.project.cpu-only"
    refused = second.apply(check=False)
    assert refused.returncode != 0
    assert "already exists" in " ".join((refused.stdout + refused.stderr).split())
    assert len(first.inventory()["mk8s_clusters"]) == 1
