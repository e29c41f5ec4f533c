"""SDK messages -> normalised port records (built with the SDK's own message classes)."""

from __future__ import annotations

from typing import Any

import pytest
from nebius.api.google.rpc import Status
from nebius.api.nebius.capacity import v1 as capacity
from nebius.api.nebius.common import v1 as common
from nebius.api.nebius.iam import v1 as iam
from nebius.api.nebius.mk8s import v1 as mk8s
from nebius.api.nebius.quotas import v1 as quotas
from nebius.api.nebius.storage import v1 as storage
from nebius.base.protos.dynamic import REGISTRY

from npa_pulumi.cloud.nebius import convert

State = quotas.QuotaAllowanceStatus.State


def _packed(message: object) -> Any:
    return REGISTRY.pack_any(message)  # type: ignore[arg-type]


Usage = quotas.QuotaAllowanceStatus.UsageState


def allowance(limit: int | None, **status: object) -> object:
    spec = quotas.QuotaAllowanceSpec(region="eu-north1")
    if limit is not None:
        spec.limit = limit
    return quotas.QuotaAllowance(
        metadata=common.ResourceMetadata(id="qa-1", parent_id="tenant-a", name="compute.instance.count"),
        spec=spec,
        status=quotas.QuotaAllowanceStatus(**status),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("text", "value"), [("0.25", 0.25), ("1.5", 1.5), ("25%", 0.25), ("", None), ("x", None)]
)
def test_percentage(text: str, value: float | None) -> None:
    assert convert.percentage(text) == value


def test_words_lose_prefixes_and_unspecified() -> None:
    assert convert.word(State.STATE_ACTIVE, "STATE_") == "ACTIVE"
    assert convert.word(State.STATE_UNSPECIFIED, "STATE_") == ""
    assert convert.word(Usage.USAGE_STATE_NOT_USED, "USAGE_STATE_") == "NOT_USED"
    assert convert.storage_class_word(storage.StorageClass.ENHANCED_THROUGHPUT) == "enhanced_throughput"


def test_quota_with_exact_usage() -> None:
    q = convert.quota_allowance(
        allowance(100, state=State.STATE_ACTIVE, usage=7, unit="count", usage_state=Usage.USAGE_STATE_USED),
        "tenant-a",
    )
    assert (q.limit, q.usage, q.unit, q.state, q.usage_state) == (100, 7, "count", "ACTIVE", "USED")
    assert (q.parent_id, q.container_id, q.region) == ("tenant-a", "tenant-a", "eu-north1")


def test_quota_limit_zero_is_not_unlimited() -> None:
    assert convert.quota_allowance(allowance(0, state=State.STATE_ACTIVE), "t").limit == 0
    assert convert.quota_allowance(allowance(None, state=State.STATE_ACTIVE), "t").limit is None


def test_quota_usage_only_as_a_percentage() -> None:
    q = convert.quota_allowance(
        allowance(10, usage_percentage="1.2", usage_state=Usage.USAGE_STATE_USED), "t"
    )
    assert q.usage is None
    assert q.usage_percentage == pytest.approx(1.2)


def test_quota_unknown_usage_and_missing_status() -> None:
    assert (
        convert.quota_allowance(allowance(10, usage=0, usage_state=Usage.USAGE_STATE_UNKNOWN), "t").usage
        is None
    )
    bare = quotas.QuotaAllowance(
        metadata=common.ResourceMetadata(id="q", name="n"), spec=quotas.QuotaAllowanceSpec(region="r")
    )
    q = convert.quota_allowance(bare, "t")
    assert (q.usage, q.usage_percentage, q.unit, q.state) == (None, None, "", "")


def test_project_states_collapse_to_the_port_vocabulary() -> None:
    def project(state: object, suspension: object) -> object:
        return iam.Container(
            metadata=common.ResourceMetadata(id="project-1", parent_id="tenant-a", name="p"),
            spec=iam.ContainerSpec(region="eu-north1"),
            status=iam.ContainerStatus(container_state=state, suspension_state=suspension),  # type: ignore[arg-type]
        )

    p = convert.project(project(iam.State.SCHEDULED_FOR_DELETION, iam.SuspensionState.SUSPENDED))
    assert (p.state, p.suspension_state, p.tenant_id) == ("DELETING", "SUSPENDED", "tenant-a")
    assert convert.project(project(iam.State.PURGED, iam.SuspensionState.NONE)).state == "DELETED"
    assert (
        convert.project(
            project(iam.State.ACTIVE, iam.SuspensionState.SUSPENSION_STATE_UNSPECIFIED)
        ).suspension_state
        == "NONE"
    )


def test_capacity_block() -> None:
    block = capacity.CapacityBlockGroup(
        metadata=common.ResourceMetadata(id="cbg-1", parent_id="tenant-a"),
        status=capacity.CapacityBlockGroupStatus(
            region="eu-north1",
            resource_affinity=capacity.ResourceAffinity(
                compute_v1=capacity.ResourceAffinityComputeV1(platform="gpu-h200-sxm", fabric="fabric-7")
            ),
            state=capacity.CapacityBlockGroupStatus.State.STATE_ACTIVE,
            current_limit=32,
            usage=8,
            usage_state=capacity.CapacityBlockGroupStatus.UsageState.USAGE_STATE_USED,
        ),
    )
    b = convert.capacity_block_group(block)
    assert (b.platform, b.fabric, b.state, b.limit, b.usage, b.parent_id) == (
        "gpu-h200-sxm",
        "fabric-7",
        "ACTIVE",
        32,
        8,
        "tenant-a",
    )


def test_node_group_with_quota_failure_and_strict_reservation() -> None:
    failure = common.ServiceError(
        service="compute",
        code="QuotaFailure",
        quota_failure=common.QuotaFailure(
            violations=[
                common.QuotaFailure.Violation(
                    quota="compute.instance.gpu.h100", limit="0", requested="8", message="m"
                )
            ]
        ),
    )
    event = common.RecurrentResourceEvent(
        last_occurrence=common.ResourceEvent(
            code="QuotaFailure",
            message="quota exceeded",
            error=Status(code=8, message="quota exceeded", details=[_packed(failure)]),
        )
    )
    group = mk8s.NodeGroup(
        metadata=common.ResourceMetadata(id="ng-1", parent_id="cluster-1", name="gpu"),
        spec=mk8s.NodeGroupSpec(
            fixed_node_count=8,
            template=mk8s.NodeTemplate(
                resources=mk8s.ResourcesSpec(platform="gpu-h100-sxm", preset="8gpu-128vcpu-1600gb"),
                boot_disk=mk8s.DiskSpec(size_bytes=256 * 1024**3),
                reservation_policy=mk8s.ReservationPolicy(
                    policy=mk8s.ReservationPolicy.Policy.STRICT, reservation_ids=["cbg-1"]
                ),
            ),
        ),
        status=mk8s.NodeGroupStatus(state=mk8s.NodeGroupStatus.State.PROVISIONING, events=[event]),
    )
    ng = convert.node_group(group)
    assert (ng.state, ng.target_node_count, ng.ready_node_count, ng.cluster_id) == (
        "PROVISIONING",
        8,
        0,
        "cluster-1",
    )
    assert (ng.reservation_policy, ng.reservation_ids, ng.disk_size_gib, ng.preemptible) == (
        "STRICT",
        ("cbg-1",),
        256,
        False,
    )
    (cond,) = ng.conditions
    assert (cond.kind, cond.quota, cond.limit, cond.requested) == (
        "QuotaFailure",
        "compute.instance.gpu.h100",
        0,
        8,
    )


def test_node_group_without_reservation_has_no_policy() -> None:
    group = mk8s.NodeGroup(
        metadata=common.ResourceMetadata(id="ng-2", parent_id="c"),
        spec=mk8s.NodeGroupSpec(template=mk8s.NodeTemplate(preemptible=mk8s.PreemptibleSpec())),
        status=mk8s.NodeGroupStatus(target_node_count=3, ready_node_count=3),
    )
    ng = convert.node_group(group)
    assert (ng.reservation_policy, ng.preemptible, ng.target_node_count, ng.disk_size_gib) == ("", True, 3, 0)


def test_autoscaled_node_group_targets_its_minimum_until_status_says_otherwise() -> None:
    group = mk8s.NodeGroup(
        metadata=common.ResourceMetadata(id="ng-3", parent_id="c"),
        spec=mk8s.NodeGroupSpec(
            autoscaling=mk8s.NodeGroupAutoscalingSpec(min_node_count=2, max_node_count=6)
        ),
    )
    assert convert.node_group(group).target_node_count == 2
