"""`SoperatorCluster`: one soperator (Slurm-on-Kubernetes) cluster, the soperator recipe run through the
Terraform bridge (`TerraformModule`, module kind `soperator`).

It exposes what later stages need: the mk8s cluster id and endpoint, node-group ids, the shared
filesystems, the Slurm cluster the recipe installed and the kube context name. Identity reaches the recipe
only at run time, under the recipe's own names (npa_pulumi/bridge/soperator_recipe.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi import Input

from npa_pulumi.bridge.drift import LIVE_OBJECTS_OUTPUT
from npa_pulumi.bridge.soperator_recipe import IDENTITY_VARIABLES, MODULE_KIND
from npa_pulumi.components.args import FleetResourceArgs
from npa_pulumi.components.terraform_module import TerraformModule, TerraformModuleArgs
from npa_pulumi.plan.naming import kube_context_name


@dataclass(frozen=True, kw_only=True)
class SoperatorClusterArgs(FleetResourceArgs):
    cluster: str
    work_key: str  # the cluster stack's name: its Terraform work dir
    identity: Mapping[str, Input[str]]  # tenant_id, parent_id (the project), region, subnet_id
    tfvars: dict[str, Any]
    runtime_tfvars: dict[str, Any] = field(repr=False)  # the backups password: run time only
    recipe: dict[str, str]  # source, location, digest


def _node_group_ids(outputs: dict[str, Any]) -> list[str]:
    ids = outputs.get("node_group_ids")
    return [str(i) for i in ids] if isinstance(ids, list) else []


class SoperatorCluster(pulumi.ComponentResource):
    cluster_id: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    node_group_ids: pulumi.Output[list[str]]
    filestores: pulumi.Output[dict[str, Any]]
    slurm_cluster: pulumi.Output[dict[str, Any]]
    kube_context: pulumi.Output[str]
    live_objects: pulumi.Output[dict[str, Any] | None]

    def __init__(
        self, name: str, args: SoperatorClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(
            "npa:fleet:SoperatorCluster",
            name,
            {"fleet": args.fleet, "project_key": args.project_key, "cluster": args.cluster},
            opts,
        )
        module = TerraformModule(
            f"{name}-terraform",
            TerraformModuleArgs(
                module_kind=MODULE_KIND,
                cloud=args.cloud,
                profile=args.profile,
                fleet=args.fleet,
                project_key=args.project_key,
                cluster=args.cluster,
                work_key=args.work_key,
                identity=args.identity,
                identity_env=sorted(f"TF_VAR_{name}" for name in IDENTITY_VARIABLES),
                tfvars=args.tfvars,
                runtime_tfvars=pulumi.Output.secret(args.runtime_tfvars),
                recipe=args.recipe,
                recipe_facts={},
            ),
            pulumi.ResourceOptions(parent=self),
        )
        outputs = module.outputs
        self.cluster_id = outputs.apply(lambda o: str((o or {}).get("cluster_id") or ""))
        self.endpoint = outputs.apply(lambda o: str((o or {}).get("endpoint") or ""))
        self.node_group_ids = outputs.apply(lambda o: _node_group_ids(o or {}))
        self.filestores = outputs.apply(lambda o: dict((o or {}).get("filestores") or {}))
        self.slurm_cluster = outputs.apply(lambda o: dict((o or {}).get("slurm_cluster") or {}))
        self.live_objects = outputs.apply(lambda o: (o or {}).get(LIVE_OBJECTS_OUTPUT))
        self.kube_context = pulumi.Output.from_input(
            kube_context_name(args.fleet, args.project_key, args.cluster)
        )
        self.register_outputs(
            {
                "cluster_id": self.cluster_id,
                "endpoint": self.endpoint,
                "node_group_ids": self.node_group_ids,
                "filestores": self.filestores,
                "slurm_cluster": self.slurm_cluster,
                "kube_context": self.kube_context,
                "live_objects": self.live_objects,
            }
        )
