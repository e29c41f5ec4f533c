"""`K8sTrainingCluster`: one k8s-training cluster, run through the Terraform bridge (`TerraformModule`).

It exposes what operators and later stages need: the mk8s cluster id and endpoint, node-group ids, the
shared-filesystem settings and the kube context name. The inputs policies read are listed in
docs/resource-contract.md; the capacity-block id is only ever held as a Pulumi secret.
"""

from __future__ import annotations

from typing import Any

import pulumi
from npa_pulumi.components.terraform_module import TerraformModule

from npa_pulumi.naming import kube_context_name


def _cluster_id(outputs: dict[str, Any]) -> str:
    if outputs.get("cluster_id"):
        return str(outputs["cluster_id"])
    kube = outputs.get("kube_cluster") or {}
    return str(kube.get("id", ""))


def _endpoint(outputs: dict[str, Any]) -> str:
    if outputs.get("endpoint"):
        return str(outputs["endpoint"])
    endpoints = (outputs.get("kube_cluster") or {}).get("endpoints") or {}
    return str(endpoints.get("public_endpoint", "")) if isinstance(endpoints, dict) else ""


def _node_group_ids(outputs: dict[str, Any]) -> list[str]:
    ids = outputs.get("node_group_ids")
    if isinstance(ids, list):
        return [str(i) for i in ids]
    found = [outputs.get("cpu_node_group_id"), *(outputs.get("gpu_node_group_ids") or [])]
    return [str(i) for i in found if i]


class K8sTrainingCluster(pulumi.ComponentResource):
    cluster_id: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    node_group_ids: pulumi.Output[list[str]]
    filesystem: pulumi.Output[dict[str, Any]]
    kube_context: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        cloud: str,
        profile: str,
        fleet: str,
        project_key: str,
        cluster: str,
        work_key: str,
        identity: dict[str, pulumi.Input[str]],
        tfvars: dict[str, Any],
        runtime_tfvars: dict[str, Any],
        recipe: dict[str, str],
        recipe_facts: dict[str, Any],
        capacity_block_group: str,
        gpu_driver_mode: str,
        allow_unsafe_nvswitch_operator: bool,
        nvswitch_topology: bool,
        mig_enabled: bool,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(
            "npa:fleet:K8sTrainingCluster",
            name,
            {
                "fleet": fleet,
                "project_key": project_key,
                "cluster": cluster,
                "capacity_block_group": pulumi.Output.secret(capacity_block_group),
                "gpu_driver_mode": gpu_driver_mode,
                "allow_unsafe_nvswitch_operator": allow_unsafe_nvswitch_operator,
                "nvswitch_topology": nvswitch_topology,
                "mig_enabled": mig_enabled,
            },
            opts,
        )
        module = TerraformModule(
            f"{name}-terraform",
            {
                "module_kind": "k8s-training",
                "cloud": cloud,
                "profile": profile,
                "fleet": fleet,
                "project_key": project_key,
                "cluster": cluster,
                "work_key": work_key,
                "identity": identity,
                "identity_env": sorted(f"TF_VAR_{k}" for k in [*identity, "iam_token"]),
                "tfvars": tfvars,
                "runtime_tfvars": pulumi.Output.secret(runtime_tfvars),
                "recipe": recipe,
                "recipe_facts": recipe_facts,
            },
            pulumi.ResourceOptions(parent=self),
        )
        outputs = module.outputs
        self.cluster_id = outputs.apply(lambda o: _cluster_id(o or {}))
        self.endpoint = outputs.apply(lambda o: _endpoint(o or {}))
        self.node_group_ids = outputs.apply(lambda o: _node_group_ids(o or {}))
        self.filesystem = outputs.apply(
            lambda o: {
                "id": (o or {}).get("filesystem_id") or "",
                "mount": (o or {}).get("filesystem_mount"),
                "attachments": (o or {}).get("filesystem_attachments") or [],
            }
        )
        self.kube_context = pulumi.Output.from_input(kube_context_name(fleet, project_key, cluster))
        self.register_outputs(
            {
                "cluster_id": self.cluster_id,
                "endpoint": self.endpoint,
                "node_group_ids": self.node_group_ids,
                "kube_context": self.kube_context,
            }
        )
