"""Drift: cloud objects a recipe made that were deleted or changed outside the fleet.

A recipe may declare the objects it made in an output named `npa_live_objects`: Terraform address → `{kind,
id, node_count}` (`kind` one of cluster, node_group, filesystem, gpu_cluster; `node_count` only for a
fixed-size node group). soperator's local stand-in (`recipes/local-soperator`) does, because its
`terraform_data` resources cannot read the cloud back: a refresh alone never notices a cluster deleted
behind Terraform's back. `live_drift` compares that declaration with the cloud; the Terraform bridge then
re-creates each drifted address (`terraform apply -replace=ADDRESS`), and `status` and `up` use the same
check to decide a stack needs work.

Recipes that do not declare the output (upstream k8s-training, whose provider reads the cloud itself) rely
on Terraform's refresh and plan instead (components/terraform_module.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from npa_pulumi.cloud.errors import NotFound
from npa_pulumi.cloud.project_reads import LiveReader

LIVE_OBJECTS_OUTPUT = "npa_live_objects"


@dataclass(frozen=True)
class Drift:
    address: str  # the Terraform address that made the object
    kind: str
    id: str
    reason: str  # "deleted outside the fleet" | "resized outside the fleet: ..."

    def as_dict(self) -> dict[str, str]:
        return {"address": self.address, "kind": self.kind, "id": self.id, "reason": self.reason}


def declared_objects(outputs: Mapping[str, Any] | None) -> dict[str, dict[str, Any]] | None:
    """The recipe's `npa_live_objects` output, or None when the recipe declares none."""
    declared = (outputs or {}).get(LIVE_OBJECTS_OUTPUT)
    if not isinstance(declared, Mapping):
        return None
    return {str(k): dict(v) for k, v in declared.items() if isinstance(v, Mapping) and v.get("id")}


def live_drift(cloud: LiveReader, project_id: str, declared: Mapping[str, Mapping[str, Any]]) -> list[Drift]:
    """Every declared object that the cloud no longer has, or whose node count differs from the declared
    one, in the order declared. Errors other than NotFound propagate (a check that could not run is not
    a finding)."""
    found: list[Drift] = []
    listed: dict[str, set[str]] = {}

    def listed_ids(kind: str) -> set[str]:
        if kind not in listed:
            items = (
                cloud.list_filesystems(project_id)
                if kind == "filesystem"
                else cloud.list_gpu_clusters(project_id)
            )
            listed[kind] = {item.id for item in items}
        return listed[kind]

    for address, entry in declared.items():
        kind, object_id = str(entry.get("kind", "")), str(entry["id"])
        gone = Drift(address, kind, object_id, "deleted outside the fleet")
        try:
            if kind == "cluster":
                cloud.get_cluster(object_id)
            elif kind == "node_group":
                group = cloud.get_node_group(object_id)
                want = entry.get("node_count")
                if isinstance(want, int | float) and int(want) != group.target_node_count:
                    live = group.target_node_count
                    reason = f"resized outside the fleet: {live} nodes, the spec says {int(want)}"
                    found.append(Drift(address, kind, object_id, reason))
            elif kind in ("filesystem", "gpu_cluster") and object_id not in listed_ids(kind):
                found.append(gone)
        except NotFound:
            found.append(gone)
    return found
