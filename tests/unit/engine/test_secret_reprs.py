"""A capacity-block id never shows in a repr (a log line, a traceback, a debugger): not in the spec's
models, not in the engine's cluster plan, not in the cluster component's args."""

from __future__ import annotations

from npa_pulumi.components.k8s_training_cluster import K8sTrainingClusterArgs
from npa_pulumi.engine.programs import ClusterPlan
from npa_pulumi.spec.constants import BackendKind
from npa_pulumi.spec.models import NodePoolSpec

BLOCK = "capacityblockgroup-e00secretblock42"
RESERVATION = {"gpu_nodes_reservation_policy": {"policy": "STRICT", "reservation_ids": [BLOCK]}}


def test_the_spec_pool_hides_its_block() -> None:
    pool = NodePoolSpec(
        count=1, platform="gpu-h200-sxm", preset="8gpu-128vcpu-1600gb", capacity_block_group=BLOCK
    )
    assert pool.capacity_block_group == BLOCK
    assert BLOCK not in repr(pool) and BLOCK not in str(pool)


def test_the_cluster_plan_hides_its_block_and_reservation() -> None:
    plan = ClusterPlan(
        fleet="f",
        project_key="p",
        project_stack="f.p",
        cluster_name="c",
        stack="f.p.c",
        region="r",
        tenant_id="t",
        backend=BackendKind.MK8S,
        runtime_tfvars=RESERVATION,
        capacity_block_group=BLOCK,
    )
    assert plan.capacity_block_group == BLOCK
    assert BLOCK not in repr(plan)


def test_the_component_args_hide_their_block_and_reservation() -> None:
    args = K8sTrainingClusterArgs(
        cloud="local",
        profile="",
        fleet="f",
        project_key="p",
        cluster="c",
        work_key="f.p.c",
        identity={},
        tfvars={},
        runtime_tfvars=RESERVATION,
        recipe={},
        recipe_facts={},
        capacity_block_group=BLOCK,
        gpu_driver_mode="",
        allow_unsafe_nvswitch_operator=False,
        nvswitch_topology=False,
        mig_enabled=False,
    )
    assert BLOCK not in repr(args)
