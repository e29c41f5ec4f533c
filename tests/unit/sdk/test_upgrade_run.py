"""`upgrade run`'s train (sdk/upgrade.py) with the `up` of each hop and the cloud's versions played by
fakes: hops one minor at a time over the clusters still on the train, a failed gate or a halted rollout or
a skew violation halting it, a pending cluster getting off where it stands, refusals (pins, unknown
versions) stopping it before anything is applied."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from npa_pulumi.output.results import FleetResult, StackResult
from npa_pulumi.output.upgrade import render_run_text
from npa_pulumi.sdk.pools import LiveVersions, live_minor, pool_of
from npa_pulumi.sdk.upgrade import (
    TrainState,
    at_positions,
    plan_train,
    run_train,
    skew_violations,
)
from npa_pulumi.spec import FleetSpec, parse_spec

AT = datetime(2026, 12, 9, 12, tzinfo=UTC)
CPU = "{count: 2, platform: cpu-d3, preset: 16vcpu-64gb}"


def fleet(*clusters: str) -> FleetSpec:
    lines = [
        "apiVersion: npa.fleet/v0.0.1",
        "name: train",
        "region: eu-north1",
        "projects:",
        "  - name: p",
        "    clusters:",
    ]
    lines += [f"      - {c}" for c in clusters]
    return parse_spec("\n".join(lines) + "\n")


class Cloud:
    """The fake fleet: `up` moves each changed cluster's control plane to the version its spec now declares
    and each node group to its pool's pinned version, else the control plane's (as the default recipe's
    version override renders them), unless told to fail, defer or leave a group behind; `read` reports
    what it holds. `hops` lists, per `up`, the control planes it moved; `steps` what it moved, control
    plane and node groups."""

    def __init__(self, versions: dict[str, str]) -> None:
        self.versions = dict(versions)
        self.groups: dict[str, dict[str, str]] = {}  # cluster key -> node group -> version
        self.groups_behind: dict[str, str] = {}  # cluster key -> the version its node group stays at
        self.fail: dict[tuple[str, int], str] = {}  # (cluster key, hop) -> status
        self.pending: set[str] = set()
        self.hops: list[dict[str, str]] = []
        self.steps: list[dict[str, str]] = []

    def _wanted_groups(self, cluster: Any) -> dict[str, str]:
        found = {}
        for pool, name in (
            ("cpu_nodes", f"{cluster.name}-ng-cpu"),
            ("gpu_nodes", f"{cluster.name}-ng-gpu-0"),
        ):
            spec_pool = getattr(cluster, pool)
            if spec_pool is not None and spec_pool.count > 0:
                held = spec_pool.version if spec_pool.pin and spec_pool.version else ""
                found[name] = held or cluster.k8s_version
        return found

    def apply(self, spec: FleetSpec, index: int) -> FleetResult:
        stacks, asked, moved = [], {}, {}
        for project, cluster in spec.cluster_targets():
            key = f"{project.key()}/{cluster.name}"
            wanted = cluster.k8s_version
            groups = self._wanted_groups(cluster)
            had = self.groups.setdefault(key, {name: self.versions[key] for name in groups})
            status = "unchanged"
            pending = None
            changed = {name: v for name, v in groups.items() if had.get(name) != v}
            if wanted != self.versions[key] or changed:
                if wanted != self.versions[key]:
                    asked[key] = wanted
                status = self.fail.get((key, index), "deployed")
                if key in self.pending:
                    status, pending = "pending", {"reason": "outside its maintenance windows"}
                if status == "deployed":
                    if wanted != self.versions[key]:
                        moved[key] = wanted
                    self.versions[key] = wanted
                    for name, version in changed.items():
                        if key not in self.groups_behind:
                            had[name] = version
                            moved[name] = version
            stacks.append(
                StackResult(
                    stack=f"train.{key.replace('/', '.')}",
                    kind="cluster",
                    project_key=project.key(),
                    cluster_name=cluster.name,
                    status=status,
                    cluster_id=f"id-{cluster.name}",
                    pending=pending,
                )
            )
        if asked:
            self.hops.append(asked)
        self.steps.append(moved)
        return FleetResult(command="up", fleet="train", cloud="local", backend="file", stacks=stacks)

    def read(self, stacks: Mapping[str, StackResult]) -> Mapping[str, LiveVersions]:
        found = {}
        for key in stacks:
            groups = dict(self.groups.get(key, {}))
            if key in self.groups_behind:
                groups = {name: self.groups_behind[key] for name in groups}
            found[key] = LiveVersions(self.versions[key], groups)
        return found


def _run(spec: FleetSpec, cloud: Cloud, target: str) -> Any:
    clusters, refused = plan_train(spec, target, AT, {})
    return run_train(spec, target, clusters, refused, apply=cloud.apply, read=cloud.read)


def test_clusters_on_three_minors_reach_the_target_one_minor_a_hop() -> None:
    spec = fleet(
        f"{{name: a, k8s_version: '1.30', cpu_nodes: {CPU}}}",
        f"{{name: b, k8s_version: '1.31', cpu_nodes: {CPU}}}",
        f"{{name: c, k8s_version: '1.32', cpu_nodes: {CPU}}}",
    )
    cloud = Cloud({"p/a": "1.30", "p/b": "1.31", "p/c": "1.32"})
    run = _run(spec, cloud, "1.33")
    assert run.ok
    assert cloud.hops == [
        {"p/a": "1.31", "p/b": "1.32", "p/c": "1.33"},
        {"p/a": "1.32", "p/b": "1.33"},
        {"p/a": "1.33"},
    ]
    assert cloud.versions == {"p/a": "1.33", "p/b": "1.33", "p/c": "1.33"}
    document = run.to_dict()
    assert document["summary"]["reached"] == 3 and document["summary"]["skew_violations"] == 0
    # Each cluster that moved: its control plane and its node group checked, after both steps of every hop.
    assert document["summary"]["invariant_checks"] == 2 * 2 * (3 + 2 + 1)
    # Each hop in two `up`s: the control planes first (node groups held), then the node groups.
    assert cloud.steps[:2] == [
        {"p/a": "1.31", "p/b": "1.32", "p/c": "1.33"},
        {"a-ng-cpu": "1.31", "b-ng-cpu": "1.32", "c-ng-cpu": "1.33"},
    ]
    assert [s["step"] for s in document["hops"][0]["steps"]] == ["control-plane", "node-groups"]


def test_a_failed_gate_halts_the_train_and_no_later_hop_starts() -> None:
    spec = fleet(
        f"{{name: a, k8s_version: '1.31', cpu_nodes: {CPU}}}",
        f"{{name: b, k8s_version: '1.31', cpu_nodes: {CPU}}}",
    )
    cloud = Cloud({"p/a": "1.31", "p/b": "1.31"})
    cloud.fail[("p/b", 0)] = "deployed-validation-failed"
    run = _run(spec, cloud, "1.33")
    assert not run.ok and len(cloud.hops) == 1
    assert run.halted.startswith("hop 1: failed: p/b deployed-validation-failed")
    states = {c.key: (c.state, c.position) for c in run.clusters}
    assert states == {"p/a": (TrainState.HALTED, "1.32"), "p/b": (TrainState.HALTED, "1.31")}


def test_a_skew_violation_read_back_halts_the_train() -> None:
    spec = fleet(f"{{name: a, k8s_version: '1.31', cpu_nodes: {CPU}}}")
    cloud = Cloud({"p/a": "1.31"})
    cloud.groups_behind["p/a"] = "1.27"  # its node group never moved: 1.32 - 1.27 = 5 minors
    run = _run(spec, cloud, "1.33")
    assert not run.ok and len(cloud.hops) == 1
    (violation,) = run.hops[0].skew_violations
    assert (
        violation == "p/a: node group a-ng-cpu at 1.27 is more than 3 minors behind its control plane (1.32)"
    )


def test_a_pending_cluster_gets_off_where_it_stands_and_the_others_go_on() -> None:
    spec = fleet(
        f"{{name: a, k8s_version: '1.31', cpu_nodes: {CPU}}}",
        f"{{name: b, k8s_version: '1.31', cpu_nodes: {CPU}}}",
    )
    cloud = Cloud({"p/a": "1.31", "p/b": "1.31"})
    cloud.pending.add("p/b")
    run = _run(spec, cloud, "1.33")
    assert run.ok
    assert cloud.hops == [{"p/a": "1.32", "p/b": "1.32"}, {"p/a": "1.33"}]
    states = {c.key: (c.state, c.position) for c in run.clusters}
    assert states == {"p/a": (TrainState.REACHED, "1.33"), "p/b": (TrainState.PENDING, "1.31")}
    # The second hop's spec keeps the pending cluster at the version it has: `up` does not move it back.
    assert cloud.versions["p/b"] == "1.31"


GPU_PINNED = "{count: 2, platform: gpu-l40s-d, preset: 1gpu-16vcpu-96gb, pin: true}"


def test_the_control_plane_moves_first_then_unpinned_groups_and_a_pinned_pool_never_moves() -> None:
    spec = fleet(f"{{name: a, k8s_version: '1.31', cpu_nodes: {CPU}, gpu_nodes: {GPU_PINNED}}}")
    cloud = Cloud({"p/a": "1.31"})
    run = _run(spec, cloud, "1.33")
    assert run.ok, run.halted
    assert cloud.steps == [
        {"p/a": "1.32"},  # the control plane; both node groups held at 1.31
        {"a-ng-cpu": "1.32"},  # the unpinned group follows; the pinned GPU pool stays
        {"p/a": "1.33"},
        {"a-ng-cpu": "1.33"},
    ]
    assert cloud.groups["p/a"] == {"a-ng-cpu": "1.33", "a-ng-gpu-0": "1.31"}
    document = run.to_dict()
    assert document["summary"]["skew_violations"] == 0
    # Per step: the control plane and both groups, each where the step puts it.
    assert document["summary"]["invariant_checks"] == 2 * 2 * 3
    text = render_run_text(document).splitlines()
    assert text[1:4] == [
        "hop 1: p/a -> 1.32",
        "  control-plane: p/a deployed; 3 skew checks",
        "  node-groups: p/a deployed; 3 skew checks",
    ]
    assert run.warnings == [
        'p/a: now at 1.33, but the spec declares 1.31: set k8s_version: "1.33" before the next up, which '
        "would otherwise move it back",
        'p/a: gpu_nodes is pinned at 1.31: set gpu_nodes.version: "1.31" before the next up, which would '
        "otherwise move it to 1.33",
    ]


def test_a_cloud_that_moves_node_groups_with_the_control_plane_halts_after_that_step() -> None:
    class Eager(Cloud):
        def _wanted_groups(self, cluster: Any) -> dict[str, str]:  # pins ignored: all follow
            return {name: cluster.k8s_version for name in super()._wanted_groups(cluster)}

    spec = fleet(f"{{name: a, k8s_version: '1.31', cpu_nodes: {CPU}, gpu_nodes: {GPU_PINNED}}}")
    cloud = Eager({"p/a": "1.31"})
    run = _run(spec, cloud, "1.32")
    assert not run.ok and len(cloud.steps) == 1
    assert run.hops[0].skew_violations == [
        "p/a: node group a-ng-cpu at 1.32, expected 1.31 (held)",
        "p/a: node group a-ng-gpu-0 at 1.32, expected 1.31 (pinned)",
    ]


def test_a_pinned_pool_holds_the_version_the_cloud_reports_for_it() -> None:
    spec = fleet(f"{{name: a, k8s_version: '1.32', cpu_nodes: {CPU}, gpu_nodes: {GPU_PINNED}}}")
    groups = {"p/a": {"a-ng-cpu": "1.32.1-nebius-node.1", "a-ng-gpu-0": "1.31.4-nebius-node.1"}}
    (train,), refused = plan_train(spec, "1.33", AT, {"p/a": "1.32"}, groups)
    assert not refused and train.held == {"gpu_nodes": "1.31"} and train.moving_pools() == ("cpu_nodes",)
    (hop,) = train.plan.hops
    assert [(p.name, p.from_version, p.to_version, p.held) for p in hop] == [
        ("control plane", "1.32", "1.33", False),
        ("a-ng-cpu", "1.32", "1.33", False),
        ("a-ng-gpu-0", "1.31", "1.31", True),
    ]
    # The hop's control-plane step renders both pools held; the spec's own version wins over the cloud's.
    moved = at_positions(spec, {"p/a": "1.33"}, {"p/a": {"cpu_nodes": "1.32", "gpu_nodes": "1.31"}})
    ((_, cluster),) = moved.cluster_targets()
    assert cluster.cpu_nodes is not None and cluster.gpu_nodes is not None
    assert (cluster.cpu_nodes.pin, cluster.cpu_nodes.version, cluster.gpu_nodes.version) == (
        True,
        "1.32",
        "1.31",
    )
    written = fleet(
        f"{{name: a, k8s_version: '1.32', cpu_nodes: {CPU}, gpu_nodes: {{count: 2, platform: gpu-l40s-d,"
        " preset: 1gpu-16vcpu-96gb, pin: true, version: '1.30'}}"
    )
    (train,), _ = plan_train(written, "1.33", AT, {"p/a": "1.32"}, groups)
    assert train.held == {"gpu_nodes": "1.30"}


def test_a_pin_past_the_skew_or_an_unknown_version_refuses_the_run_before_anything_is_applied() -> None:
    spec = fleet(
        f"{{name: a, k8s_version: '1.31', cpu_nodes: {CPU}}}",
        "{name: pinned, k8s_version: '1.30', cpu_nodes: {count: 2, platform: cpu-d3, preset: 16vcpu-64gb,"
        " pin: true, version: '1.29'}}",
        f"{{name: unknown, cpu_nodes: {CPU}}}",
    )
    cloud = Cloud({"p/a": "1.31", "p/pinned": "1.30", "p/unknown": ""})
    run = _run(spec, cloud, "1.33")
    assert not run.ok and cloud.hops == [] and cloud.steps == []
    assert any(
        r.startswith(
            "p/pinned: node group pinned-ng-cpu (pinned at 1.29) at 1.33: it would be 4 minors behind"
        )
        for r in run.refused
    )
    assert any(r.startswith("p/unknown: the current version") for r in run.refused)
    assert {c.state for c in run.clusters} == {TrainState.REFUSED}


def test_a_train_halted_between_the_steps_resumes_with_the_node_groups() -> None:
    spec = fleet(f"{{name: a, k8s_version: '1.33', cpu_nodes: {CPU}, gpu_nodes: {GPU_PINNED}}}")
    cloud = Cloud({"p/a": "1.33"})  # the control plane moved; the node-group step never ran
    cloud.groups["p/a"] = {"a-ng-cpu": "1.32", "a-ng-gpu-0": "1.31"}
    clusters, refused = plan_train(spec, "1.33", AT, {"p/a": "1.33"}, cloud.groups)
    run = run_train(spec, "1.33", clusters, refused, apply=cloud.apply, read=cloud.read)
    assert run.ok, run.halted
    assert cloud.steps == [{}, {"a-ng-cpu": "1.33"}]  # the control plane is already there; the pin stays
    assert cloud.groups["p/a"] == {"a-ng-cpu": "1.33", "a-ng-gpu-0": "1.31"}
    assert [(c.state, c.position) for c in run.clusters] == [(TrainState.REACHED, "1.33")]
    assert run.hops[0].skew_violations == []
    # Groups two minors behind are not a halted step: the train starts from the control plane.
    cloud.groups["p/a"] = {"a-ng-cpu": "1.31", "a-ng-gpu-0": "1.31"}
    (train,), _ = plan_train(spec, "1.33", AT, {"p/a": "1.33"}, cloud.groups)
    assert train.state is TrainState.UP_TO_DATE


def test_node_groups_belong_to_their_pools_by_upstream_s_names() -> None:
    assert pool_of("a", "a-ng-cpu") == "cpu_nodes"
    assert pool_of("a", "a-ng-gpu-3") == pool_of("a", "a-ng-gb300-rack1") == "gpu_nodes"
    assert pool_of("a", "ab-ng-cpu") is None and pool_of("a", "a-system") is None


def test_the_live_version_is_where_a_train_starts() -> None:
    spec = fleet(f"{{name: a, cpu_nodes: {CPU}}}")  # no k8s_version: the service chose one
    clusters, refused = plan_train(spec, "1.33", AT, {"p/a": "1.32"})
    assert not refused and [c.hop_to(0) for c in clusters] == ["1.33"]


def test_the_hop_spec_sets_each_cluster_at_its_position_and_leaves_the_rest() -> None:
    spec = fleet(f"{{name: a, k8s_version: '1.31', cpu_nodes: {CPU}}}", f"{{name: b, cpu_nodes: {CPU}}}")
    moved = at_positions(spec, {"p/a": "1.32"})
    versions = {c.name: c.k8s_version for _, c in moved.cluster_targets()}
    assert versions == {"a": "1.32", "b": ""}
    assert {c.name: c.k8s_version for _, c in spec.cluster_targets()} == {"a": "1.31", "b": ""}


def test_skew_rules_on_versions_as_clouds_report_them() -> None:
    assert live_minor("1.31.4-nebius-node.1") == live_minor("v1.31.2") == live_minor("1.31")
    assert skew_violations("k", LiveVersions("1.32", {"g": "1.33.0"}), "1.32") == [
        "k: node group g at 1.33.0 is newer than its control plane (1.32)"
    ]
    assert skew_violations("k", LiveVersions("1.31", {}), "1.32") == [
        "k: control plane at 1.31, expected 1.32"
    ]
    assert skew_violations("k", LiveVersions("1.32", {"g": "", "h": "1.29"}), "1.32") == []
    assert skew_violations("k", LiveVersions("1.32", {"h": "1.30.2"}), "1.32", {"h": "pinned:1.31"}) == [
        "k: node group h at 1.30.2, expected 1.31 (pinned)"
    ]


def test_without_a_target_each_cluster_goes_to_its_spec_and_a_run_past_it_warns() -> None:
    spec = fleet(f"{{name: a, k8s_version: '1.33', cpu_nodes: {CPU}}}", f"{{name: b, cpu_nodes: {CPU}}}")
    cloud = Cloud({"p/a": "1.31", "p/b": "1.32"})
    clusters, refused = plan_train(spec, None, AT, {"p/a": "1.31", "p/b": "1.32"})
    assert not refused  # b declares no version and is asked none: up to date where it is
    run = run_train(spec, None, clusters, refused, apply=cloud.apply, read=cloud.read)
    assert run.ok and cloud.hops == [{"p/a": "1.32"}, {"p/a": "1.33"}] and not run.warnings
    past = fleet(f"{{name: a, k8s_version: '1.31', cpu_nodes: {CPU}}}")
    cloud = Cloud({"p/a": "1.31"})
    run = _run(past, cloud, "1.32")
    assert run.warnings == [
        'p/a: now at 1.32, but the spec declares 1.31: set k8s_version: "1.32" before the next up, which '
        "would otherwise move it back"
    ]
