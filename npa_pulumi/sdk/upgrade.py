"""`upgrade run`: the fleet's Kubernetes upgrade plan (plan/upgrade.py) executed as a train of `up`s, one per
hop (docs/upgrades.md).

Hop N moves every cluster still on the train one minor, in two steps, each an `up` of the user's spec with
each cluster's `k8s_version` at where its train stands:
1. the control plane: every node group held at the minor it had (rendered as a pinned pool's version);
2. the node groups: the unpinned ones move to the hop's minor; pinned ones stay where they are.
Each `up` is the ordinary one, so it runs the spec's staged rollout (waves, health gates, soaks), honours the
maintenance windows (a cluster left `pending` or `held` gets off the train at that step, where it stands).
After every step the versions are read back from the cloud and the invariants checked on every cluster that
moved: its control plane at the hop's version, no node group newer than it nor more than the kubelet's skew
behind, and each node group where the step puts it (held, pinned or moved). A failed stack or gate, a
halted rollout or a violation halts the whole train: no later step starts, and the same command resumes it
(each cluster starts again from the version it has; node groups a halt left one minor behind their control
plane move first).

A pinned pool holds the version it runs: the spec's `version` for it, else the version the cloud reports for
its node groups (the oldest), else its control plane's. Refused before anything changes: a plan that
refuses a cluster (a pin the target would leave past the kubelet's skew among them) and a cluster whose
version is unknown.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_pulumi.output.results import FleetResult, StackResult, StackStatus
from npa_pulumi.plan.upgrade import (
    ClusterUpgrade,
    Status,
    max_minors_behind,
    plan_cluster,
)
from npa_pulumi.sdk.pools import (
    POOLS,
    CloudVersions,
    LiveVersions,
    held_versions,
    live_minor,
    pinned_at,
    pool_of,
)
from npa_pulumi.sdk.requests import StatusRequest, UpRequest
from npa_pulumi.spec import FleetSpec
from npa_pulumi.spec.models import ClusterSpec

if TYPE_CHECKING:
    from npa_pulumi.sdk.operations import Approve


class Step(StrEnum):
    """The two steps of a hop."""

    CONTROL_PLANE = "control-plane"  # the control plane moves; every node group held where it was
    NODE_GROUPS = "node-groups"  # the unpinned node groups follow; pinned ones stay


class TrainState(StrEnum):
    """Where one cluster's train ended."""

    REACHED = "reached"  # at the target
    UP_TO_DATE = "up-to-date"  # there before the run
    PENDING = "pending"  # an `up` deferred it (outside its window, an exclusion): off the train where it is
    HELD = "held"  # a rollout held it (maintenance, a NebiusGPUError node): off the train where it is
    HALTED = "halted"  # the train halted before it reached the target
    REFUSED = "refused"  # never started: the run was refused


@dataclass
class TrainCluster:
    key: str  # project-key/cluster-name
    project_key: str
    name: str
    plan: ClusterUpgrade
    position: str  # the version its train stands at
    state: TrainState | None = None
    reason: str = ""
    held: dict[str, str] = field(default_factory=dict)  # pinned pool -> the version it holds
    pools: tuple[str, ...] = ()  # its pools with nodes, pinned or not

    def moving_pools(self) -> tuple[str, ...]:
        return tuple(pool for pool in self.pools if pool not in self.held)

    def hop_to(self, index: int) -> str | None:
        """The version hop `index` moves it to (None: it has no such hop)."""
        hops = self.plan.hops
        return hops[index][0].to_version if index < len(hops) else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.key,
            "from": self.plan.current or None,
            "to": self.plan.target or None,
            "at": self.position or None,
            "state": str(self.state) if self.state else None,
            "reason": self.reason or None,
        }


@dataclass
class StepRecord:
    step: Step
    moved: dict[str, str]  # cluster key -> the version its control plane is asked to be at
    outcomes: dict[str, str] = field(default_factory=dict)  # cluster key -> its stack's status
    invariant_checks: int = 0
    skew_violations: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": str(self.step),
            "clusters": sorted(self.moved),
            "outcomes": self.outcomes,
            "invariant_checks": self.invariant_checks,
            "skew_violations": self.skew_violations,
        }


@dataclass
class HopRecord:
    index: int
    moved: dict[str, str]  # cluster key -> the version asked
    steps: list[StepRecord] = field(default_factory=list)
    halted: str = ""

    @property
    def outcomes(self) -> dict[str, str]:
        """Each cluster's status in the hop's last step it took part in."""
        found: dict[str, str] = {}
        for step in self.steps:
            found |= step.outcomes
        return found

    @property
    def invariant_checks(self) -> int:
        return sum(step.invariant_checks for step in self.steps)

    @property
    def skew_violations(self) -> list[str]:
        return [violation for step in self.steps for violation in step.skew_violations]

    def to_dict(self) -> dict[str, Any]:
        return {
            "hop": self.index + 1,
            "moved": self.moved,
            "outcomes": self.outcomes,
            "invariant_checks": self.invariant_checks,
            "skew_violations": self.skew_violations,
            "steps": [step.to_dict() for step in self.steps],
            "halted": self.halted or None,
        }


@dataclass
class UpgradeRun:
    target: str | None  # None: each cluster to the version its spec declares
    clusters: list[TrainCluster]
    hops: list[HopRecord] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    halted: str = ""
    results: list[FleetResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.refused and not self.halted

    def behind_the_spec(self, spec: FleetSpec) -> list[str]:
        """Clusters the run moved past what the spec declares: the next `up` of that spec would move them
        back (the spec, not the run, is what `up` applies), so it must say the version reached."""
        from npa_pulumi.plan.upgrade import declared_version

        declared = {f"{p.key()}/{c.name}": declared_version(c) for p, c in spec.cluster_targets()}
        found = [
            f"{c.key}: now at {c.position}, but the spec declares {declared.get(c.key) or 'no k8s_version'}: "
            f'set k8s_version: "{c.position}" before the next up, which would otherwise move it back'
            for c in self.clusters
            if c.position and c.position != c.plan.current and c.position != declared.get(c.key)
        ]
        pools = {f"{p.key()}/{c.name}": c for p, c in spec.cluster_targets()}
        for train in self.clusters:
            cluster = pools.get(train.key)
            for pool, version in sorted(train.held.items()):
                written = getattr(cluster, pool, None) if cluster is not None else None
                if (
                    train.position
                    and version != train.position
                    and (written is None or written.version != version)
                ):
                    found.append(
                        f'{train.key}: {pool} is pinned at {version}: set {pool}.version: "{version}" before '
                        f"the next up, which would otherwise move it to {train.position}"
                    )
        return found

    def to_dict(self) -> dict[str, Any]:
        states: dict[str, int] = {}
        for cluster in self.clusters:
            if cluster.state is not None:
                states[str(cluster.state)] = states.get(str(cluster.state), 0) + 1
        return {
            "ok": self.ok,
            "target": self.target,
            "refused": self.refused,
            "warnings": self.warnings,
            "halted": self.halted or None,
            "summary": {
                "clusters": len(self.clusters),
                **states,
                "hops_run": len(self.hops),
                "invariant_checks": sum(h.invariant_checks for h in self.hops),
                "skew_violations": sum(len(h.skew_violations) for h in self.hops),
            },
            "clusters": [c.to_dict() for c in self.clusters],
            "hops": [h.to_dict() for h in self.hops],
        }


# (the spec with every cluster at its train's version and its pools where the step holds them, the hop's
# index) -> the `up` of that spec
ApplyHop = Callable[[FleetSpec, int], FleetResult]
# (cluster key -> its stack's result, with its cluster id) -> cluster key -> what the cloud says it runs
ReadVersions = Callable[[Mapping[str, StackResult]], Mapping[str, LiveVersions]]


def skew_violations(
    key: str, live: LiveVersions, expected: str, groups: Mapping[str, str] | None = None
) -> list[str]:
    """The skew invariants of one cluster after a step: its control plane at `expected`, no node group
    newer than it, none more than the kubelet's skew behind, and each group named in `groups` (name ->
    `held:`/`pinned:`/`moved:` and its version) at that minor. A node group whose version the cloud does not
    report is not judged (the count of checks says what was)."""
    found = []
    control, wanted = live_minor(live.control_plane), live_minor(expected)
    if control is None or control != wanted:
        return [f"{key}: control plane at {live.control_plane or 'an unknown version'}, expected {expected}"]
    limit = max_minors_behind(control)
    for name, version in sorted(live.node_groups.items()):
        minor = live_minor(version)
        if minor is None:
            continue
        if minor > control:
            found.append(f"{key}: node group {name} at {version} is newer than its control plane ({control})")
        elif minor.major != control.major or control.minor - minor.minor > limit:
            found.append(
                f"{key}: node group {name} at {version} is more than {limit} minors behind its control "
                f"plane ({control})"
            )
        elif groups and name in groups:
            why, _, want = groups[name].partition(":")
            if minor != live_minor(want):
                found.append(f"{key}: node group {name} at {version}, expected {want} ({why})")
    return found


def checks_of(live: LiveVersions) -> int:
    """How many invariants a read allows checking: the control plane's, and one per reported group."""
    return 1 + sum(1 for version in live.node_groups.values() if live_minor(version) is not None)


def lagging_minor(cluster: ClusterSpec, start: str, groups: Mapping[str, str]) -> str:
    """The minor its unpinned node groups are at when that is one behind the control plane (`start`), as a
    train halted between a hop's two steps leaves them; '' otherwise. The resumed train starts there, so
    its first hop's node-group step moves them (its control-plane step finds the control plane moved)."""
    control = live_minor(start)
    unpinned = {
        pool
        for pool in POOLS
        if (spec_pool := getattr(cluster, pool)) is not None and spec_pool.count > 0 and not spec_pool.pin
    }
    reported = [
        minor
        for name, version in groups.items()
        if pool_of(cluster.name, name) in unpinned and (minor := live_minor(version)) is not None
    ]
    if control is None or not reported:
        return ""
    behind = min(reported)
    return str(behind) if behind.major == control.major and behind.minor == control.minor - 1 else ""


def plan_train(
    spec: FleetSpec,
    target: str | None,
    at: datetime,
    current: Mapping[str, str],
    groups: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[list[TrainCluster], list[str]]:
    """Each cluster's train from `current` (the live version, by cluster key; else the spec's) to `target`
    (None: the version the spec declares), and the refusals that stop the run before anything changes.
    `groups` (cluster key -> node group -> version, read from the cloud) gives pinned pools their versions."""
    from npa_pulumi.plan.upgrade import declared_version

    clusters, refused = [], []
    for project, cluster in spec.cluster_targets():
        key = f"{project.key()}/{cluster.name}"
        declared = declared_version(cluster)
        start = current.get(key) or declared
        if target is None and not declared:
            # Asked nothing: the spec leaves its version to the backend, and no --to moves it.
            idle = ClusterUpgrade(key, cluster.backend.value, start, start, Status.UP_TO_DATE)
            clusters.append(
                TrainCluster(key, project.key(), cluster.name, idle, start, TrainState.UP_TO_DATE)
            )
            continue
        live = (groups or {}).get(key, {})
        # A train halted between a hop's steps resumes with the node groups' step of that hop.
        start = (lagging_minor(cluster, start, live) if cluster.soperator is None else "") or start
        held = held_versions(cluster, start, live) if cluster.soperator is None else {}
        plan = plan_cluster(project, pinned_at(cluster, held), start, target or declared, at)
        pools = tuple(pool for pool in POOLS if (p := getattr(cluster, pool)) is not None and p.count > 0)
        train = TrainCluster(key, project.key(), cluster.name, plan, start, held=held, pools=pools)
        if plan.status is Status.REFUSED:
            refused += [f"{key}: {r.object} at {r.version}: {r.reason}" for r in plan.refusals]
        elif plan.status is Status.UNKNOWN:
            refused.append(f"{key}: {plan.reason}")
        elif cluster.soperator is not None and plan.status is Status.PLANNED:
            refused.append(f"{key}: upgrade run moves mk8s clusters only; set the soperator's k8s_version")
        if plan.status is Status.UP_TO_DATE:
            train.state = TrainState.UP_TO_DATE
        clusters.append(train)
    return clusters, refused


def at_positions(
    spec: FleetSpec,
    positions: Mapping[str, str],
    pools: Mapping[str, Mapping[str, str]] | None = None,
) -> FleetSpec:
    """The spec with each listed cluster's `k8s_version` at its train's position and each listed pool
    (cluster key -> pool -> version) pinned at its version (others as written)."""
    copy = spec.model_copy(deep=True)
    for project, cluster in copy.cluster_targets():
        key = f"{project.key()}/{cluster.name}"
        version = positions.get(key)
        if version:
            cluster.k8s_version = version
        for pool, held in (pools or {}).get(key, {}).items():
            spec_pool = getattr(cluster, pool)
            if spec_pool is not None:
                spec_pool.pin, spec_pool.version = True, held
    return copy


def run_train(
    spec: FleetSpec,
    target: str | None,
    clusters: list[TrainCluster],
    refused: Sequence[str],
    *,
    apply: ApplyHop,
    read: ReadVersions,
) -> UpgradeRun:
    """Run the trains (see the module's docstring); nothing is applied when `refused` is not empty."""
    run = UpgradeRun(target, clusters, refused=list(refused))
    if run.refused:
        for cluster in clusters:
            cluster.state = cluster.state or TrainState.REFUSED
        return run
    index = 0
    while True:
        moving = {c.key: hop for c in clusters if c.state is None and (hop := c.hop_to(index)) is not None}
        if not moving:
            break
        record = HopRecord(index, dict(moving))
        run.hops.append(record)
        record.halted = _step(run, spec, clusters, record, Step.CONTROL_PLANE, apply=apply, read=read)
        if not record.halted:
            record.halted = _step(run, spec, clusters, record, Step.NODE_GROUPS, apply=apply, read=read)
        if record.halted:
            run.halted = f"hop {index + 1}: {record.halted}"
            for cluster in clusters:
                if cluster.state is None:
                    cluster.state, cluster.reason = TrainState.HALTED, run.halted
            break
        index += 1
    for cluster in clusters:
        if cluster.state is None:
            cluster.state = TrainState.REACHED
    run.warnings = run.behind_the_spec(spec)
    return run


def _step(
    run: UpgradeRun,
    spec: FleetSpec,
    clusters: Sequence[TrainCluster],
    hop: HopRecord,
    step: Step,
    *,
    apply: ApplyHop,
    read: ReadVersions,
) -> str:
    """One step of a hop (an `up`, then the invariants read back); why the train halts ('' when it goes
    on). The node-group step runs only for clusters still on the train with a pool to move."""
    if step is Step.CONTROL_PLANE:
        moving = dict(hop.moved)
    else:
        moving = {
            c.key: hop.moved[c.key]
            for c in clusters
            if c.key in hop.moved and c.state is None and c.position == hop.moved[c.key] and c.moving_pools()
        }
        if not moving:
            return ""
    was = {c.key: c.position for c in clusters}
    pools = {c.key: dict(c.held) for c in clusters if c.held}
    if step is Step.CONTROL_PLANE:
        for cluster in clusters:
            if cluster.key in moving:  # every unpinned pool held at the minor the control plane leaves
                leaves = cluster.plan.hops[hop.index][0].from_version
                pools[cluster.key] = {pool: leaves for pool in cluster.moving_pools()} | cluster.held
    positions = {c.key: c.position for c in clusters if c.position} | moving
    result = apply(at_positions(spec, positions, pools), hop.index)
    run.results.append(result)
    record = StepRecord(step, dict(moving))
    hop.steps.append(record)
    by_key = {f"{s.project_key}/{s.cluster_name}": s for s in result.clusters()}
    halted = _settle(clusters, moving, by_key, record, result)
    if halted:
        return halted
    expected = {
        c.key: _expected_groups(c, was[c.key] if step is Step.CONTROL_PLANE else moving[c.key])
        for c in clusters
        if c.key in moving
    }
    return _check(clusters, moving, by_key, record, read, expected)


def _expected_groups(cluster: TrainCluster, unpinned_at: str) -> dict[str, str]:
    """Where each of the cluster's pools is after a step, by pool (the read maps node groups to pools)."""
    found = {pool: f"pinned:{version}" for pool, version in cluster.held.items()}
    step = "held" if unpinned_at != cluster.position else "moved"
    return found | {pool: f"{step}:{unpinned_at}" for pool in cluster.moving_pools()}


def _settle(
    clusters: Sequence[TrainCluster],
    moving: Mapping[str, str],
    by_key: Mapping[str, StackResult],
    record: StepRecord,
    result: FleetResult,
) -> str:
    """Each moving cluster's outcome of the hop's `up`; why the train halts ('' when it goes on)."""
    failed = []
    for cluster in clusters:
        if cluster.key not in moving:
            continue
        stack = by_key.get(cluster.key)
        status = stack.status if stack is not None else StackStatus.SKIPPED
        record.outcomes[cluster.key] = str(status)
        if status in (StackStatus.DEPLOYED, StackStatus.UNCHANGED):
            cluster.position = moving[cluster.key]
        elif status is StackStatus.PENDING and stack is not None:
            cluster.state = TrainState.PENDING
            cluster.reason = str((stack.pending or {}).get("reason", ""))
        elif status is StackStatus.HELD and stack is not None:
            cluster.state, cluster.reason = TrainState.HELD, stack.error or ""
        else:
            failed.append(f"{cluster.key} {status}" + (f" ({stack.error})" if stack and stack.error else ""))
    halted = (result.rollout or {}).get("halted")
    if halted:
        return f"the rollout halted at wave {halted['wave']}: {halted['reason']}"
    if failed:
        return "failed: " + "; ".join(failed)
    if result.error:
        return result.error
    return ""


def _check(
    clusters: Sequence[TrainCluster],
    moving: Mapping[str, str],
    by_key: Mapping[str, StackResult],
    record: StepRecord,
    read: ReadVersions,
    expected: Mapping[str, Mapping[str, str]],
) -> str:
    """The invariants of every cluster that moved, read back from the cloud (`expected`: cluster key ->
    pool -> where the step puts its node groups)."""
    moved = {
        c.key: by_key[c.key] for c in clusters if c.key in moving and c.state is None and c.key in by_key
    }
    if not moved:
        return ""
    live = read(moved)
    for key in moved:
        found = live.get(key)
        if found is None:
            record.skew_violations.append(f"{key}: its versions could not be read")
            continue
        record.invariant_checks += checks_of(found)
        name = key.split("/", 1)[1]
        groups = {
            group: expected[key][pool]
            for group in found.node_groups
            if (pool := pool_of(name, group)) is not None and pool in expected.get(key, {})
        }
        record.skew_violations += skew_violations(key, found, moving[key], groups)
    return "skew invariant violated: " + "; ".join(record.skew_violations) if record.skew_violations else ""


# ------------------------------------------------------------------------------------- on the cloud


def upgrade(
    spec_path: str | Path,
    target: str | None,
    request: UpRequest,
    *,
    approve: Approve | None = None,
    at: datetime | None = None,
) -> UpgradeRun:
    """`npa-pulumi upgrade run`: plan each selected cluster's train from the version its cloud reports (the
    spec's when it has none), refuse or ask, then run the trains (`run_train`), each hop an SDK `deploy`."""
    from npa_pulumi.sdk.operations import Approval, deploy, open_fleet, select, status

    selected = select(spec_path, request.selection)
    keys = {f"{t.project_key}/{t.cluster_name}" for t in selected.targets}
    reader = CloudVersions(open_fleet(selected, request))
    try:
        asked = StatusRequest(where=request.where, selection=request.selection, recipes=request.recipes)
        found = status(selected, asked)
        by_key = {f"{s.project_key}/{s.cluster_name}": s for s in found.clusters() if s.cluster_id}
        live = reader(by_key)
        current = {key: versions.control_plane for key, versions in live.items() if versions.control_plane}
        groups = {key: dict(versions.node_groups) for key, versions in live.items()}
        clusters, refused = plan_train(selected.spec, target, at or datetime.now(UTC), current, groups)
        clusters = [c for c in clusters if c.key in keys]
        if approve is not None and not refused and any(c.state is None for c in clusters):
            approve(Approval("deploy", selected.spec.name, selected.spec, selected.targets))

        def apply(spec: FleetSpec, index: int) -> FleetResult:
            hop = dataclasses.replace(selected, spec=spec, targets=select(spec, request.selection).targets)
            return deploy(hop, request)

        return run_train(selected.spec, target, clusters, refused, apply=apply, read=reader)
    finally:
        reader.close()


__all__ = (
    "Step",
    "TrainCluster",
    "TrainState",
    "UpgradeRun",
    "at_positions",
    "plan_train",
    "run_train",
    "skew_violations",
    "upgrade",
)
