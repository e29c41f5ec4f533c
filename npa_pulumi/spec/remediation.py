"""The fleet's `remediation:` block: its rules (absolute spec paths, what is valid) and the policy each
cluster ends up with once the fleet's settings and the overrides that match it are merged.

    remediation:
      allow_active_gpu_workloads: false      # never act on a node whose GPUs a workload holds
      escalate_after: 30m                    # a rung whose gate did not pass by then failed
      ladders:                               # per fault reason; a reason not named keeps the default
        gpu-error: [requalify, cordon-and-report, cloud-recovery, remove-from-group, flag-hardware]
        not-ready: [cordon-and-report, remove-from-group, flag-hardware]
      breakers: {cluster_percent: 20, capacity_block_percent: 20, fleet_percent: 20, window: 5m}
      repeat_offender: {incidents: 3, window: 7d}
      overrides:
        - clusters: [research/*]             # project-key/cluster-name globs
          allow_active_gpu_workloads: true
          breaker_percent: 50

Every field has a safe default, so a spec without the block remediates conservatively.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from npa_pulumi.spec.constants import DEFAULT_LADDER, FaultReason, Rung
from npa_pulumi.spec.durations import EXAMPLES, duration_seconds
from npa_pulumi.spec.models import FleetSpec, RemediationSpec
from npa_pulumi.spec.names import PathTuple
from npa_pulumi.spec.problems import RawProblem

REASONS_HINT = "fault reasons: " + ", ".join(r.value for r in FaultReason)
RUNGS_HINT = "rungs: " + ", ".join(r.value for r in Rung)

Ladders = Mapping[FaultReason, tuple[Rung, ...]]


@dataclass(frozen=True)
class ClusterRemediation:
    """The remediation policy of one cluster (the fleet's, with the overrides that match it applied)."""

    ladders: Mapping[FaultReason, tuple[Rung, ...]] = field(
        default_factory=lambda: {reason: DEFAULT_LADDER for reason in FaultReason}
    )
    allow_active_gpu_workloads: bool = False
    breaker_percent: int = 20
    escalate_after_s: float = 1800.0

    def ladder(self, reason: FaultReason) -> tuple[Rung, ...]:
        return self.ladders.get(reason, DEFAULT_LADDER)


@dataclass(frozen=True)
class FleetRemediation:
    """The fleet-wide settings: the breakers of capacity blocks and the fleet, their window, the
    repeat-offender rule, and each cluster's policy by `project-key/cluster-name`."""

    clusters: Mapping[str, ClusterRemediation]
    capacity_block_percent: int = 20
    fleet_percent: int = 20
    window_s: float | None = None  # None: one watch interval
    repeat_incidents: int = 3
    repeat_window_s: float = 7 * 86400.0

    def cluster(self, key: str) -> ClusterRemediation:
        return self.clusters.get(key) or ClusterRemediation()


def _ladders(raw: Mapping[str, Sequence[str]]) -> dict[FaultReason, tuple[Rung, ...]]:
    """Valid entries only: the rules report the rest."""
    found: dict[FaultReason, tuple[Rung, ...]] = {}
    for key, rungs in raw.items():
        if key in FaultReason.__members__.values():
            found[FaultReason(key)] = tuple(Rung(r) for r in rungs if r in Rung.__members__.values())
    return found


def resolve(spec: FleetSpec) -> FleetRemediation:
    """Each cluster's policy: the fleet's settings, then each override that matches it in order."""
    block = spec.remediation
    base = {reason: DEFAULT_LADDER for reason in FaultReason} | _ladders(block.ladders)
    escalate = duration_seconds(block.escalate_after) or 1800.0
    clusters: dict[str, ClusterRemediation] = {}
    for project, cluster in spec.cluster_targets():
        key = f"{project.key()}/{cluster.name}"
        ladders, allow, percent = dict(base), block.allow_active_gpu_workloads, block.breakers.cluster_percent
        for override in block.overrides:
            if not any(fnmatch.fnmatchcase(key, s) for s in override.clusters):
                continue
            ladders |= _ladders(override.ladders or {})
            allow = (
                allow if override.allow_active_gpu_workloads is None else override.allow_active_gpu_workloads
            )
            percent = percent if override.breaker_percent is None else override.breaker_percent
        clusters[key] = ClusterRemediation(ladders, allow, percent, escalate)
    return FleetRemediation(
        clusters=clusters,
        capacity_block_percent=block.breakers.capacity_block_percent,
        fleet_percent=block.breakers.fleet_percent,
        window_s=duration_seconds(block.breakers.window) if block.breakers.window else None,
        repeat_incidents=block.repeat_offender.incidents,
        repeat_window_s=duration_seconds(block.repeat_offender.window) or 7 * 86400.0,
    )


# ------------------------------------------------------------------------------------------- rules


def check_remediation(spec: FleetSpec) -> Iterator[RawProblem]:
    block: RemediationSpec = spec.remediation
    base: PathTuple = ("remediation",)
    yield from _duration(block.escalate_after, (*base, "escalate_after"))
    yield from _check_ladders(block.ladders, (*base, "ladders"))
    breakers = block.breakers
    for name in ("cluster_percent", "capacity_block_percent", "fleet_percent"):
        yield from _percent(getattr(breakers, name), (*base, "breakers", name))
    if breakers.window:
        yield from _duration(breakers.window, (*base, "breakers", "window"))
    repeat = block.repeat_offender
    if repeat.incidents < 2:
        yield RawProblem(
            (*base, "repeat_offender", "incidents"),
            "incidents must be at least 2 (one incident repeats nothing)",
            "the default is 3",
        )
    yield from _duration(repeat.window, (*base, "repeat_offender", "window"))
    keys = [f"{project.key()}/{cluster.name}" for project, cluster in spec.cluster_targets()]
    for index, override in enumerate(block.overrides):
        path: PathTuple = (*base, "overrides", index)
        if not override.clusters:
            yield RawProblem(
                (*path, "clusters"), "clusters must name at least one cluster", "e.g. [research/*]"
            )
        for position, selector in enumerate(override.clusters):
            if not any(fnmatch.fnmatchcase(key, selector) for key in keys):
                yield RawProblem(
                    (*path, "clusters", position),
                    f"selector {selector!r} matches no cluster of the fleet",
                    f"clusters: {', '.join(keys[:8])}{' ...' if len(keys) > 8 else ''}",
                )
        if override.ladders is not None:
            yield from _check_ladders(override.ladders, (*path, "ladders"))
        if override.breaker_percent is not None:
            yield from _percent(override.breaker_percent, (*path, "breaker_percent"))


def _check_ladders(ladders: Mapping[str, Sequence[str]], path: PathTuple) -> Iterator[RawProblem]:
    for key, rungs in ladders.items():
        if key not in FaultReason.__members__.values():
            yield RawProblem((*path, key), f"unknown fault reason {key!r}", REASONS_HINT)
            continue
        if not rungs:
            yield RawProblem((*path, key), "a ladder needs at least one rung", RUNGS_HINT)
        seen: set[str] = set()
        for index, rung in enumerate(rungs):
            if rung not in Rung.__members__.values():
                yield RawProblem((*path, key, index), f"unknown rung {rung!r}", RUNGS_HINT)
            elif rung in seen:
                yield RawProblem((*path, key, index), f"rung {rung!r} appears twice", "each rung once")
            seen.add(rung)


def _percent(value: int, path: PathTuple) -> Iterator[RawProblem]:
    if not 1 <= value <= 100:
        yield RawProblem(path, f"{path[-1]} must be between 1 and 100", "the default is 20")


def _duration(text: str, path: PathTuple) -> Iterator[RawProblem]:
    if duration_seconds(text) is None:
        yield RawProblem(path, f"{path[-1]} {text!r} is not a duration", EXAMPLES + " (or 7d)")
