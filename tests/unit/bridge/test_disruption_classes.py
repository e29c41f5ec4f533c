"""Disruption classes of preview's changes, against a table of Terraform plan changes.

Every case is a `resource_changes` entry in the shape `terraform show -json PLANFILE` documents
(https://developer.hashicorp.com/terraform/internals/json-format: address, module_address, mode, type,
name, index, provider_name, change.{actions, before, after, after_unknown, before_sensitive,
after_sensitive}, action_reason) for the resource types upstream k8s-training declares (main.tf,
gpu_cluster.tf, filesystem.tf, gb300.tf, mig.tf, applications.tf, helm.tf and its modules), with the
attribute shapes those files give them. None comes from the product's own writer. The classes must
agree with the expected ones for every case (100 %)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from npa_pulumi.bridge.plan_summary import stack_disruption, summarize
from npa_pulumi.cloud.redaction import SENSITIVE

NEBIUS = "registry.terraform.io/nebius/nebius"
DIS, INP = "disruptive", "in-place"


def _group(name: str, version: str = "1.31", count: int = 2, **template: Any) -> dict[str, Any]:
    body = {
        "boot_disk": {"size_gibibytes": 1023, "type": "NETWORK_SSD"},
        "resources": {"platform": "gpu-h200-sxm", "preset": "8gpu-128vcpu-1600gb"},
        "gpu_settings": {"dra": False, "drivers_preset": "cuda12"},
        "metadata": {"labels": {}},
    }
    body.update(template)
    return {
        "name": name,
        "parent_id": "mk8scluster-e00abc",
        "version": version,
        "fixed_node_count": count,
        "labels": {"library-solution": "k8s-training"},
        "strategy": {"max_unavailable": {"count": 1}, "max_surge": {"count": 1}},
        "template": body,
    }


def change(
    address: str,
    rtype: str,
    actions: list[str],
    before: Any,
    after: Any,
    *,
    provider: str = NEBIUS,
    **extra: Any,
) -> dict[str, Any]:
    name = address.rsplit(".", 1)[-1].split("[", 1)[0]
    entry: dict[str, Any] = {
        "address": address,
        "mode": "managed",
        "type": rtype,
        "name": name,
        "provider_name": provider,
        "change": {
            "actions": actions,
            "before": before,
            "after": after,
            "after_unknown": {} if after is not None else False,
            "before_sensitive": {} if before is not None else False,
            "after_sensitive": {} if after is not None else False,
        },
    }
    if address.startswith("module."):
        entry["module_address"] = address.rsplit(".", 2)[0]
    last = address.rsplit(".", 1)[-1]
    if "[" in last:
        key = last.split("[", 1)[1].rstrip("]")
        entry["index"] = key.strip('"') if key.startswith('"') else int(key)
    entry.update(extra)
    return entry


NG = "nebius_mk8s_v1_node_group"
GPU0, GPU1, CPU = f"{NG}.gpu[0]", f"{NG}.gpu[1]", f"{NG}.cpu-only"
CLUSTER = "nebius_mk8s_v1_cluster.k8s-cluster"
CP: dict[str, Any] = {
    "control_plane": {
        "version": "1.31",
        "etcd_cluster_size": 3,
        "subnet_id": "vpcsubnet-e00x",
        "endpoints": {},
    }
}
FS: dict[str, Any] = {
    "name": "filesystem-tf-abc",
    "type": "NETWORK_SSD",
    "size_bytes": 1099511627776,
    "block_size_bytes": 4096,
}
RELEASE = "module.gpu-operator[0].nebius_applications_v1alpha1_k8s_release.this"


def _cp(version: str, **extra: Any) -> dict[str, Any]:
    return {"control_plane": {**CP["control_plane"], "version": version, **extra}}


def _sensitive_release(values: dict[str, Any]) -> dict[str, Any]:
    body = {"application_name": "gpu-operator", "namespace": "gpu-operator", "sensitive": values}
    return body


def _with_service_fields(entry: dict[str, Any]) -> dict[str, Any]:
    """`entry` as a real plan shows an update: the service's fields unknown until applied."""
    unknown = {"status": True, "updated_at": True, "resource_version": True}
    entry["change"]["after_unknown"] = {**entry["change"]["after_unknown"], **unknown}
    return entry


def _cloud_init_change(before_path: str, after_path: str) -> dict[str, Any]:
    def group(path: str) -> dict[str, Any]:
        body = _group("c")
        body["template"]["cloud_init_user_data"] = f"#cloud-config\nmounts: [[data, {path}, virtiofs]]\n"
        return body

    entry = change(CPU, NG, ["update"], group(before_path), group(after_path))
    masked = {"template": {"cloud_init_user_data": True}}
    entry["change"]["before_sensitive"] = entry["change"]["after_sensitive"] = masked
    return entry


CASES: list[tuple[str, list[dict[str, Any]], dict[str, str]]] = [
    ("ng-version", [change(CPU, NG, ["update"], _group("c"), _group("c", "1.32"))], {CPU: DIS}),
    ("gpu-ng-version", [change(GPU0, NG, ["update"], _group("g"), _group("g", "1.32"))], {GPU0: DIS}),
    (
        "ng-replace",
        [
            change(
                GPU0,
                NG,
                ["delete", "create"],
                _group("g"),
                _group("g2"),
                action_reason="replace_because_cannot_update",
            )
        ],
        {GPU0: DIS},
    ),
    (
        "ng-create-before-destroy",
        [
            change(
                GPU0,
                NG,
                ["create", "delete"],
                _group("g"),
                _group("g2"),
                action_reason="replace_because_tainted",
            )
        ],
        {GPU0: DIS},
    ),
    ("ng-delete", [change(GPU1, NG, ["delete"], _group("g"), None)], {GPU1: DIS}),
    ("ng-create", [change(GPU1, NG, ["create"], None, _group("g"))], {GPU1: INP}),
    (
        "driver-preset",
        [
            change(
                GPU0,
                NG,
                ["update"],
                _group("g"),
                _group("g", gpu_settings={"dra": False, "drivers_preset": "cuda13.0"}),
            )
        ],
        {GPU0: DIS},
    ),
    (
        "preset",
        [
            change(
                GPU0,
                NG,
                ["update"],
                _group("g"),
                _group("g", resources={"platform": "gpu-h200-sxm", "preset": "1gpu-16vcpu-200gb"}),
            )
        ],
        {GPU0: DIS},
    ),
    (
        "boot-disk",
        [
            change(
                CPU,
                NG,
                ["update"],
                _group("c"),
                _group("c", boot_disk={"size_gibibytes": 2048, "type": "NETWORK_SSD"}),
            )
        ],
        {CPU: DIS},
    ),
    ("scale-up", [change(CPU, NG, ["update"], _group("c", count=2), _group("c", count=4))], {CPU: INP}),
    ("scale-down", [change(CPU, NG, ["update"], _group("c", count=4), _group("c", count=2))], {CPU: DIS}),
    (
        "labels",
        [
            change(
                CPU,
                NG,
                ["update"],
                _group("c"),
                {**_group("c"), "labels": {"library-solution": "k8s-training", "team": "a"}},
            )
        ],
        {CPU: INP},
    ),
    (
        "strategy",
        [
            change(
                CPU,
                NG,
                ["update"],
                _group("c"),
                {**_group("c"), "strategy": {"max_unavailable": {"count": 2}}},
            )
        ],
        {CPU: INP},
    ),
    (
        "reshape",
        [
            change(GPU0, NG, ["update"], _group("g", count=2), _group("g", count=1)),
            change(GPU1, NG, ["create"], None, _group("g1", count=1)),
        ],
        {GPU0: DIS, GPU1: INP},
    ),
    (
        "cp-version",
        [change(CLUSTER, "nebius_mk8s_v1_cluster", ["update"], _cp("1.31"), _cp("1.32"))],
        {CLUSTER: DIS},
    ),
    (
        "cp-endpoint",
        [
            change(
                CLUSTER,
                "nebius_mk8s_v1_cluster",
                ["update"],
                _cp("1.31"),
                _cp("1.31", endpoints={"public_endpoint": {}}),
            )
        ],
        {CLUSTER: INP},
    ),
    (
        "cluster-replace",
        [
            change(
                CLUSTER,
                "nebius_mk8s_v1_cluster",
                ["delete", "create"],
                {**_cp("1.31"), "name": "a"},
                {**_cp("1.31"), "name": "b"},
            )
        ],
        {CLUSTER: DIS},
    ),
    (
        "fabric-replace",
        [
            change(
                "nebius_compute_v1_gpu_cluster.fabric_2[0]",
                "nebius_compute_v1_gpu_cluster",
                ["delete", "create"],
                {"infiniband_fabric": "fabric-2"},
                {"infiniband_fabric": "fabric-3"},
            )
        ],
        {"nebius_compute_v1_gpu_cluster.fabric_2[0]": DIS},
    ),
    (
        "filesystem-grow",
        [
            change(
                "nebius_compute_v1_filesystem.shared-filesystem[0]",
                "nebius_compute_v1_filesystem",
                ["update"],
                FS,
                {**FS, "size_bytes": 2 * FS["size_bytes"]},
            )
        ],
        {"nebius_compute_v1_filesystem.shared-filesystem[0]": INP},
    ),
    (
        "filesystem-delete",
        [
            change(
                "nebius_compute_v1_filesystem.shared-filesystem[0]",
                "nebius_compute_v1_filesystem",
                ["delete"],
                FS,
                None,
            )
        ],
        {"nebius_compute_v1_filesystem.shared-filesystem[0]": DIS},
    ),
    (
        "gpu-operator-marketplace",
        [
            {
                **change(
                    RELEASE,
                    "nebius_applications_v1alpha1_k8s_release",
                    ["update"],
                    _sensitive_release({"set": {"mig.strategy": "none"}, "version": "aa"}),
                    _sensitive_release({"set": {"mig.strategy": "mixed"}, "version": "bb"}),
                ),
            }
        ],
        {RELEASE: DIS},
    ),
    (
        "gpu-operator-custom-chart",
        [
            change(
                "module.gpu-operator-custom[0].helm_release.gpu-operator",
                "helm_release",
                ["update"],
                {"name": "gpu-operator", "chart": "gpu-operator", "version": "v25.10.0"},
                {"name": "gpu-operator", "chart": "gpu-operator", "version": "v26.3.3"},
                provider="registry.terraform.io/hashicorp/helm",
            )
        ],
        {"module.gpu-operator-custom[0].helm_release.gpu-operator": DIS},
    ),
    (
        "csi-chart",
        [
            change(
                "helm_release.filesystem_csi[0]",
                "helm_release",
                ["update"],
                {"name": "csi-mounted-fs-path", "version": "0.1.3"},
                {"name": "csi-mounted-fs-path", "version": "0.1.4"},
                provider="registry.terraform.io/hashicorp/helm",
            )
        ],
        {"helm_release.filesystem_csi[0]": INP},
    ),
    (
        "mig-reconciler",
        [
            change(
                "kubernetes_job_v1.mig_config_reconciler[0]",
                "kubernetes_job_v1",
                ["delete", "create"],
                {"metadata": {"name": "mig-config-reconciler"}, "spec": {"backoff_limit": 3}},
                {"metadata": {"name": "mig-config-reconciler"}, "spec": {"backoff_limit": 4}},
                provider="registry.terraform.io/hashicorp/kubernetes",
            )
        ],
        {"kubernetes_job_v1.mig_config_reconciler[0]": DIS},
    ),
    (
        "gb300-shrink",
        [
            change(
                'nebius_compute_v1_nvl_instance_group.gb300["0"]',
                "nebius_compute_v1_nvl_instance_group",
                ["update"],
                {"name": "c-gb300-0", "size": 18, "type": "GB300"},
                {"name": "c-gb300-0", "size": 9, "type": "GB300"},
            )
        ],
        {'nebius_compute_v1_nvl_instance_group.gb300["0"]': DIS},
    ),
    (
        "sa-create",
        [
            change(
                "nebius_iam_v1_service_account.k8s_node_group_sa[0]",
                "nebius_iam_v1_service_account",
                ["create"],
                None,
                {"name": "k8s-node-group-sa"},
            )
        ],
        {"nebius_iam_v1_service_account.k8s_node_group_sa[0]": INP},
    ),
    (
        "terraform-data",
        [
            change(
                "terraform_data.binpacking_scheduler_version[0]",
                "terraform_data",
                ["delete", "create"],
                {"input": "1.31.14"},
                {"input": "1.32.13"},
                provider="terraform.io/builtin/terraform",
            )
        ],
        {"terraform_data.binpacking_scheduler_version[0]": INP},
    ),
    (
        # A real plan (the local cloud's, Nebius's provider) marks what the service sets as known after apply
        # on every update: that must not make a labels-only change disruptive.
        "labels-with-service-fields",
        [
            _with_service_fields(
                change(
                    CPU,
                    NG,
                    ["update"],
                    {**_group("c"), "status": {"state": "RUNNING"}, "resource_version": "3"},
                    {**_group("c"), "labels": {"library-solution": "k8s-training", "team": "a"}},
                )
            )
        ],
        {CPU: INP},
    ),
    (
        # A pool scaled to zero whose template falls back to upstream's defaults (the renderer leaves an
        # empty pool's preset out).
        "scale-to-zero-with-template",
        [
            change(
                CPU,
                NG,
                ["update"],
                _group("c", count=2, resources={"platform": "cpu-d3", "preset": "4vcpu-16gb"}),
                _group("c", count=0, resources={"platform": "cpu-d3", "preset": "16vcpu-64gb"}),
            )
        ],
        {CPU: DIS},
    ),
    (
        # The CSI driver's chart and its storage-class annotations named after the filesystem go with it:
        # they drain nothing (the filesystem's own deletion is what loses data).
        "filesystem-csi-delete",
        [
            change(
                "helm_release.filesystem_csi[0]",
                "helm_release",
                ["delete"],
                {"name": "csi-mounted-fs-path", "version": "0.1.4"},
                None,
                provider="registry.terraform.io/hashicorp/helm",
            ),
            change(
                "kubernetes_annotations.filesystem_csi_promote_default_storage_class[0]",
                "kubernetes_annotations",
                ["delete"],
                {
                    "kind": "StorageClass",
                    "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
                },
                None,
                provider="registry.terraform.io/hashicorp/kubernetes",
            ),
        ],
        {
            "helm_release.filesystem_csi[0]": INP,
            "kubernetes_annotations.filesystem_csi_promote_default_storage_class[0]": INP,
        },
    ),
    (
        # The nodes' cloud-init user data is sensitive in the plan (it holds the SSH key): its change is
        # still a template change, read from the values `terraform show -json` holds.
        "cloud-init-sensitive",
        [_cloud_init_change("/mnt/data", "/mnt/shared")],
        {CPU: DIS},
    ),
]
# Changes the summary leaves out (a data source read, a no-op): nothing to class.
NOT_CHANGES = [
    {**change("data.nebius_vpc_v1_subnet.this", "nebius_vpc_v1_subnet", ["read"], None, {}), "mode": "data"},
    change(CPU, NG, ["no-op"], _group("c"), _group("c")),
]


def test_the_table_is_large_enough() -> None:
    assert sum(len(expected) for _, _, expected in CASES) >= 20


@pytest.mark.parametrize(("changes", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_classes_agree(changes: list[dict[str, Any]], expected: dict[str, str]) -> None:
    plan = {
        "format_version": "1.2",
        "terraform_version": "1.12.6",
        "resource_changes": copy.deepcopy(changes) + NOT_CHANGES,
    }
    summary = summarize(plan)
    found = {r["address"]: r["disruption"]["class"] for r in summary["resources"]}
    assert found == expected, [(r["address"], r["disruption"]) for r in summary["resources"]]
    for resource in summary["resources"]:
        assert resource["disruption"]["reason"]


def test_agreement_is_total() -> None:
    agree = total = 0
    for _, changes, expected in CASES:
        summary = summarize({"resource_changes": copy.deepcopy(changes)})
        for resource in summary["resources"]:
            total += 1
            agree += resource["disruption"]["class"] == expected[resource["address"]]
    assert total >= 20 and agree == total


def test_reasons_name_what_changed() -> None:
    (driver,) = summarize({"resource_changes": CASES[6][1]})["resources"]
    assert "driver preset" in driver["disruption"]["reason"]
    (scale,) = summarize({"resource_changes": CASES[10][1]})["resources"]
    assert scale["disruption"]["reason"] == "scale down by 2: those nodes are drained"
    (labels,) = summarize({"resource_changes": _case("labels-with-service-fields")})["resources"]
    assert labels["disruption"]["reason"] == "node group settings only (labels.team)"
    (cloud_init,) = summarize({"resource_changes": _case("cloud-init-sensitive")})["resources"]
    assert cloud_init["disruption"]["reason"] == (
        "node template change (template.cloud_init_user_data): every node re-created"
    )
    assert {"name": "template.cloud_init_user_data", "before": SENSITIVE, "after": SENSITIVE} in (
        cloud_init["attributes"]
    )
    assert "/mnt/shared" not in json.dumps(cloud_init)
    (zero,) = summarize({"resource_changes": _case("scale-to-zero-with-template")})["resources"]
    assert zero["disruption"]["reason"] == (
        "node template change (template.resources.preset): every node re-created; scale down by 2"
    )


def _case(name: str) -> list[dict[str, Any]]:
    (changes,) = [changes for case, changes, _ in CASES if case == name]
    return copy.deepcopy(changes)


MODULE = (
    "urn:pulumi:f-p-c::npa-fleet::npa:fleet:K8sTrainingCluster$pulumi-python:dynamic/npa:TerraformModule"
    "::c-terraform"
)
GATE = "urn:pulumi:f-p-c::npa-fleet::pulumi-python:dynamic/npa:GpuHealthGate::c-gpu-health"


def test_stack_class_from_the_diff_and_terraforms_plan() -> None:
    diff = [
        {
            "urn": MODULE,
            "type": "pulumi-python:dynamic/npa:TerraformModule",
            "op": "update",
            "diffs": ["tfvars"],
        },
        {"urn": GATE, "type": "pulumi-python:dynamic/npa:GpuHealthGate", "op": "update", "diffs": ["spec"]},
    ]
    plan = summarize({"resource_changes": CASES[0][1]})
    result = stack_disruption(diff, plan)
    assert result["class"] == DIS
    assert result["reasons"][0] == {
        "resource": CPU,
        "class": DIS,
        "reason": plan["resources"][0]["disruption"]["reason"],
    }
    assert result["reasons"][1]["class"] == INP
    in_place = stack_disruption(diff, summarize({"resource_changes": CASES[9][1]}))
    assert in_place["class"] == INP
    unread = stack_disruption(diff, {"error": "terraform plan failed"})
    assert unread["class"] == DIS and "not read" in unread["reasons"][0]["reason"]
    assert stack_disruption([], None) == {"class": "none", "reasons": []}
    deleted = stack_disruption(
        [{"urn": "urn:...::net", "type": "pulumi-python:dynamic/npa:Network", "op": "delete", "diffs": []}],
        None,
    )
    assert deleted["class"] == DIS
