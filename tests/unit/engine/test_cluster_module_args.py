"""One mapping of a cluster plan onto what its Terraform module runs with (engine/programs.py
`cluster_module_args`): the mk8s and soperator components take it as it is, and so does the provider's
input model the preview's Terraform plan reads."""

from __future__ import annotations

from npa_pulumi.bridge.recipe import PlannedRecipe, RecipeSource
from npa_pulumi.components.k8s_training_cluster import K8sTrainingClusterArgs
from npa_pulumi.components.soperator_cluster import SoperatorClusterArgs
from npa_pulumi.components.terraform_module import TerraformModuleInputs
from npa_pulumi.engine.programs import ClusterPlan, cluster_module_args
from npa_pulumi.spec.constants import BackendKind

BLOCK = "capacityblockgroup-e00secret77a1b2"
PLAN = ClusterPlan(
    fleet="f",
    project_key="p",
    project_stack="f.p",
    cluster_name="c",
    stack="f.p.c",
    region="eu-north1",
    tenant_id="tenant-e00t",
    backend=BackendKind.MK8S,
    tfvars={"gpu_nodes_count": 2},
    runtime_tfvars={"gpu_nodes_reservation_policy": {"policy": "STRICT", "reservation_ids": [BLOCK]}},
    recipe=PlannedRecipe(RecipeSource("dir", "/recipes/k8s-training"), "d"),
    capacity_block_group=BLOCK,
)


def test_the_components_and_the_preview_take_the_same_mapping() -> None:
    args = cluster_module_args(PLAN, "local", "", "project-e00p", "subnet-e00s")
    assert args["identity"] == {
        "tenant_id": "tenant-e00t",
        "parent_id": "project-e00p",
        "region": "eu-north1",
        "subnet_id": "subnet-e00s",
    }
    assert (args["work_key"], args["cluster"], args["tfvars"]) == ("f.p.c", "c", {"gpu_nodes_count": 2})
    mk8s = K8sTrainingClusterArgs(
        **args,
        recipe_facts={},
        capacity_block_group=PLAN.capacity_block_group,
        gpu_driver_mode="",
        allow_unsafe_nvswitch_operator=False,
        nvswitch_topology=False,
        mig_enabled=False,
    )
    assert BLOCK not in repr(mk8s) and mk8s.runtime_tfvars == PLAN.runtime_tfvars
    assert SoperatorClusterArgs(**args).identity == args["identity"]
    preview = TerraformModuleInputs.model_validate({**args, "module_kind": PLAN.module_kind})
    assert preview.work_key == "f.p.c" and preview.identity.parent_id == "project-e00p"
    assert BLOCK not in repr(PLAN)
