"""Disruption classes checked against Terraform's own plans on the local cloud (issue 58: `preview` labels
change classes, 100 % agreement over at least 20 change cases).

One cluster (a CPU pool, an H200 pool on an InfiniBand fabric, a shared filesystem) is applied once by real
terraform against the local cloud's providers, outside the engine (upstream_support: the work dir the bridge
materializes). Each case then changes the spec a user writes, renders its tfvars with the product's renderer,
plans (`terraform plan -refresh=false -out`, the state is fresh) and reads the plan back (`terraform show
-json`); plan_summary classes every change and the classes are compared with the table below. The table's
classes are written from what each change does on Nebius (a node template change re-creates the group's
nodes, a version change rolls them, a filesystem only grows in place, ...), never from what the code prints.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml
from upstream_support import PROJECT, REGION, TENANT, LocalTerraform, Workspace, render

from npa_pulumi.bridge.plan_summary import stack_disruption, summarize

pytestmark = pytest.mark.integration

DIS, INP = "disruptive", "in-place"
NAME = "train"
NG = "nebius_mk8s_v1_node_group"
CPU, GPU0, GPU1 = f"{NG}.cpu-only", f"{NG}.gpu[0]", f"{NG}.gpu[1]"
CLUSTER = "nebius_mk8s_v1_cluster.k8s-cluster"
FABRIC = "nebius_compute_v1_gpu_cluster.fabric_2[0]"
FILESYSTEM = "nebius_compute_v1_filesystem.shared-filesystem[0]"
RELEASE = "nebius_applications_v1alpha1_k8s_release.this"
OPERATOR, PLUGIN = f"module.gpu-operator[0].{RELEASE}", f"module.device-plugin[0].{RELEASE}"
# The filesystem's CSI driver (a chart) and the storage-class annotations that make it the default.
CSI = "helm_release.filesystem_csi[0]"
DEMOTE = "kubernetes_annotations.filesystem_csi_demote_previous_default_storage_class[0]"
PROMOTE = "kubernetes_annotations.filesystem_csi_promote_default_storage_class[0]"

# The cluster every case starts from (applied once).
BASE: dict[str, Any] = {
    "name": NAME,
    "k8s_version": "1.32",
    "cpu_nodes": {"count": 2, "platform": "cpu-d3", "preset": "4vcpu-16gb"},
    "gpu_nodes": {"count": 2, "platform": "gpu-h200-sxm", "preset": "8gpu-128vcpu-1600gb"},
    "enable_gpu_cluster": True,
    "infiniband_fabric": "fabric-local",
    "enable_filestore": True,
    "filestore_disk_size_gibibytes": 256,
}
NO_GPUS = {"gpu_nodes": None, "enable_gpu_cluster": None, "infiniband_fabric": None}


@dataclass(frozen=True)
class Case:
    """A change of the spec (merged into BASE; None removes a key), the class each resource Terraform
    changes must get with a fragment of its reason, and why, on Nebius."""

    name: str
    change: dict[str, Any]
    expected: dict[str, tuple[str, str]] = field(default_factory=dict)
    why: str = ""


CASES = [
    Case("unchanged", {}, {}, "the applied spec again: Terraform plans nothing"),
    Case(
        "health-gate-only",
        {"gpu_health_timeout_minutes": 45},
        {},
        "the health gate is the fleet's own step, not a Terraform input",
    ),
    Case(
        "cpu-scale-up",
        {"cpu_nodes": {"count": 3}},
        {CPU: (INP, "scale up by 1")},
        "a node is added; none is touched",
    ),
    Case(
        "cpu-scale-down",
        {"cpu_nodes": {"count": 1}},
        {CPU: (DIS, "scale down by 1")},
        "the removed node is drained",
    ),
    Case(
        "cpu-pool-to-zero",
        {"cpu_nodes": {"count": 0}},
        # The renderer leaves an empty pool's platform and preset out: upstream's defaults change the template
        # too, and the reason must still say the nodes are drained.
        {CPU: (DIS, "scale down by 2")},
        "both CPU nodes are drained (upstream keeps the empty group)",
    ),
    Case(
        "gpu-scale-up",
        {"gpu_nodes": {"count": 3}},
        {GPU0: (INP, "scale up by 1")},
        "a fabric-coupled pool stays one group: one node added",
    ),
    Case(
        "gpu-scale-down",
        {"gpu_nodes": {"count": 1}},
        {GPU0: (DIS, "scale down by 1")},
        "the removed GPU node is drained",
    ),
    Case(
        "gpu-pool-removed",
        NO_GPUS,
        {
            GPU0: (DIS, "node group deleted"),
            FABRIC: (DIS, "InfiniBand GPU cluster is deleted"),
            # Upstream installs the GPU Operator whenever the driverfull image is off: on a cluster without
            # GPU nodes it drains nothing, and the device plugin leaves with the nodes it served.
            OPERATOR: (INP, "creates"),
            PLUGIN: (INP, "no node drained"),
        },
        "the GPU nodes are drained and deleted; the fabric they were on goes",
    ),
    Case(
        "gpu-platform",
        {"gpu_nodes": {"platform": "gpu-h100-sxm"}},
        {GPU0: (DIS, "template.resources.platform")},
        "a node template change: Nebius re-creates every node of the group",
    ),
    Case(
        "gpu-single-gpu-preset",
        {"gpu_nodes": {"preset": "1gpu-16vcpu-200gb"}, "enable_gpu_cluster": False, "infiniband_fabric": ""},
        {
            GPU0: (DIS, "template.resources.preset"),
            FABRIC: (DIS, "InfiniBand GPU cluster is deleted"),
        },
        "a single-GPU preset has no fabric: the nodes are re-created off it and the fabric goes",
    ),
    Case(
        "gpu-preemptible",
        {"gpu_nodes": {"preemptible": True}},
        {GPU0: (DIS, "template.preemptible")},
        "preemptibility is part of the node template: every node re-created",
    ),
    Case(
        "gpu-boot-disk",
        {"gpu_disk_size_gib": 2048},
        {GPU0: (DIS, "template.boot_disk")},
        "a boot disk is made with the node: every node re-created",
    ),
    Case(
        "cpu-preset",
        {"cpu_nodes": {"preset": "8vcpu-32gb"}},
        {CPU: (DIS, "template.resources.preset")},
        "a node template change: every CPU node re-created",
    ),
    Case(
        "cpu-platform",
        {"cpu_nodes": {"platform": "cpu-e2"}},
        {CPU: (DIS, "template.resources.platform")},
        "a node template change: every CPU node re-created",
    ),
    Case(
        "cpu-boot-disk",
        {"cpu_nodes": {"disk_size_gib": 256}},
        {CPU: (DIS, "template.boot_disk")},
        "a boot disk is made with the node: every CPU node re-created",
    ),
    Case(
        "cpu-preemptible",
        {"cpu_nodes": {"preemptible": True}},
        {CPU: (DIS, "template.preemptible")},
        "preemptibility is part of the node template: every CPU node re-created",
    ),
    Case(
        "k8s-minor",
        {"k8s_version": "1.33"},
        {
            CLUSTER: (DIS, "control-plane Kubernetes version"),
            CPU: (DIS, "Kubernetes version change"),
            GPU0: (DIS, "Kubernetes version change"),
        },
        "the control plane moves a minor; each node group follows, rolling its nodes",
    ),
    Case(
        "k8s-minor-gpu-pinned",
        {"k8s_version": "1.33", "gpu_nodes": {"pin": True, "version": "1.32"}},
        {
            CLUSTER: (DIS, "control-plane Kubernetes version"),
            CPU: (DIS, "Kubernetes version change"),
        },
        "the pinned GPU pool stays where it is; the control plane and the CPU pool move",
    ),
    Case(
        "gpu-pin-at-cluster-version",
        {"gpu_nodes": {"pin": True, "version": "1.32"}},
        {},
        "pinning a pool at the version it runs changes nothing",
    ),
    Case(
        "driver-preset",
        {"managed_driver_preset": "cuda12"},
        {GPU0: (DIS, "driver preset change")},
        "the managed image's driver changes: every GPU node re-created on the new image",
    ),
    Case(
        "driver-mode-operator",
        {"gpu_driver_mode": "operator", "allow_unsafe_nvswitch_operator": True},
        {
            GPU0: (DIS, "driver preset change"),
            OPERATOR: (INP, "creates"),
            PLUGIN: (INP, "no node drained"),
        },
        "driverless nodes replace the driverfull ones (re-created); the GPU Operator is installed for them",
    ),
    Case(
        "fabric-changed",
        {"infiniband_fabric": "fabric-local-2"},
        {
            FABRIC: (DIS, "InfiniBand GPU cluster is replaced"),
            GPU0: (DIS, "template.gpu_cluster"),
        },
        "a GPU cluster's fabric cannot change: a new one, and every node re-created into it",
    ),
    Case(
        "fabric-off",
        {"enable_gpu_cluster": False, "infiniband_fabric": None},
        {
            FABRIC: (DIS, "InfiniBand GPU cluster is deleted"),
            GPU0: (DIS, "template.gpu_cluster"),
        },
        "the nodes are re-created off the fabric, which is deleted",
    ),
    Case(
        "capacity-block",
        {"gpu_nodes": {"capacity_block_group": "capacityblockgroup-local2"}},
        {GPU0: (DIS, "template.reservation_policy")},
        "nodes move onto reserved capacity: a node template change re-creates them",
    ),
    Case(
        "capacity-block-reshape",
        {
            "gpu_nodes": {"capacity_block_group": "capacityblockgroup-local2"},
            "enable_gpu_cluster": False,
            "infiniband_fabric": None,
        },
        {
            GPU0: (DIS, "reshape"),
            GPU1: (INP, "new node group"),
            FABRIC: (DIS, "InfiniBand GPU cluster is deleted"),
        },
        "a reserved pool off the fabric is laid out one node a group: a node moves to a new group",
    ),
    Case(
        "filestore-grow",
        {"filestore_disk_size_gibibytes": 512},
        {
            FILESYSTEM: (INP, "no node drained"),
            # Upstream gives the CPU group's template the filesystem's size: a new template, new nodes.
            CPU: (DIS, "template.filesystems"),
        },
        "Nebius grows a filesystem online; the CPU group's template carries its size, so it rolls",
    ),
    Case(
        "filestore-off",
        {"enable_filestore": False},
        {
            FILESYSTEM: (DIS, "its data is lost"),
            CPU: (DIS, "template."),
            GPU0: (DIS, "template."),
            # Uninstalling the CSI driver and its storage-class defaults drains no node; the data goes
            # with the filesystem itself.
            CSI: (INP, "no node drained"),
            DEMOTE: (INP, "no node drained"),
            PROMOTE: (INP, "no node drained"),
        },
        "the filesystem and its data go; both groups' nodes are re-created without the mount",
    ),
    Case(
        "filestore-mount-path",
        {"filestore_mount_path": "/mnt/shared"},
        {
            CPU: (DIS, "template.cloud_init_user_data"),
            GPU0: (DIS, "template.cloud_init_user_data"),
            # The CSI driver's data directory follows the mount path: its pods restart, mounts stay.
            CSI: (INP, "no node drained"),
        },
        "the mount is made by the nodes' cloud-init (sensitive in the plan): every node re-created",
    ),
]


def _merged(base: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in change.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def spec_of(cluster: dict[str, Any]) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "npa.fleet/v0.0.1",
            "name": "disruption",
            "tenant_id": TENANT,
            "region": REGION,
            "projects": [{"project_id": PROJECT, "clusters": [cluster]}],
        },
        sort_keys=False,
    )


@pytest.fixture(scope="module")
def applied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    workspace = LocalTerraform(tmp_path_factory.mktemp("disruption")).workspace(spec_of(BASE), NAME)
    started = time.monotonic()
    workspace.apply()
    print(f"apply: {time.monotonic() - started:.1f} s")
    # Each case plans with its own rendered variables (-var-file), none inherited from the applied ones.
    (workspace.directory / "terraform.tfvars.json").unlink()
    yield workspace


def _plan(workspace: Workspace, case: Case) -> dict[str, Any]:
    """Terraform's plan of the case's spec, summarized as a preview summarizes it."""
    rendered = render(spec_of(_merged(BASE, case.change)), NAME, workspace.recipe_variables)
    variables = workspace.directory / f"case-{case.name}.tfvars.json"
    variables.write_text(json.dumps(rendered.file_vars, indent=2))
    plan_file = workspace.directory / f"case-{case.name}.tfplan"
    env = workspace.env_for(rendered)
    workspace.terraform(
        "plan",
        "-input=false",
        "-lock=false",
        "-refresh=false",
        f"-var-file={variables}",
        f"-out={plan_file}",
        env=env,
    )
    shown = workspace.terraform("show", "-json", str(plan_file), env=env)
    summary: dict[str, Any] = summarize(json.loads(shown.stdout))
    return summary


MODULE_UPDATE = [
    {
        "urn": f"urn:pulumi:s::npa-fleet::pulumi-python:dynamic/npa:TerraformModule::{NAME}-terraform",
        "type": "pulumi-python:dynamic/npa:TerraformModule",
        "op": "update",
    }
]


def _disagreements(case: Case, summary: dict[str, Any]) -> list[str]:
    found = {str(r["address"]): r["disruption"] for r in summary["resources"]}
    problems = [f"{address}: not in the plan" for address in sorted(set(case.expected) - set(found))]
    for address, disruption in sorted(found.items()):
        if address not in case.expected:
            problems.append(f"{address}: unexpected change, classed {disruption}")
            continue
        want, fragment = case.expected[address]
        if disruption["class"] != want or fragment not in disruption["reason"]:
            problems.append(f"{address}: {disruption} (expected {want}, reason with {fragment!r})")
    # The cluster's class in the preview: disruptive when any change is.
    want_stack = DIS if any(c == DIS for c, _ in case.expected.values()) else INP
    stack = stack_disruption(MODULE_UPDATE, summary)["class"]
    if stack != want_stack:
        problems.append(f"the cluster is classed {stack}, expected {want_stack}")
    return problems


def test_the_table_covers_at_least_twenty_changes() -> None:
    changes = [case for case in CASES if case.expected]
    assert len(changes) >= 20, len(changes)
    assert all(case.why for case in CASES)
    assert len({case.name for case in CASES}) == len(CASES)


def test_preview_classes_agree_with_the_table_on_the_local_cloud(applied: Workspace) -> None:
    # Plans only read the state (-lock=false): a few at once keep the module's wall time small.
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=4) as pool:
        summaries = list(pool.map(lambda case: _plan(applied, case), CASES))
    print(f"{len(CASES)} plans: {time.monotonic() - started:.1f} s")
    disagreeing = {case.name: _disagreements(case, s) for case, s in zip(CASES, summaries, strict=True)}
    disagreeing = {name: problems for name, problems in disagreeing.items() if problems}
    resources = sum(len(s["resources"]) for s in summaries)
    agreement = (
        f"{len(CASES) - len(disagreeing)}/{len(CASES)} local-cloud change cases agree "
        f"({resources} resource changes classed)"
    )
    print(agreement)  # shown with -s / -rP: the figure docs/upgrades.md quotes
    assert not disagreeing, agreement + "; disagreeing: " + json.dumps(disagreeing, indent=2)
