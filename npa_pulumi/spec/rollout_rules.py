"""The rules of the fleet's `rollout:` block (staged rollouts, plan/rollout.py), with absolute spec paths."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator

from npa_pulumi.spec.durations import EXAMPLES, duration_seconds
from npa_pulumi.spec.models import FleetSpec, HaltOnFailuresSpec, RolloutSpec, RolloutWaveSpec
from npa_pulumi.spec.names import PathTuple
from npa_pulumi.spec.problems import RawProblem

HALT_ON = ("gate-failure", "policy-violation", "maintenance")
_HALT_ON_HINT = "expected gate-failure, policy-violation, maintenance, a list of them, or {failures: K}"
_WAVE_KEYS = ("clusters", "count", "percent", "rest")


def check_rollout(spec: FleetSpec) -> Iterator[RawProblem]:
    rollout = spec.rollout
    if rollout is None:
        return
    base: PathTuple = ("rollout",)
    if not rollout.waves:
        yield RawProblem(
            (*base, "waves"),
            "rollout.waves must be a non-empty list",
            "e.g. waves: [{clusters: [research/train]}, {count: 3}, {rest: true}]",
        )
    keys = [f"{project.key()}/{cluster.name}" for project, cluster in spec.cluster_targets()]
    for position, wave in enumerate(rollout.waves):
        yield from _wave(wave, (*base, "waves", position), position == len(rollout.waves) - 1, keys)
    yield from _limits(rollout, base)
    approval = rollout.approval
    if approval is not None:
        if not 2 <= approval.before <= max(2, len(rollout.waves)):
            yield RawProblem(
                (*base, "approval", "before"),
                f"approval.before {approval.before} names no wave after the first",
                f"a wave number from 2 to {len(rollout.waves)} (the first wave has nothing before it)",
            )
        if approval.min < 1:
            yield RawProblem((*base, "approval", "min"), "approval.min must be at least 1")


def _wave(wave: RolloutWaveSpec, path: PathTuple, last: bool, keys: list[str]) -> Iterator[RawProblem]:
    if wave.soak is not None:
        if duration_seconds(wave.soak) is None:
            yield RawProblem((*path, "soak"), f"soak {wave.soak!r} is not a duration", EXAMPLES)
        elif wave.rest:
            # A soak keeps the next wave waiting; nothing follows the rest wave.
            yield RawProblem((*path, "soak"), "the rest wave is the last: no wave waits for its soak")
    given = [key for key in _WAVE_KEYS if getattr(wave, key) is not None]
    if len(given) != 1:
        yield RawProblem(
            path,
            "a wave has exactly one of clusters, count, percent or rest "
            f"(found: {', '.join(given) or 'none'})",
            "split it into several waves",
        )
        return
    if wave.clusters is not None:
        if not wave.clusters:
            yield RawProblem((*path, "clusters"), "clusters must name at least one cluster")
        for index, selector in enumerate(wave.clusters):
            where = (*path, "clusters", index)
            if "/" not in selector:
                yield RawProblem(
                    where,
                    f"selector {selector!r} is not project-key/cluster-name",
                    "globs are allowed: research/*, */train",
                )
            elif not any(fnmatch.fnmatchcase(key, selector) for key in keys):
                yield RawProblem(
                    where,
                    f"selector {selector!r} matches no cluster of the fleet",
                    f"clusters: {', '.join(keys[:8])}{' ...' if len(keys) > 8 else ''}",
                )
    elif wave.count is not None and wave.count < 1:
        yield RawProblem((*path, "count"), "count must be at least 1")
    elif wave.percent is not None and not 1 <= wave.percent <= 100:
        yield RawProblem((*path, "percent"), "percent must be between 1 and 100")
    elif wave.rest is not None:
        if not wave.rest:
            yield RawProblem((*path, "rest"), "rest must be true (omit the wave instead)")
        elif not last:
            yield RawProblem((*path, "rest"), "rest takes every remaining cluster: it must be the last wave")


def _limits(rollout: RolloutSpec, base: PathTuple) -> Iterator[RawProblem]:
    for name in ("max_in_flight", "max_in_flight_per_reservation"):
        if getattr(rollout, name) < 0:
            yield RawProblem((*base, name), f"{name} must be 0 (no limit of its own) or more")
    halt = rollout.halt_on
    if isinstance(halt, HaltOnFailuresSpec):
        if halt.failures < 1:
            yield RawProblem((*base, "halt_on", "failures"), "failures must be at least 1")
    elif isinstance(halt, list):
        if not halt:
            yield RawProblem((*base, "halt_on"), "halt_on must name at least one condition", _HALT_ON_HINT)
        for index, item in enumerate(halt):
            if item not in HALT_ON:
                yield RawProblem((*base, "halt_on", index), f"unknown halt_on {item!r}", _HALT_ON_HINT)
    elif halt not in HALT_ON:
        yield RawProblem((*base, "halt_on"), f"unknown halt_on {halt!r}", _HALT_ON_HINT)
