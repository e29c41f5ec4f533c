"""Allowance selection and interpretation (reference §5 "Allowances")."""

from __future__ import annotations

from typing import Any

import pytest

from npa_pulumi.cloud.port import QuotaAllowance
from npa_pulumi.preflight.allowances import (
    AllowanceError,
    AllowanceEvidence,
    evaluate_allowances,
    expected_units,
    select_allowance,
)

TENANT = "tenant-e00tenant"
PROJECT = "project-e00project"
R = "eu-north1"
MK8S = "mk8s.cluster.count"
DISK = "compute.disk.size.network-ssd"
VCPU = "compute.instance.non-gpu.vcpu"
GPU = "compute.instance.gpu.h200"


def qa(name: str = MK8S, **kw: Any) -> QuotaAllowance:
    fields: dict[str, Any] = {"region": R, "parent_id": TENANT, "limit": 10, "usage": 0}
    fields.update(kw)
    return QuotaAllowance(name=name, **fields)


def select(*records: QuotaAllowance, name: str = MK8S) -> AllowanceEvidence | None:
    return select_allowance(name, R, list(records), TENANT)


def test_exact_usage() -> None:
    ev = select(qa(limit=10, usage=3))
    assert ev is not None
    assert (ev.limit, ev.available, ev.source, ev.scope, ev.unit) == (10, 7, "exact", "tenant", "count")
    assert ev.shortfall(9) == 2
    assert ev.shortfall(7) == 0


def test_usage_above_limit_leaves_zero() -> None:
    ev = select(qa(limit=10, usage=12))
    assert ev is not None and ev.available == 0


def test_tenant_record_beats_unscoped_and_project_records() -> None:
    ev = select(
        qa(limit=1000, usage=0, parent_id=""),  # unscoped fallback
        qa(limit=500, usage=0, parent_id=PROJECT),  # a project only subdivides
        qa(limit=10, usage=4),
    )
    assert ev is not None
    assert (ev.available, ev.scope) == (6, "tenant")


def test_container_id_scopes_a_record_too() -> None:
    ev = select(qa(limit=5, usage=1, parent_id="", container_id=TENANT), qa(limit=99, parent_id=""))
    assert ev is not None and (ev.available, ev.scope) == (4, "tenant")


def test_unscoped_record_is_a_fallback_only() -> None:
    ev = select(qa(limit=20, usage=5, parent_id=""))
    assert ev is not None and (ev.available, ev.scope) == (15, "unscoped")


def test_project_scoped_records_alone_are_not_evidence() -> None:
    assert select(qa(limit=100, parent_id=PROJECT)) is None


def test_conflicting_parent_and_container_is_an_error() -> None:
    with pytest.raises(AllowanceError, match="conflicting container metadata"):
        select(qa(parent_id=TENANT, container_id=PROJECT))


def test_finite_beats_unlimited() -> None:
    ev = select(qa(limit=None, usage=None), qa(limit=4, usage=1))
    assert ev is not None and (ev.limit, ev.available) == (4, 3)


def test_unlimited_never_falls_short() -> None:
    ev = select(qa(limit=None, usage=None, unit=""))
    assert ev is not None
    assert ev.unlimited and ev.available is None and ev.source == "unlimited"
    assert ev.shortfall(10**18) == 0


def test_unlimited_tenant_next_to_finite_unscoped_is_ambiguous() -> None:
    with pytest.raises(AllowanceError, match="ambiguous scoped/unscoped"):
        select(qa(limit=None, usage=None), qa(limit=3, parent_id=""))


def test_unlimited_tenant_next_to_unlimited_unscoped_is_unlimited() -> None:
    ev = select(qa(limit=None, usage=None), qa(limit=None, usage=None, parent_id=""))
    assert ev is not None and ev.unlimited and ev.scope == "tenant"


def test_identical_finite_duplicates_are_accepted() -> None:
    ev = select(qa(id="a", limit=8, usage=2), qa(id="b", limit=8, usage=2))
    assert ev is not None and ev.available == 6


@pytest.mark.parametrize(
    "other",
    [
        {"limit": 9, "usage": 2},
        {"limit": 8, "usage": 3},
        {"limit": 8, "usage": None, "usage_percentage": 0.25},  # same availability, different evidence
    ],
)
def test_differing_finite_duplicates_are_ambiguous(other: dict[str, Any]) -> None:
    with pytest.raises(AllowanceError, match="ambiguous finite candidates"):
        select(qa(limit=8, usage=2), qa(**other))


def test_unlimited_duplicates_with_different_units_are_ambiguous() -> None:
    with pytest.raises(AllowanceError, match="ambiguous unlimited"):
        select(qa(name=VCPU, limit=None, unit="count"), qa(name=VCPU, limit=None, unit="vcpu"), name=VCPU)


def test_expected_units() -> None:
    assert expected_units(DISK) == {"byte"}
    assert expected_units("compute.filesystem.size.network-ssd") == {"byte"}
    assert expected_units("storage.bucket.size.enhanced-throughput") == {"byte"}
    assert expected_units(VCPU) == {"count", "vcpu"}
    assert expected_units(GPU) == {"count", "gpu"}
    assert expected_units("vpc.allocation.count") == {"count"}


@pytest.mark.parametrize(
    ("name", "unit", "accepted"),
    [
        (DISK, "byte", True),
        (DISK, "BYTE", True),
        (DISK, "count", False),
        (VCPU, "vcpu", True),
        (VCPU, "count", True),
        (VCPU, "gpu", False),
        (GPU, "gpu", True),
        (GPU, "count", True),
        (GPU, "vcpu", False),
        (MK8S, "vcpu", False),
        (MK8S, "", False),  # a finite record must say its unit
    ],
)
def test_units_are_validated(name: str, unit: str, accepted: bool) -> None:
    record = qa(name=name, unit=unit)
    if accepted:
        ev = select(record, name=name)
        assert ev is not None and ev.unit == unit.lower()
    else:
        with pytest.raises(AllowanceError, match="incompatible unit"):
            select(record, name=name)


def test_unlimited_may_omit_unit_but_not_contradict_it() -> None:
    ev = select(qa(name=DISK, limit=None, unit=""), name=DISK)
    assert ev is not None and ev.unlimited
    with pytest.raises(AllowanceError, match="incompatible unit"):
        select(qa(name=DISK, limit=None, unit="count"), name=DISK)


@pytest.mark.parametrize("state", ["", "ACTIVE", "STATE_ACTIVE"])
def test_active_states_are_accepted(state: str) -> None:
    ev = select(qa(state=state))
    assert ev is not None and ev.available == 10


@pytest.mark.parametrize("limit", [5, None])
def test_inactive_state_is_rejected(limit: int | None) -> None:
    with pytest.raises(AllowanceError, match="not active: SUSPENDED"):
        select(qa(state="SUSPENDED", limit=limit))


@pytest.mark.parametrize(
    ("pct", "available"),
    [
        (0.0, 10),
        (0.25, 7),  # floor(7.5)
        (0.3, 7),  # exact decimal arithmetic: 10 × 0.7 is 7, not 6.999…
        (0.71, 2),  # floor(2.9)
        (1.0, 0),
        (1.5, 0),  # above 1: consumption is over the limit
    ],
)
def test_usage_percentage(pct: float, available: int) -> None:
    ev = select(qa(limit=10, usage=None, usage_percentage=pct))
    assert ev is not None and (ev.available, ev.source) == (available, "fraction")


@pytest.mark.parametrize("pct", [-0.1, float("nan"), float("inf")])
def test_bad_usage_percentage_is_unusable(pct: float) -> None:
    with pytest.raises(AllowanceError, match="unusable capacity evidence"):
        select(qa(limit=10, usage=None, usage_percentage=pct))


def test_exact_usage_wins_over_percentage_and_state() -> None:
    ev = select(qa(limit=10, usage=1, usage_percentage=0.9, usage_state="NOT_USED"))
    assert ev is not None and (ev.available, ev.source) == (9, "exact")


@pytest.mark.parametrize("usage_state", ["NOT_USED", "USAGE_STATE_NOT_USED"])
def test_not_used_means_full_limit(usage_state: str) -> None:
    ev = select(qa(limit=10, usage=None, usage_state=usage_state))
    assert ev is not None and (ev.available, ev.source) == (10, "not-used")


@pytest.mark.parametrize("usage_state", ["", "USED"])
def test_no_usage_evidence_is_unusable(usage_state: str) -> None:
    with pytest.raises(AllowanceError, match="unusable capacity evidence"):
        select(qa(limit=10, usage=None, usage_state=usage_state))


def test_negative_numbers_are_unusable() -> None:
    with pytest.raises(AllowanceError, match="unusable"):
        select(qa(limit=-1))
    with pytest.raises(AllowanceError, match="unusable"):
        select(qa(usage=-1))


def test_evaluate_indexes_by_name_and_region_and_classifies_every_key() -> None:
    records = [
        qa(name=MK8S, limit=3, usage=1),
        qa(name=MK8S, region="us-central1", limit=100, usage=0),  # other region: irrelevant
        qa(name="compute.instance.count", region="us-central1", limit=100),  # wrong region for this key
        qa(name=DISK, unit="count"),  # bad unit
        qa(name="unrelated.quota", limit=0),
    ]
    required = [
        (MK8S, R),
        ("compute.instance.count", R),
        (DISK, R),
        ("vpc.network.count", R),
        ("vpc.route.count", R),
    ]
    lookup = evaluate_allowances(records, TENANT, required)
    assert lookup.found[(MK8S, R)].available == 2
    assert lookup.missing == {("compute.instance.count", R)}
    assert set(lookup.errors) == {(DISK, R)}
    assert "incompatible unit" in lookup.errors[(DISK, R)].reason
    assert lookup.unadvertised == {("vpc.network.count", R), ("vpc.route.count", R)}
    assert ("unrelated.quota", R) not in lookup.found


def test_optional_vpc_quota_advertised_finite_is_checked() -> None:
    lookup = evaluate_allowances(
        [qa(name="vpc.network.count", limit=1, usage=1)], TENANT, [("vpc.network.count", R)]
    )
    assert lookup.unadvertised == set()
    assert lookup.found[("vpc.network.count", R)].shortfall(1) == 1


def test_conflicting_scope_only_fails_its_own_key() -> None:
    records = [qa(name=MK8S, parent_id=TENANT, container_id=PROJECT), qa(name="compute.disk.count")]
    lookup = evaluate_allowances(records, TENANT, [(MK8S, R), ("compute.disk.count", R)])
    assert set(lookup.errors) == {(MK8S, R)}
    assert lookup.found[("compute.disk.count", R)].available == 10
