"""`K8sTrainingCluster`: one k8s-training cluster, run through the Terraform bridge (`TerraformModule`).

It exposes what operators and later stages need: the mk8s cluster id and endpoint, node-group ids, the
shared-filesystem settings and the kube context name. The inputs policies read are listed in
docs/resource-contract.md; the capacity-block id is only ever held as a Pulumi secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi import Input

from npa_pulumi.bridge import tfstate
from npa_pulumi.components.args import FleetResourceArgs
from npa_pulumi.components.terraform_module import TerraformModule, TerraformModuleArgs
from npa_pulumi.plan.naming import kube_context_name


@dataclass(frozen=True, kw_only=True)
class K8sTrainingClusterArgs(FleetResourceArgs):
    cluster: str
    work_key: str  # the cluster stack's name: its Terraform work dir
    identity: Mapping[str, Input[str]]  # tenant_id, parent_id (the project), region, subnet_id
    tfvars: dict[str, Any]
    # Capacity-block reservations: Terraform sees them only at run time; never in a repr (nor the block id).
    runtime_tfvars: dict[str, Any] = field(repr=False)
    recipe: dict[str, str]  # source, location, digest
    recipe_facts: dict[str, Any]
    capacity_block_group: str = field(repr=False)
    gpu_driver_mode: str
    allow_unsafe_nvswitch_operator: bool
    nvswitch_topology: bool
    mig_enabled: bool
    # `adopt`: the Terraform state of the cluster as another tool deployed it (TerraformModuleArgs).
    adopted_state: str | None = field(default=None, repr=False)


# The outputs of upstream k8s-training's output.tf this component reads (tests/unit/components check that
# upstream declares each). Node groups and every other object it made come from its Terraform state.
READ_OUTPUTS = ("kube_cluster", "shared-filesystem")


def _cluster_id(outputs: dict[str, Any]) -> str:
    kube = outputs.get("kube_cluster") or {}
    return str(kube.get("id") or "") if isinstance(kube, dict) else ""


def _endpoint(outputs: dict[str, Any]) -> str:
    kube = outputs.get("kube_cluster") or {}
    endpoints = (kube.get("endpoints") or {}) if isinstance(kube, dict) else {}
    return str(endpoints.get("public_endpoint", "")) if isinstance(endpoints, dict) else ""


def _node_group_ids(tf_state: str | None) -> list[str]:
    """Upstream outputs no node-group ids: its state's node-group resources (bridge/tfstate.py), as the
    original reads them."""
    return tfstate.node_group_ids(tf_state)


def _live_objects(tf_state: str | None) -> dict[str, Any] | None:
    return tfstate.live_objects(tf_state) or None


def _filesystem(outputs: dict[str, Any], facts: Mapping[str, Any]) -> dict[str, Any]:
    """Upstream's `shared-filesystem` output, with the mount and attachments read from the recipe itself
    (bridge/facts.py)."""
    shared = outputs.get("shared-filesystem")
    if not isinstance(shared, dict) or not shared.get("id"):
        return {"id": "", "mount": None, "attachments": []}
    return {
        "id": str(shared["id"]),
        "mount": facts.get("filesystem_mount"),
        "attachments": list(facts.get("filesystem_attachments") or []),
    }


class K8sTrainingCluster(pulumi.ComponentResource):
    cluster_id: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    node_group_ids: pulumi.Output[list[str]]
    filesystem: pulumi.Output[dict[str, Any]]
    kube_context: pulumi.Output[str]
    live_objects: pulumi.Output[dict[str, Any] | None]

    def __init__(
        self, name: str, args: K8sTrainingClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(
            "npa:fleet:K8sTrainingCluster",
            name,
            {
                "fleet": args.fleet,
                "project_key": args.project_key,
                "cluster": args.cluster,
                "capacity_block_group": pulumi.Output.secret(args.capacity_block_group),
                "gpu_driver_mode": args.gpu_driver_mode,
                "allow_unsafe_nvswitch_operator": args.allow_unsafe_nvswitch_operator,
                "nvswitch_topology": args.nvswitch_topology,
                "mig_enabled": args.mig_enabled,
            },
            opts,
        )
        module = TerraformModule(
            f"{name}-terraform",
            TerraformModuleArgs(
                module_kind="k8s-training",
                cloud=args.cloud,
                profile=args.profile,
                fleet=args.fleet,
                project_key=args.project_key,
                cluster=args.cluster,
                work_key=args.work_key,
                identity=args.identity,
                identity_env=sorted(f"TF_VAR_{k}" for k in [*args.identity, "iam_token"]),
                tfvars=args.tfvars,
                runtime_tfvars=pulumi.Output.secret(args.runtime_tfvars),
                recipe=args.recipe,
                recipe_facts=args.recipe_facts,
                adopted_state=args.adopted_state,
            ),
            pulumi.ResourceOptions(parent=self),
        )
        outputs = module.outputs
        self.cluster_id = outputs.apply(lambda o: _cluster_id(o or {}))
        self.endpoint = outputs.apply(lambda o: _endpoint(o or {}))
        # Ids are not secret, though the state they may come from is.
        self.node_group_ids = pulumi.Output.unsecret(module.tf_state.apply(_node_group_ids))
        facts = dict(args.recipe_facts)
        self.filesystem = outputs.apply(lambda o: _filesystem(o or {}, facts))
        # What the recipe made (npa_pulumi/bridge/drift.py), from its Terraform state: status and up check it
        # for drift (ids only, never secret).
        self.live_objects = pulumi.Output.unsecret(module.tf_state.apply(_live_objects))
        self.kube_context = pulumi.Output.from_input(
            kube_context_name(args.fleet, args.project_key, args.cluster)
        )
        self.register_outputs(
            {
                "cluster_id": self.cluster_id,
                "endpoint": self.endpoint,
                "node_group_ids": self.node_group_ids,
                "filesystem": self.filesystem,
                "kube_context": self.kube_context,
                "live_objects": self.live_objects,
            }
        )
