"""Reading a Terraform state (format version 4: `resources[].instances[].attributes`) for the facts no
recipe output carries. Upstream k8s-training outputs no node-group ids (only GB300 racks'), so the ids of
the groups a stack made are read from its state's `nebius_mk8s_v1_node_group` resources, as the original
`npa fleet` does; each is then proven against the cloud before anything relies on it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

NODE_GROUP_TYPE: Final = "nebius_mk8s_v1_node_group"
CLUSTER_TYPE: Final = "nebius_mk8s_v1_cluster"


@dataclass(frozen=True)
class StateInstance:
    address: str  # module.x.type.name[index]
    type: str
    attributes: dict[str, Any]


def _address(resource: dict[str, Any], instance: dict[str, Any]) -> str:
    head = f"{resource.get('module')}." if resource.get("module") else ""
    mode = "data." if resource.get("mode") == "data" else ""
    key = instance.get("index_key")
    index = "" if key is None else (f"[{json.dumps(key)}]" if isinstance(key, str) else f"[{key}]")
    return f"{head}{mode}{resource.get('type')}.{resource.get('name')}{index}"


def instances(state: dict[str, Any] | str | None, type_: str) -> Iterator[StateInstance]:
    """Every managed instance of `type_` in the state (a parsed document or its text)."""
    if isinstance(state, str):
        try:
            state = json.loads(state) if state.strip() else None
        except json.JSONDecodeError:
            state = None
    if not isinstance(state, dict):
        return
    for resource in state.get("resources") or []:
        if not isinstance(resource, dict) or resource.get("mode", "managed") != "managed":
            continue
        if resource.get("type") != type_:
            continue
        for instance in resource.get("instances") or []:
            if isinstance(instance, dict) and isinstance(instance.get("attributes"), dict):
                yield StateInstance(_address(resource, instance), type_, instance["attributes"])


def node_group_ids(state: dict[str, Any] | str | None) -> list[str]:
    """The ids of the node groups the state holds, in state order."""
    return [str(i.attributes["id"]) for i in instances(state, NODE_GROUP_TYPE) if i.attributes.get("id")]


# The cloud objects a recipe's state holds, by the kind drift checks them as (bridge/drift.py).
LIVE_OBJECT_KINDS: Final[dict[str, str]] = {
    CLUSTER_TYPE: "cluster",
    NODE_GROUP_TYPE: "node_group",
    "nebius_compute_v1_filesystem": "filesystem",
    "nebius_compute_v1_gpu_cluster": "gpu_cluster",
}


def live_objects(state: dict[str, Any] | str | None) -> dict[str, dict[str, Any]]:
    """What the state says the recipe made, as drift's declaration (`{address: {kind, id[, node_count]}}`):
    a node group's `node_count` only while it has a fixed size (an autoscaled group's size is the
    autoscaler's). Upstream declares no such output, so its own state is the record."""
    if isinstance(state, str):
        try:
            state = json.loads(state) if state.strip() else None
        except json.JSONDecodeError:
            state = None
    found: dict[str, dict[str, Any]] = {}
    for type_, kind in LIVE_OBJECT_KINDS.items():
        for instance in instances(state, type_):
            object_id = instance.attributes.get("id")
            if not object_id:
                continue
            entry: dict[str, Any] = {"kind": kind, "id": str(object_id)}
            fixed = instance.attributes.get("fixed_node_count")
            if kind == "node_group" and isinstance(fixed, int) and not instance.attributes.get("autoscaling"):
                entry["node_count"] = fixed
            found[instance.address] = entry
    return found
