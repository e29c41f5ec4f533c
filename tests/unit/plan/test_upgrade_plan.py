"""The offline upgrade plan: hops one minor at a time, the control plane before every node group, pinned
groups held, the skew invariants on every intermediate state, each refusal naming its object and version,
and the GPU-hours a drain costs."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npa_pulumi.plan.upgrade import (
    KUBELET_MAX_MINORS_BEHIND,
    Minor,
    NodeGroup,
    chain,
    max_minors_behind,
    parse_minor,
    upgrade_plan,
)
from npa_pulumi.spec import FleetSpec, parse_spec

AT = datetime(2026, 12, 9, 12, tzinfo=UTC)  # a Wednesday
CPU = {"count": 2, "platform": "cpu-d3", "preset": "16vcpu-64gb"}
H200 = {"count": 2, "platform": "gpu-h200-sxm", "preset": "8gpu-128vcpu-1600gb"}
RTX_MIG = {
    "count": 2,
    "platform": "gpu-rtx6000",
    "preset": "1gpu-24vcpu-218gb",
    "capacity_block_group": "cbg-x",
}


def spec(*clusters: dict[str, Any], maintenance: dict[str, Any] | None = None) -> FleetSpec:
    project: dict[str, Any] = {"name": "p", "clusters": list(clusters)}
    if maintenance is not None:
        project["maintenance"] = maintenance
    return parse_spec(
        json.dumps({"apiVersion": "npa.fleet/v0.0.1", "name": "f", "projects": [project]}), "s.yaml"
    )


def one(document: FleetSpec, **kwargs: Any) -> dict[str, Any]:
    plan = upgrade_plan(document, at=AT, **kwargs).to_dict()
    assert len(plan["clusters"]) == 1
    return plan["clusters"][0]  # type: ignore[no-any-return]


def test_versions_parse_as_the_nebius_provider_writes_them() -> None:
    assert parse_minor("1.33") == Minor(1, 33)
    assert parse_minor("1.33-nebius-node.2") == Minor(1, 33)
    assert parse_minor("1.33.4") is None and parse_minor("latest") is None
    assert max_minors_behind(Minor(1, 28)) == KUBELET_MAX_MINORS_BEHIND == 3
    assert max_minors_behind(Minor(1, 27)) == 2


def test_hops_one_minor_at_a_time_control_plane_first() -> None:
    cluster = one(
        spec(
            {
                "name": "train",
                "k8s_version": "1.30",
                "cpu_nodes": CPU,
                "gpu_nodes": H200,
                "infiniband_fabric": "f",
            }
        ),
        target="1.33",
    )
    assert cluster["status"] == "planned"
    assert [(h["from"], h["to"]) for h in cluster["hops"]] == [
        ("1.30", "1.31"),
        ("1.31", "1.32"),
        ("1.32", "1.33"),
    ]
    for hop in cluster["hops"]:
        names = [p["name"] for p in hop["phases"]]
        assert names == ["control plane", "train-ng-cpu", "train-ng-gpu-0"]
        assert all(p["to"] == hop["to"] for p in hop["phases"])
    # 2 nodes x 8 GPUs x 1h (the default drain time, flagged as assumed) per hop.
    assert cluster["gpu_hours_drained"] == 3 * 16
    assert cluster["drain_time_assumed"] is True
    # One check before, then one after every phase: 1 + 3 hops x 3 phases.
    assert cluster["invariant_checks"] == 10 and cluster["skew_violations"] == []


def test_a_pinned_pool_never_moves_and_drains_nothing() -> None:
    pinned = {**H200, "pin": True}
    cluster = one(
        spec(
            {
                "name": "train",
                "k8s_version": "1.30",
                "cpu_nodes": CPU,
                "gpu_nodes": pinned,
                "infiniband_fabric": "f",
            },
            maintenance={"drain_time": "30m"},
        ),
        target="1.33",
    )
    gpu_phases = [p for hop in cluster["hops"] for p in hop["phases"] if p["name"] == "train-ng-gpu-0"]
    assert gpu_phases and all(p["held"] and p["from"] == p["to"] == "1.30" for p in gpu_phases)
    assert cluster["gpu_hours_drained"] == 0 and cluster["skew_violations"] == []
    assert cluster["drain_hours_per_node"] == 0.5 and cluster["drain_time_assumed"] is False


def test_a_pin_beyond_the_skew_is_refused_naming_the_group_and_version() -> None:
    pinned = {**H200, "pin": True}
    cluster = one(
        spec({"name": "train", "k8s_version": "1.30", "gpu_nodes": pinned, "infiniband_fabric": "f"}),
        target="1.34",
    )
    assert cluster["status"] == "refused" and cluster["hops"] == []
    (refusal,) = cluster["refusals"]
    assert refusal["object"] == "node group train-ng-gpu-0 (pinned at 1.30)"
    assert refusal["version"] == "1.34" and "4 minors behind" in refusal["reason"]


def test_a_pinned_pool_s_own_version_is_where_it_is_held_and_judged() -> None:
    """A pin with a `version` (rendered by the default recipe's version override) starts there, behind its
    control plane: held at it through every hop, and refused when the target leaves it past the skew."""
    pinned = {**H200, "pin": True, "version": "1.31"}
    base = {
        "name": "train",
        "k8s_version": "1.32",
        "cpu_nodes": CPU,
        "gpu_nodes": pinned,
        "infiniband_fabric": "f",
    }
    cluster = one(spec(base), target="1.34")
    gpu_phases = [p for hop in cluster["hops"] for p in hop["phases"] if p["name"] == "train-ng-gpu-0"]
    assert len(gpu_phases) == 2 and all(p["held"] and p["from"] == p["to"] == "1.31" for p in gpu_phases)
    assert cluster["status"] == "planned" and cluster["skew_violations"] == []
    refused = one(spec(base), target="1.35")
    (refusal,) = refused["refusals"]
    assert (
        refusal["object"] == "node group train-ng-gpu-0 (pinned at 1.31)" and "4 minors" in refusal["reason"]
    )


def test_mig_pins_refuse_any_target_but_1_34() -> None:
    mig = {"name": "mig", "gpu_nodes": RTX_MIG, "mig": {}}
    cluster = one(spec(mig), target="1.35")
    assert cluster["status"] == "refused"
    assert cluster["refusals"][0]["version"] == "1.35"
    assert cluster["refusals"][0]["object"].startswith("mig (GPU Operator v26.3.3, MIG manager v0.14.2")
    assert one(spec(mig), target="1.34")["status"] == "up-to-date"


def test_downgrade_and_bad_versions_are_refused() -> None:
    cluster = one(spec({"name": "c", "k8s_version": "1.33", "cpu_nodes": CPU}), target="1.32")
    assert cluster["status"] == "refused" and "downgrade" in cluster["refusals"][0]["reason"]
    cluster = one(spec({"name": "c", "k8s_version": "1.33.2", "cpu_nodes": CPU}), target="1.34")
    assert cluster["status"] == "refused" and cluster["refusals"][0]["version"] == "1.33.2"


def test_an_unset_version_is_unknown_offline_never_guessed() -> None:
    cluster = one(spec({"name": "c", "cpu_nodes": CPU}), target="1.33")
    assert cluster["status"] == "unknown" and "k8s_version" in cluster["reason"]


def test_from_a_previous_spec() -> None:
    old = spec(
        {"name": "a", "k8s_version": "1.31", "cpu_nodes": CPU},
        {"name": "b", "k8s_version": "1.32", "cpu_nodes": CPU},
    )
    new = spec(
        {"name": "a", "k8s_version": "1.33", "cpu_nodes": CPU},
        {"name": "b", "k8s_version": "1.32", "cpu_nodes": CPU},
        {"name": "c", "k8s_version": "1.33", "cpu_nodes": CPU},
    )
    plan = upgrade_plan(new, at=AT, previous=old).to_dict()
    assert [(c["cluster"], c["status"], len(c["hops"])) for c in plan["clusters"]] == [
        ("p/a", "planned", 2),
        ("p/b", "up-to-date", 0),
        ("p/c", "new", 0),
    ]
    assert plan["versions_from"] == "--from" and plan["ok"] is True


def test_soperator_node_group_version_holds_the_groups() -> None:
    soperator = {
        "name": "slurm",
        "backend": "soperator",
        "soperator": {
            "k8s_version": "1.31",
            "node_group_version": "1.31",
            "workers": [{"name": "cpu", "size": 2}],
        },
    }
    cluster = one(spec(soperator), target="1.33")
    assert cluster["status"] == "planned", cluster
    groups = [p for p in cluster["hops"][-1]["phases"] if p["component"] == "node-group"]
    assert groups and all(p["held"] and p["to"] == "1.31" for p in groups)
    assert any("soperator" in note for note in cluster["unchecked"])


def test_windows_and_exclusions_are_reported_at_the_moment() -> None:
    block = {
        "windows": [{"days": ["sat"], "start": "02:00", "duration": "4h", "time_zone": "Europe/Amsterdam"}],
        "exclusions": [{"scope": "no-minor", "end": "2027-01-15", "reason": "freeze"}],
    }
    cluster = one(
        spec({"name": "c", "k8s_version": "1.31", "cpu_nodes": CPU}, maintenance=block), target="1.32"
    )
    maintenance = cluster["maintenance"]
    # The end date is inclusive: in force through 2027-01-15, i.e. until the 16th at 00:00 (UTC here).
    assert maintenance["inside_window"] is False
    assert maintenance["next_window"] == "2026-12-12T01:00:00+00:00"
    assert maintenance["held_by_exclusions"] == [
        {"scope": "no-minor", "until": "2027-01-16T00:00:00+00:00", "reason": "freeze"}
    ]


@settings(max_examples=200, deadline=None)
@given(
    st.integers(20, 40),
    st.integers(0, 6),
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 8), st.booleans()), max_size=5),
)
def test_every_state_of_a_chain_keeps_the_invariants(
    start: int, span: int, shapes: list[tuple[int, int, bool]]
) -> None:
    current, target = Minor(1, start), Minor(1, start + span)
    groups = [NodeGroup(f"g{i}", nodes, gpus, pinned) for i, (nodes, gpus, pinned) in enumerate(shapes)]
    # Pins the plan refuses (beyond the skew) are not chained; everything else must chain cleanly.
    if any(g.pinned for g in groups) and span > max_minors_behind(target):
        return
    hops, checks, violations = chain(current, target, groups, 1.0)
    assert violations == []
    assert len(hops) == span and checks == 1 + span * (1 + len(groups))
    for hop in hops:
        assert hop[0].component == "control-plane"
        for phase in hop[1:]:
            assert Minor(*map(int, phase.to_version.split("."))) <= Minor(
                *map(int, hop[0].to_version.split("."))
            )
            if any(g.name == phase.name and g.pinned for g in groups):
                assert phase.to_version == str(current) and phase.gpu_hours == 0


def test_a_broken_order_would_be_caught() -> None:
    # The invariant checker itself: a group newer than its control plane, or too far behind, is a violation.
    from npa_pulumi.plan.upgrade import _State

    assert _State(Minor(1, 30), {"g": Minor(1, 31)}).violations()
    assert _State(Minor(1, 34), {"g": Minor(1, 30)}).violations()
    assert not _State(Minor(1, 33), {"g": Minor(1, 30)}).violations()


@pytest.mark.parametrize("target", ["1.31", "1.32"])
def test_fleet_summary_counts(target: str) -> None:
    document = upgrade_plan(
        spec({"name": "a", "k8s_version": "1.30", "cpu_nodes": CPU}, {"name": "b", "cpu_nodes": CPU}),
        at=AT,
        target=target,
    ).to_dict()
    summary = document["summary"]
    assert summary["clusters"] == 2 and summary["planned"] == 1 and summary["unknown"] == 1
    assert summary["hops"] == int(target.split(".")[1]) - 30 and summary["skew_violations"] == 0


def test_an_sdk_built_spec_uses_its_projects_block() -> None:
    from npa_pulumi.spec.models import (
        ClusterSpec,
        MaintenanceSpec,
        MaintenanceWindowSpec,
        NodePoolSpec,
        ProjectSpec,
    )

    block = MaintenanceSpec(windows=[MaintenanceWindowSpec(days=["sat"], start="02:00", duration="1h")])
    fleet = FleetSpec(
        name="f",
        projects=[
            ProjectSpec(
                name="p",
                maintenance=block,
                clusters=[
                    ClusterSpec(
                        name="c", k8s_version="1.31", cpu_nodes=NodePoolSpec(count=1, preset="2vcpu-8gb")
                    )
                ],
            )
        ],
    )
    cluster = one(fleet, target="1.32")
    assert cluster["maintenance"]["windows"] == ["sat 02:00 +1h UTC"]
    assert cluster["maintenance"]["next_window"] == "2026-12-12T02:00:00+00:00"
