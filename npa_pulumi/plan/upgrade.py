"""The offline upgrade plan: per cluster the chain of Kubernetes minor hops from its current version to the
target, each hop's phases (the control plane, then each node group; pinned groups held), the skew
invariants checked on every intermediate state, the refusals (naming the object and the version), and the
GPU-hours the node-group drains cost. Offline: no cloud call and no backend read.

Where the versions come from (docs/upgrades.md, "Where the plan's versions come from"):
* `target` given (`--to 1.33`): every cluster goes from the version its spec declares to the target;
* `previous` given (`--from OLD.yaml`, e.g. the spec on the main branch): each cluster goes from the version
  the previous spec declared to the one the spec declares now.
A version the spec leaves empty is the backend's choice, unknown offline: such a cluster is `unknown`,
never guessed. The stack outputs record no version, so there is nothing better to read without a cloud.

Node groups take the cluster's version (upstream k8s-training sets one `k8s_version` on the cluster and
every node group), so offline every group starts where its control plane is, except a pinned pool with its
own `version` (rendered through the default recipe's node-group version override). A version change of a node
group rolls its nodes (each drained and re-provisioned), so each hop drains every unpinned group once: the
GPU-hours are nodes x GPUs per node x the drain time per node (the `maintenance.drain_time`, else 1h: an
assumption, printed with the figure). Whether Terraform updates or replaces a group is read from its own
plan by `preview` (disruption classes), never assumed here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from npa_pulumi.plan.soperator import DEFAULT_K8S_VERSION as SOPERATOR_DEFAULT_K8S_VERSION
from npa_pulumi.plan.soperator import node_groups as soperator_node_groups
from npa_pulumi.plan.windows import describe_windows, policy_from_spec
from npa_pulumi.runtime.presets import gpus_per_node
from npa_pulumi.spec import constants as c
from npa_pulumi.spec.durations import duration_seconds
from npa_pulumi.spec.maintenance_rules import ExclusionScope
from npa_pulumi.spec.models import ClusterSpec, FleetSpec, MaintenanceSpec, NodePoolSpec, ProjectSpec

# Kubernetes' version skew policy: a kubelet may be up to three minor versions older than kube-apiserver
# (https://kubernetes.io/releases/version-skew-policy/#kubelet; widened from two by KEP-3935 in 1.28), and
# never newer. Below a 1.28 control plane the older limit, two, applies.
KUBELET_MAX_MINORS_BEHIND: Final = 3
KUBELET_MAX_MINORS_BEHIND_BEFORE_1_28: Final = 2
# The drain time per node when the spec gives none: Nebius's maintenance drains a node in at most an hour
# (docs.nebius.com/kubernetes/maintenance; ../shared/reference/lifecycle-anchors.md, section 4).
DEFAULT_DRAIN_HOURS: Final = 1.0
# The Nebius provider's version format (upstream k8s-training's `k8s_version` validation).
_VERSION = re.compile(r"(\d+)\.(\d+)(-nebius-node\.[1-9]\d*)?")


class Status(StrEnum):
    UP_TO_DATE = "up-to-date"
    PLANNED = "planned"
    REFUSED = "refused"
    UNKNOWN = "unknown"  # the current or target version is the backend's choice, unknown offline
    NEW = "new"  # not in the previous spec: created at its version, nothing to upgrade


@dataclass(frozen=True, order=True)
class Minor:
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    def next(self) -> Minor:
        return Minor(self.major, self.minor + 1)


def parse_minor(text: str) -> Minor | None:
    """`1.33` or `1.33-nebius-node.2` → 1.33; None for anything else (a patch version included)."""
    match = _VERSION.fullmatch(text.strip())
    return Minor(int(match.group(1)), int(match.group(2))) if match else None


def max_minors_behind(control_plane: Minor) -> int:
    return (
        KUBELET_MAX_MINORS_BEHIND if control_plane >= Minor(1, 28) else KUBELET_MAX_MINORS_BEHIND_BEFORE_1_28
    )


@dataclass(frozen=True)
class NodeGroup:
    name: str
    nodes: int
    gpus_per_node: int
    pinned: bool = False
    version: Minor | None = None  # where it is when not where its control plane is (soperator)


@dataclass(frozen=True)
class Phase:
    component: str  # control-plane | node-group
    name: str
    from_version: str
    to_version: str
    held: bool = False  # a pinned group staying where it is
    nodes: int = 0
    gpus: int = 0
    gpu_hours: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "name": self.name,
            "from": self.from_version,
            "to": self.to_version,
            "held": self.held,
            "nodes": self.nodes,
            "gpus": self.gpus,
            "gpu_hours": round(self.gpu_hours, 2),
        }


@dataclass(frozen=True)
class Refusal:
    object: str
    version: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"object": self.object, "version": self.version, "reason": self.reason}


@dataclass
class ClusterUpgrade:
    key: str  # project-key/cluster-name
    backend: str
    current: str
    target: str
    status: Status
    hops: list[list[Phase]] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    reason: str = ""
    invariant_checks: int = 0
    skew_violations: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    drain_hours: float = DEFAULT_DRAIN_HOURS
    drain_assumed: bool = True
    windows: list[str] = field(default_factory=list)
    inside_window: bool = True
    next_window: str | None = None
    held_by: list[dict[str, str]] = field(default_factory=list)

    @property
    def gpu_hours(self) -> float:
        return sum(phase.gpu_hours for hop in self.hops for phase in hop)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.key,
            "backend": self.backend,
            "from": self.current or None,
            "to": self.target or None,
            "status": self.status.value,
            "reason": self.reason or None,
            "hops": [
                {"from": hop[0].from_version, "to": hop[0].to_version, "phases": [p.to_dict() for p in hop]}
                for hop in self.hops
            ],
            "refusals": [r.to_dict() for r in self.refusals],
            "invariant_checks": self.invariant_checks,
            "skew_violations": self.skew_violations,
            "unchecked": self.unchecked,
            "gpu_hours_drained": round(self.gpu_hours, 2),
            "drain_hours_per_node": self.drain_hours,
            "drain_time_assumed": self.drain_assumed,
            "maintenance": {
                "windows": self.windows,
                "inside_window": self.inside_window,
                "next_window": self.next_window,
                "held_by_exclusions": self.held_by,
            },
        }


# --- what each cluster is made of ------------------------------------------------------------------------


def mk8s_node_groups(cluster: ClusterSpec) -> list[NodeGroup]:
    """The node groups upstream k8s-training creates for the cluster, in the order `up` applies them."""
    groups: list[NodeGroup] = []
    cpu, gpu = cluster.cpu_nodes, cluster.gpu_nodes
    if cpu is not None and cluster.cpu_count() > 0:
        groups.append(NodeGroup(f"{cluster.name}-ng-cpu", cluster.cpu_count(), 0, cpu.pin, _held(cpu)))
    per_group, count = cluster.gpu_node_layout()
    pinned, held = (gpu.pin, _held(gpu)) if gpu is not None else (False, None)
    for index in range(count):
        groups.append(
            NodeGroup(f"{cluster.name}-ng-gpu-{index}", per_group, cluster.gpus_per_node(), pinned, held)
        )
    return groups


def _held(pool: NodePoolSpec) -> Minor | None:
    """A pinned pool's own version (the spec's `version`); None: where its control plane is."""
    return parse_minor(pool.version) if pool.pin and pool.version.strip() else None


def soperator_groups(cluster: ClusterSpec) -> list[NodeGroup]:
    """The recipe's node groups; its `node_group_version` holds them all at that version (a pin)."""
    assert cluster.soperator is not None
    held = parse_minor(cluster.soperator.node_group_version)
    return [
        NodeGroup(shape.name, shape.nodes, gpus_per_node(shape.preset), held is not None, held)
        for shape in soperator_node_groups(cluster.name, cluster.soperator)
    ]


def declared_version(cluster: ClusterSpec) -> str:
    """The control-plane version the spec declares ('' = the backend's choice). MIG pins 1.34; a soperator
    cluster's recipe has its own default."""
    if cluster.backend is c.BackendKind.SOPERATOR and cluster.soperator is not None:
        return cluster.soperator.k8s_version or SOPERATOR_DEFAULT_K8S_VERSION
    return cluster.resolved_k8s_version()


# --- refusals from pinned components ---------------------------------------------------------------------


def component_refusals(cluster: ClusterSpec, target: Minor) -> Iterator[Refusal]:
    """What the cluster's pinned components say about the target. Only what the product records is
    checked: MIG's tested tuple runs on exactly Kubernetes 1.34 (the GPU Operator, driver and MIG manager
    of constants.MIG_PINNED_VERSIONS were tested together on it, and upstream's MIG reconciler kubectl
    must be within one minor of the control plane)."""
    if cluster.mig_enabled() and str(target) != c.MIG_KUBERNETES_VERSION:
        pins = c.MIG_PINNED_VERSIONS
        yield Refusal(
            f"mig (GPU Operator {pins['gpu_operator_version']}, "
            f"MIG manager {pins['gpu_mig_manager_version']}, driver {pins['gpu_driver_version']})",
            str(target),
            f"the pinned MIG stack is tested on Kubernetes {c.MIG_KUBERNETES_VERSION} only",
        )


def unchecked_components(cluster: ClusterSpec) -> list[str]:
    """Pinned components whose Kubernetes support the product does not record, so the plan cannot check."""
    found = []
    if cluster.kuberay_enabled():
        found.append("kuberay operator (tools/pins.toml [kuberay]): no Kubernetes support range recorded")
    if cluster.backend is c.BackendKind.SOPERATOR and cluster.soperator is not None:
        found.append(
            f"soperator (slurm operator {cluster.soperator.slurm_operator_version}): no Kubernetes support "
            "range recorded"
        )
    return found


# --- the chain ---------------------------------------------------------------------------------------------


@dataclass
class _State:
    control_plane: Minor
    groups: dict[str, Minor]

    def violations(self) -> list[str]:
        limit = max_minors_behind(self.control_plane)
        found = []
        for name, version in self.groups.items():
            if version > self.control_plane:
                found.append(f"{name} at {version} is newer than the control plane at {self.control_plane}")
            elif (
                self.control_plane.minor - version.minor > limit or version.major != self.control_plane.major
            ):
                found.append(
                    f"{name} at {version} is more than {limit} minors behind the control plane at "
                    f"{self.control_plane}"
                )
        return found


def chain(
    current: Minor, target: Minor, groups: list[NodeGroup], drain_hours: float
) -> tuple[list[list[Phase]], int, list[str]]:
    """The hops, the number of invariant checks made and the violations found (none for a valid chain:
    every state after every phase is checked, so a bug in the order shows rather than reaches a cloud)."""
    state = _State(current, {group.name: group.version or current for group in groups})
    checks, violations = 1, state.violations()
    hops: list[list[Phase]] = []
    while state.control_plane < target:
        before = state.control_plane
        after = before.next()
        state.control_plane = after
        phases = [Phase("control-plane", "control plane", str(before), str(after))]
        checks, violations = checks + 1, violations + state.violations()
        for group in groups:
            held = group.pinned
            if not held:
                state.groups[group.name] = after
            gpus = group.nodes * group.gpus_per_node
            was = state.groups[group.name] if held else before
            phases.append(
                Phase(
                    "node-group",
                    group.name,
                    str(was),
                    str(state.groups[group.name]),
                    held=held,
                    nodes=group.nodes,
                    gpus=gpus,
                    gpu_hours=0.0 if held else gpus * drain_hours,
                )
            )
            checks, violations = checks + 1, violations + state.violations()
        hops.append(phases)
    return hops, checks, violations


def plan_cluster(
    project: ProjectSpec,
    cluster: ClusterSpec,
    current_text: str,
    target_text: str,
    at: datetime,
) -> ClusterUpgrade:
    key = f"{project.key()}/{cluster.name}"
    plan = ClusterUpgrade(key, cluster.backend.value, current_text, target_text, Status.PLANNED)
    # A parsed spec has already put the most specific block on the cluster; a FleetSpec built in Python
    # (the SDK) may hold it on the project only.
    _maintenance(plan, cluster.maintenance or project.maintenance, at)
    if not current_text or not target_text:
        plan.status = Status.UNKNOWN
        which = "current" if not current_text else "target"
        plan.reason = (
            f"the {which} version is the backend's choice (k8s_version unset), unknown offline; "
            "set k8s_version in the spec"
        )
        return plan
    current, target = parse_minor(current_text), parse_minor(target_text)
    for text, parsed in ((current_text, current), (target_text, target)):
        if parsed is None:
            plan.refusals.append(
                Refusal(
                    "control plane",
                    text,
                    "not a Kubernetes minor in the Nebius format (1.33, 1.33-nebius-node.2)",
                )
            )
    if current is None or target is None:
        plan.status = Status.REFUSED
        return plan
    plan.unchecked = unchecked_components(cluster)
    groups = soperator_groups(cluster) if cluster.soperator is not None else mk8s_node_groups(cluster)
    if target < current:
        plan.refusals.append(
            Refusal(
                "control plane", target_text, f"a downgrade from {current_text}: Kubernetes upgrades only"
            )
        )
    elif target.major != current.major:
        plan.refusals.append(Refusal("control plane", target_text, "a major-version change is not planned"))
    plan.refusals += component_refusals(cluster, target)
    limit = max_minors_behind(target)
    for group in groups:
        at_version = group.version or current
        if group.pinned and (at_version.major != target.major or target.minor - at_version.minor > limit):
            plan.refusals.append(
                Refusal(
                    f"node group {group.name} (pinned at {at_version})",
                    target_text,
                    f"it would be {target.minor - at_version.minor} minors behind the control plane; the "
                    f"kubelet supports at most {limit} (Kubernetes version skew policy): unpin it or "
                    "upgrade it first",
                )
            )
        elif at_version > current:
            plan.refusals.append(
                Refusal(
                    f"node group {group.name} (at {at_version})",
                    current_text,
                    "newer than its control plane: a node group never is (Kubernetes version skew policy)",
                )
            )
    if plan.refusals:
        plan.status = Status.REFUSED
        return plan
    if target == current:
        plan.status = Status.UP_TO_DATE
        return plan
    plan.hops, plan.invariant_checks, plan.skew_violations = chain(current, target, groups, plan.drain_hours)
    if plan.skew_violations:
        plan.status = Status.REFUSED
        plan.refusals.append(Refusal("plan", target_text, "; ".join(plan.skew_violations)))
    return plan


def _maintenance(plan: ClusterUpgrade, block: MaintenanceSpec | None, at: datetime) -> None:
    policy = policy_from_spec(block)
    if block is not None and block.drain_time.strip():
        seconds = duration_seconds(block.drain_time)
        if seconds is not None:
            plan.drain_hours, plan.drain_assumed = seconds / 3600, False
    plan.windows = describe_windows(block)
    plan.inside_window = policy.inside(at)
    upcoming = policy.next_start(at)
    plan.next_window = upcoming.isoformat() if upcoming is not None else None
    for scope in (ExclusionScope.NO_MINOR, ExclusionScope.NO_DISRUPTIVE):
        exclusion = policy.blocks(at, scope)
        if exclusion is not None:
            entry = {
                "scope": exclusion.scope.value,
                "until": exclusion.end.isoformat(),
                "reason": exclusion.reason,
            }
            if entry not in plan.held_by:
                plan.held_by.append(entry)


# --- the fleet ---------------------------------------------------------------------------------------------


@dataclass
class UpgradePlan:
    clusters: list[ClusterUpgrade]
    at: datetime
    target: str | None
    source: str  # "--to" | "--from"

    def to_dict(self) -> dict[str, Any]:
        by_status: dict[str, int] = {}
        for cluster in self.clusters:
            by_status[cluster.status.value] = by_status.get(cluster.status.value, 0) + 1
        return {
            "ok": not any(c.status is Status.REFUSED for c in self.clusters),
            "at": self.at.isoformat(),
            "target": self.target,
            "versions_from": self.source,
            "kubelet_max_minors_behind": KUBELET_MAX_MINORS_BEHIND,
            "summary": {
                "clusters": len(self.clusters),
                **by_status,
                "hops": sum(len(c.hops) for c in self.clusters),
                "gpu_hours_drained": round(sum(c.gpu_hours for c in self.clusters), 2),
                "invariant_checks": sum(c.invariant_checks for c in self.clusters),
                "skew_violations": sum(len(c.skew_violations) for c in self.clusters),
            },
            "clusters": [c.to_dict() for c in self.clusters],
        }


def upgrade_plan(
    spec: FleetSpec, *, at: datetime, target: str | None = None, previous: FleetSpec | None = None
) -> UpgradePlan:
    """The plan for every cluster of `spec`: to `target`, or from `previous`'s versions to `spec`'s."""
    if (target is None) == (previous is None):
        raise ValueError("give exactly one of target and previous")
    before: dict[str, str] = {}
    if previous is not None:
        before = {f"{p.key()}/{c.name}": declared_version(c) for p, c in previous.cluster_targets()}
    clusters = []
    for project, cluster in spec.cluster_targets():
        declared = declared_version(cluster)
        if target is not None:
            clusters.append(plan_cluster(project, cluster, declared, target, at))
            continue
        key = f"{project.key()}/{cluster.name}"
        if key not in before:
            clusters.append(ClusterUpgrade(key, cluster.backend.value, "", declared, Status.NEW))
            continue
        clusters.append(plan_cluster(project, cluster, before[key], declared, at))
    return UpgradePlan(clusters, at, target, "--to" if target is not None else "--from")
