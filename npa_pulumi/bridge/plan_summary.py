"""Terraform's own plan, summarized for a preview: what each resource will do and which changes destroy.

`summarize(plan)` reads the document `terraform show -json PLANFILE` prints and returns
`{add, change, destroy, replace, resources: [{address, action, destructive, attributes}]}`:

* `action` is create | update | delete | replace (no-ops and reads are left out);
* `destructive` marks a replacement or deletion of what holds workloads or data: node groups, clusters
  and filesystems (a replaced GPU node group drains and re-provisions every node in it); and a node
  group's *reshaping*, marked `reshape`: one instance of a node-group resource shrinks (`fixed_node_count`
  down) while the plan creates other instances of the same resource, i.e. the same pool laid out in more
  groups (one group of N becoming N groups of one after `adopt`): Terraform calls it an update and
  creates, but the nodes it takes from the shrunk group are drained and re-provisioned in the new ones;
* `disruption` classes every change `{class, reason}`: `disruptive` when it drains or replaces nodes or
  loses data (a node group replaced, deleted, reshaped, scaled down, its Kubernetes version, node template
  or driver preset changed; the control plane's version; a fabric or filesystem replaced; the GPU Operator
  release changed) or `in-place` (nothing running is drained), each with its reason (see `classify`);
* `attributes` lists each changed attribute as `{name, before, after}`, flattened one level (so a
  `terraform_data`'s `triggers_replace.preset` shows which request field changed); values Terraform marks
  sensitive are `(sensitive)`, values only known after apply are `(known after apply)`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from npa_pulumi.cloud.redaction import SENSITIVE

UNKNOWN = "(known after apply)"
# Address or type fragments of the resources whose replacement destroys workloads or data.
_DESTRUCTIVE_KINDS = ("node_group", "cluster", "filesystem")
_MAX_VALUE_CHARS = 200


def _action(actions: list[str]) -> str | None:
    if "delete" in actions and "create" in actions:
        return "replace"
    for name in ("create", "update", "delete"):
        if actions == [name]:
            return name
    return None  # no-op, read


# Types of the Kubernetes-side providers: what they manage lives in the cluster (a chart, an annotation),
# whatever its name says (upstream's `helm_release.filesystem_csi` is the CSI driver, not the filesystem).
_KUBERNETES_SIDE = ("helm_", "kubernetes_", "kubectl_")


def _name_of(address: str, resource_type: str) -> str:
    """The resource's name where it may tell what the resource is ('' for a Kubernetes-side type)."""
    if resource_type.startswith(_KUBERNETES_SIDE):
        return ""
    return address.rsplit(".", 1)[-1].split("[", 1)[0]


def is_destructive(address: str, resource_type: str, action: str) -> bool:
    if action not in ("replace", "delete"):
        return False
    name = _name_of(address, resource_type)
    return any(kind in resource_type or kind in name for kind in _DESTRUCTIVE_KINDS)


def kind_of(address: str, resource_type: str) -> str:
    """node_group | cluster | filesystem | other: what a resource is, for fleet-wide counts."""
    name = _name_of(address, resource_type)
    for kind in _DESTRUCTIVE_KINDS:
        if kind in resource_type or kind in name:
            # "gpu_cluster" is InfiniBand fabric, not a Kubernetes cluster
            if kind == "cluster" and ("gpu_cluster" in name or "gpu_cluster" in resource_type):
                return "gpu_cluster"
            return kind
    return "other"


def _at(items: list[Any], index: int) -> Any:
    return items[index] if index < len(items) else None


class _Masked(str):
    """SENSITIVE in every output, carrying a digest of the value it hides so that two masked values can
    still be compared (`terraform show -json` holds sensitive values, marked in *_sensitive)."""

    digest: str

    @classmethod
    def of(cls, value: Any) -> _Masked:
        masked = cls(SENSITIVE)
        masked.digest = hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()
        return masked


def _shown(value: Any, sensitive: Any, unknown: Any) -> Any:
    if sensitive is True:
        return _Masked.of(value)
    if unknown is True:
        return UNKNOWN
    if isinstance(value, Mapping):
        sens = sensitive if isinstance(sensitive, Mapping) else {}
        unk = unknown if isinstance(unknown, Mapping) else {}
        shown = {k: _shown(v, sens.get(k), unk.get(k)) for k, v in value.items()}
        # Terraform leaves attributes only known after apply out of `after`, and marks them in after_unknown.
        shown.update({str(k): UNKNOWN for k, v in unk.items() if v is True and k not in value})
        return shown
    if isinstance(value, list):
        sens_list = sensitive if isinstance(sensitive, list) else []
        unk_list = unknown if isinstance(unknown, list) else []
        return [_shown(v, _at(sens_list, i), _at(unk_list, i)) for i, v in enumerate(value)]
    if isinstance(value, str) and len(value) > _MAX_VALUE_CHARS:
        return value[:_MAX_VALUE_CHARS] + "…"
    return value


def _flat(value: Any, prefix: str) -> dict[str, Any]:
    """Nested objects flattened to their leaves: {"a": {"b": {"c": 1}}} -> {"a.b.c": 1}, so a change names
    the attribute that changed (`template.resources.preset`), not the object around it; lists kept whole."""
    if isinstance(value, Mapping) and value:
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def changed_attributes(change: Mapping[str, Any]) -> list[dict[str, Any]]:
    before = _shown(change.get("before"), change.get("before_sensitive"), None)
    after = _shown(change.get("after"), change.get("after_sensitive"), change.get("after_unknown"))
    before_flat: dict[str, Any] = {}
    after_flat: dict[str, Any] = {}
    for name, value in (before or {}).items() if isinstance(before, Mapping) else []:
        before_flat.update(_flat(value, name))
    for name, value in (after or {}).items() if isinstance(after, Mapping) else []:
        after_flat.update(_flat(value, name))
    found = []
    for name in sorted(set(before_flat) | set(after_flat)):
        old, new = before_flat.get(name), after_flat.get(name)
        if isinstance(old, _Masked) and isinstance(new, _Masked):
            # Both hidden: the attribute is named when its values differ (a node group's cloud-init user
            # data), the values never shown.
            if old.digest != new.digest:
                found.append({"name": name, "before": SENSITIVE, "after": SENSITIVE})
        elif old != new or (new == UNKNOWN and old is not None):
            found.append({"name": name, "before": _plain(old), "after": _plain(new)})
    return found


def _plain(value: Any) -> Any:
    return SENSITIVE if isinstance(value, _Masked) else value


def summarize(plan: Mapping[str, Any]) -> dict[str, Any]:
    counts = {"add": 0, "change": 0, "destroy": 0, "replace": 0}
    resources = []
    for entry in plan.get("resource_changes") or []:
        if entry.get("mode", "managed") != "managed":
            continue
        change = entry.get("change") or {}
        action = _action(list(change.get("actions") or []))
        if action is None:
            continue
        address, resource_type = str(entry.get("address", "")), str(entry.get("type", ""))
        counts[{"create": "add", "update": "change", "delete": "destroy", "replace": "replace"}[action]] += 1
        resources.append(
            {
                "address": address,
                "type": resource_type,
                "action": action,
                "kind": kind_of(address, resource_type),
                "destructive": is_destructive(address, resource_type, action),
                "attributes": [] if action == "delete" else changed_attributes(change),
            }
        )
    _mark_reshapes(resources)
    for resource in resources:
        disruption, reason = classify(resource)
        resource["disruption"] = {"class": disruption.value, "reason": reason}
    return {**counts, "resources": resources}


def _resource_of(address: str) -> str:
    """`module.m.nebius_mk8s_v1_node_group.gpu[1]` -> `module.m.nebius_mk8s_v1_node_group.gpu`."""
    return address.rsplit("[", 1)[0] if address.endswith("]") else address


def _node_count_down(resource: Mapping[str, Any]) -> bool:
    for attribute in resource.get("attributes") or []:
        before, after = attribute.get("before"), attribute.get("after")
        if attribute.get("name") == "fixed_node_count" and isinstance(before, int) and isinstance(after, int):
            return after < before
    return False


def _mark_reshapes(resources: list[dict[str, Any]]) -> None:
    """Flag a node group that shrinks while the plan creates siblings of the same resource (a reshaped
    pool) as destructive, `reshape`: its nodes move to new groups (drained, re-provisioned)."""
    created = {
        _resource_of(str(r["address"]))
        for r in resources
        if r["kind"] == "node_group" and r["action"] == "create"
    }
    for resource in resources:
        if (
            resource["kind"] == "node_group"
            and resource["action"] == "update"
            and _resource_of(str(resource["address"])) in created
            and _node_count_down(resource)
        ):
            resource["destructive"] = resource["reshape"] = True


def replaced_node_group_addresses(summary: Mapping[str, Any]) -> list[str]:
    """The node groups the plan replaces, deletes or reshapes (what the gpu-node-group-replacement policy
    judges)."""
    return [
        str(r.get("address"))
        for r in summary.get("resources") or []
        if r.get("kind") == "node_group"
        and r.get("destructive")
        and (r.get("action") in ("replace", "delete") or r.get("reshape"))
    ]


def replaced_node_groups(summary: Mapping[str, Any]) -> int:
    return len(replaced_node_group_addresses(summary))


# --- disruption classes --------------------------------------------------------------------------------


class Disruption(StrEnum):
    """Whether a change drains or replaces what runs (or loses data), or leaves it where it is."""

    DISRUPTIVE = "disruptive"
    IN_PLACE = "in-place"


# Node-group attributes whose change leaves the nodes alone (Nebius updates the group's record only).
_NODE_GROUP_IN_PLACE = ("labels", "name", "strategy", "autoscaling", "metadata")
# Markers of the GPU Operator's release in upstream's addresses (the Marketplace release in
# modules/gpu-operator, the helm_release in modules/gpu-operator-custom).
_GPU_OPERATOR_MARKERS = ("gpu-operator", "gpu_operator")


# Attributes the service sets (read-only): a real plan marks them "known after apply" on every update, so
# they say nothing about what the change does.
_OUTPUT_ONLY = ("id", "status", "created_at", "updated_at", "resource_version")


def _changed(resource: Mapping[str, Any]) -> list[str]:
    names = (str(a.get("name")) for a in resource.get("attributes") or [])
    return [name for name in names if name.split(".", 1)[0] not in _OUTPUT_ONLY]


def _node_count_change(resource: Mapping[str, Any]) -> int:
    for attribute in resource.get("attributes") or []:
        before, after = attribute.get("before"), attribute.get("after")
        if (
            attribute.get("name") in ("fixed_node_count", "size")
            and isinstance(before, int)
            and isinstance(after, int)
        ):
            return after - before
    return 0


def classify(resource: Mapping[str, Any]) -> tuple[Disruption, str]:
    """The disruption class of one summarized Terraform change, and why (read from the action, the resource
    and the attributes Terraform's plan says change; never from what the spec meant)."""
    action, kind = str(resource.get("action")), str(resource.get("kind"))
    address, resource_type = str(resource.get("address", "")), str(resource.get("type", ""))
    if resource.get("reshape"):
        return Disruption.DISRUPTIVE, "reshape: nodes move to new node groups (drained, re-provisioned)"
    if kind == "node_group" or "instance_group" in resource_type:
        return _node_group(action, resource)
    if action == "create":
        return Disruption.IN_PLACE, f"creates {resource_type or address}: nothing running moves"
    if kind == "cluster":
        if action in ("replace", "delete"):
            return (
                Disruption.DISRUPTIVE,
                f"the Kubernetes cluster is {_done(action)}: every workload on it goes",
            )
        if any(name.startswith("control_plane.version") or name == "version" for name in _changed(resource)):
            return Disruption.DISRUPTIVE, "control-plane Kubernetes version change"
        return Disruption.IN_PLACE, "cluster settings updated in place"
    if kind == "gpu_cluster" and action in ("replace", "delete"):
        return (
            Disruption.DISRUPTIVE,
            f"the InfiniBand GPU cluster is {_done(action)}: its nodes leave the fabric",
        )
    if kind == "filesystem" and action in ("replace", "delete"):
        return Disruption.DISRUPTIVE, f"the shared filesystem is {_done(action)}: its data is lost"
    if any(marker in address for marker in _GPU_OPERATOR_MARKERS):
        # The release's values are sensitive in the plan (the Marketplace release), so which one changed
        # cannot be read: a driver change makes the operator drain every GPU node, so assume it may.
        return Disruption.DISRUPTIVE, (
            f"GPU Operator release {_done(action)}: a driver change drains GPU nodes one by one"
        )
    if "mig" in address and resource_type == "kubernetes_job_v1":
        return Disruption.DISRUPTIVE, "MIG reconfiguration rerun: GPUs are repartitioned, GPU pods evicted"
    return Disruption.IN_PLACE, f"{_done(action)} {resource_type or address}: no node drained"


def _done(action: str) -> str:
    return {"update": "updated", "replace": "replaced", "delete": "deleted", "create": "created"}.get(
        action, action
    )


def _node_group(action: str, resource: Mapping[str, Any]) -> tuple[Disruption, str]:
    if action == "create":
        return Disruption.IN_PLACE, "new node group: nothing running moves"
    if action == "replace":
        return Disruption.DISRUPTIVE, "node group replaced: every node drained and re-provisioned"
    if action == "delete":
        return Disruption.DISRUPTIVE, "node group deleted: its nodes are drained"
    names = _changed(resource)
    delta = _node_count_change(resource)
    # A scale-down that comes with a roll still drains the nodes it removes: the reason says both.
    also = f"; scale down by {-delta}" if delta < 0 else ""
    if "version" in names:
        return Disruption.DISRUPTIVE, (
            f"Kubernetes version change: every node rolled (drained, re-provisioned){also}"
        )
    if any(name.startswith("template.gpu_settings") for name in names):
        return Disruption.DISRUPTIVE, f"driver preset change (template.gpu_settings): every node rolled{also}"
    template = sorted(name for name in names if name.startswith("template."))
    if template:
        return Disruption.DISRUPTIVE, (
            f"node template change ({', '.join(template)}): every node re-created{also}"
        )
    if delta < 0:
        return Disruption.DISRUPTIVE, f"scale down by {-delta}: those nodes are drained"
    if delta > 0:
        return Disruption.IN_PLACE, f"scale up by {delta}: nodes added"
    if not names:
        # Terraform updates something the plan does not let us read: what cannot be read may roll.
        return Disruption.DISRUPTIVE, "node group updated (no readable attribute changed): may roll its nodes"
    if all(name.split(".", 1)[0] in _NODE_GROUP_IN_PLACE for name in names):
        return Disruption.IN_PLACE, "node group settings only (" + ", ".join(names) + ")"
    return Disruption.DISRUPTIVE, f"node group updated ({', '.join(names)}): may roll its nodes"


# Pulumi resource types of a stack whose changes leave running workloads alone whatever they do.
_CHECKS = ("npa:GpuHealthGate", "npa:GpuFabricCheck", "npa:KubeRayGate", "npa:SlurmGate", "npa:BucketProbe")
_MODULES = ("npa:TerraformModule",)
_REPLACEMENT_STEPS = frozenset(
    {"create-replacement", "delete-replaced", "discard-replaced", "import-replacement"}
)


def stack_disruption(
    diff: Sequence[Mapping[str, Any]], terraform: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A stack's changes classed from its diff (Pulumi's steps) and Terraform's plan for its cluster:
    `{class: disruptive | in-place | none, reasons: [{resource, class, reason}]}`. A Terraform module's
    update takes its classes from Terraform's plan; with no plan read it is assumed disruptive, saying so."""
    reasons: list[dict[str, str]] = []
    for entry in diff:
        op, kind = str(entry.get("op") or ""), str(entry.get("type") or "")
        if op in _REPLACEMENT_STEPS or op in ("same", "read", "refresh"):
            continue
        name = str(entry.get("urn") or "").rsplit("::", 1)[-1]
        if kind.endswith(_MODULES) and op in ("update", "replace", "delete"):
            reasons += _module_change(name, op, terraform)
        elif kind.endswith(_CHECKS) or op == "create":
            reasons.append(_reason(name, Disruption.IN_PLACE, f"{op}: drains nothing"))
        elif op in ("replace", "delete") and kind.endswith(("npa:Project", "npa:Network", "npa:Bucket")):
            reasons.append(_reason(name, Disruption.DISRUPTIVE, f"{kind.rsplit(':', 1)[-1]} {_done(op)}"))
        else:
            reasons.append(_reason(name, Disruption.IN_PLACE, f"{op}: no node drained"))
    if not reasons:
        return {"class": "none", "reasons": []}
    disruptive = any(r["class"] == Disruption.DISRUPTIVE.value for r in reasons)
    ordered = sorted(reasons, key=lambda r: r["class"] != Disruption.DISRUPTIVE.value)
    return {"class": (Disruption.DISRUPTIVE if disruptive else Disruption.IN_PLACE).value, "reasons": ordered}


def _reason(resource: str, disruption: Disruption, why: str) -> dict[str, str]:
    return {"resource": resource, "class": disruption.value, "reason": why}


def _module_change(name: str, op: str, terraform: Mapping[str, Any] | None) -> list[dict[str, str]]:
    if op in ("replace", "delete"):
        return [_reason(name, Disruption.DISRUPTIVE, f"the cluster's Terraform module is {_done(op)}")]
    resources = (terraform or {}).get("resources")
    if not terraform or terraform.get("error") or terraform.get("skipped") or resources is None:
        why = (terraform or {}).get("error") or (terraform or {}).get("skipped") or "no plan"
        return [
            _reason(name, Disruption.DISRUPTIVE, f"Terraform's plan was not read ({why}): assumed disruptive")
        ]
    return [
        _reason(str(r.get("address")), Disruption(r["disruption"]["class"]), str(r["disruption"]["reason"]))
        for r in resources
        if r.get("disruption")
    ] or [_reason(name, Disruption.IN_PLACE, "Terraform plans no change")]
