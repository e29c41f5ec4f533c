"""Where a cluster's node pools stand: which spec pool a node group belongs to, the versions the cloud says a
cluster runs, and the version a pinned pool holds (docs/upgrades.md, *Pins*). Shared by `upgrade run`
(sdk/upgrade.py) and by `up`/`preview`, which hold a pinned pool that has no `version` where its node groups
are (sdk/operations.py)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from npa_pulumi.cloud.errors import CloudError
from npa_pulumi.output.results import StackResult
from npa_pulumi.plan.upgrade import Minor
from npa_pulumi.spec import FleetSpec
from npa_pulumi.spec.models import ClusterSpec

if TYPE_CHECKING:
    from npa_pulumi.engine.orchestrator import Fleet

_VERSION_PREFIX = re.compile(r"v?(\d+)\.(\d+)")


# The spec's pools, and how upstream k8s-training names their node groups after the cluster.
POOLS: tuple[str, ...] = ("cpu_nodes", "gpu_nodes")
_GROUP_SUFFIXES: Mapping[str, tuple[str, ...]] = {
    "cpu_nodes": ("-ng-cpu",),
    "gpu_nodes": ("-ng-gpu-", "-ng-gb300-"),
}


def pool_of(cluster: str, group: str) -> str | None:
    """The spec pool (`cpu_nodes`, `gpu_nodes`) a node group of `cluster` belongs to; None: not the
    recipe's."""
    for pool, suffixes in _GROUP_SUFFIXES.items():
        for suffix in suffixes:
            if group == f"{cluster}{suffix}" or (suffix.endswith("-") and group.startswith(cluster + suffix)):
                return pool
    return None


@dataclass(frozen=True)
class LiveVersions:
    """What the cloud says a cluster runs: its control plane's version and each node group's ('' unknown)."""

    control_plane: str
    node_groups: Mapping[str, str] = field(default_factory=dict)


def live_minor(text: str) -> Minor | None:
    """The minor of a version as a cloud reports it (`1.31`, `1.31.4-nebius-node.1`, `v1.31.2`)."""
    match = _VERSION_PREFIX.match(text.strip())
    return Minor(int(match.group(1)), int(match.group(2))) if match else None


def held_versions(cluster: ClusterSpec, start: str, groups: Mapping[str, str]) -> dict[str, str]:
    """Each pinned pool's version: the spec's `version`, else the oldest its node groups report (`groups`:
    name -> version, read from the cloud), else `start` (its control plane's: the recipe put it there)."""
    held = {}
    for pool in POOLS:
        spec_pool = getattr(cluster, pool)
        if spec_pool is None or not spec_pool.pin or spec_pool.count <= 0:
            continue
        reported = [
            minor
            for name, version in groups.items()
            if pool_of(cluster.name, name) == pool and (minor := live_minor(version)) is not None
        ]
        held[pool] = spec_pool.version.strip() or (str(min(reported)) if reported else start)
    return held


def pinned_at(cluster: ClusterSpec, versions: Mapping[str, str]) -> ClusterSpec:
    """A copy of `cluster` whose listed pools are pinned at those versions."""
    copy = cluster.model_copy(deep=True)
    for pool, version in versions.items():
        spec_pool = getattr(copy, pool)
        if spec_pool is not None:
            spec_pool.pin, spec_pool.version = True, version
    return copy


def unversioned_pins(spec: FleetSpec, keys: Iterable[str]) -> list[str]:
    """The clusters (project-key/cluster-name, among `keys`) with a pinned pool that names no `version`:
    the ones whose pool an `up` holds where the cloud says its node groups are."""
    wanted = set(keys)
    return [
        key
        for project, cluster in spec.cluster_targets()
        if (key := f"{project.key()}/{cluster.name}") in wanted and _unversioned(cluster)
    ]


def _unversioned(cluster: ClusterSpec) -> list[str]:
    """Its pinned pools with nodes and no `version` (a soperator cluster's pins are its own setting)."""
    if cluster.soperator is not None:
        return []
    return [
        pool
        for pool in POOLS
        if (p := getattr(cluster, pool)) is not None and p.pin and p.count > 0 and not p.version.strip()
    ]


def held_in_place(spec: FleetSpec, live: Mapping[str, LiveVersions]) -> tuple[FleetSpec, dict[str, str]]:
    """A copy of `spec` in which every pinned pool without a `version` holds the oldest version the cloud
    reports for its node groups (`live`: project-key/cluster-name -> what the cloud says it runs), and
    what was held (`project-key/cluster-name.pool` -> version). A cluster the cloud has no report of (not
    deployed yet) is left as it is: its pools start at its `k8s_version`."""
    copy = spec.model_copy(deep=True)
    held: dict[str, str] = {}
    for project in copy.projects:
        for index, cluster in enumerate(project.clusters):
            key = f"{project.key()}/{cluster.name}"
            if key not in live or not (pools := _unversioned(cluster)):
                continue
            found = held_versions(cluster, "", live[key].node_groups)
            reported = {pool: version for pool, version in found.items() if pool in pools and version}
            if reported:
                project.clusters[index] = pinned_at(cluster, reported)
                held.update({f"{key}.{pool}": version for pool, version in reported.items()})
    return copy, held


class CloudVersions:
    """Reads clusters' versions from the cloud: the control plane's, and each node group's."""

    def __init__(self, fleet: Fleet) -> None:
        self._fleet = fleet

    def __call__(self, stacks: Mapping[str, StackResult]) -> Mapping[str, LiveVersions]:
        cloud = self._fleet.context.cloud
        found = {}
        for key, stack in stacks.items():
            if not stack.cluster_id:
                continue
            try:
                cluster = cloud.get_cluster(stack.cluster_id)
                groups = cloud.list_node_groups(stack.cluster_id)
            except CloudError:
                continue  # not read: the caller counts it a violation when it moved
            found[key] = LiveVersions(cluster.k8s_version, {g.name: g.version for g in groups})
        return found

    def close(self) -> None:
        self._fleet.close()
