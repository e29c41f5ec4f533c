"""Whether `up` may apply a deployed cluster's changes now, under its maintenance windows and exclusions.

The mechanism (docs/upgrades.md, "`up` and the windows"): a cluster stack is applied whole or not at all, so
a cluster whose Terraform plan holds a disruptive change that may not start now is **deferred whole**: its
stack is not updated, nothing of it is touched, and its in-place changes wait with the disruptive ones.
Everything else of the run (project stacks, clusters whose changes are all in-place, new clusters) applies.
Holding only the disruptive inputs at their deployed values would need the deployed values of every input
that can drain a node (the stack records no Kubernetes version, for one); deferring the stack needs none.

What may not start now, at `moment`:
* any disruptive change, outside every window (a cluster without windows is always inside one);
* any disruptive change, under `no-disruptive`;
* a Kubernetes version change, under `no-upgrades`; a minor hop, under `no-minor` (a version change whose
  minors cannot be read counts as a minor hop).
A Terraform plan that could not be read is assumed to hold a disruptive change (never guessed in-place).

Pure: the changes are the Terraform plan summary's resources (bridge/plan_summary.py), each with its
`disruption: {class, reason}` and its `attributes: [{name, before, after}]`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from npa_pulumi.plan.upgrade import parse_minor
from npa_pulumi.plan.windows import Exclusion, MaintenancePolicy
from npa_pulumi.spec.maintenance_rules import ExclusionScope

DISRUPTIVE = "disruptive"
# Attribute names (Terraform's plan, flattened) that carry a Kubernetes version: the cluster's control plane,
# a node group's `version`, and the local recipe's replace triggers.
_VERSION_NAMES = ("version", "control_plane.version", "k8s_version")


@dataclass(frozen=True)
class PendingChange:
    resource: str
    reason: str  # the disruption class's reason (bridge/plan_summary.py)
    held_by: str  # what holds it: outside-window | no-disruptive | no-upgrades | no-minor | unread-plan

    def to_dict(self) -> dict[str, str]:
        return {"resource": self.resource, "reason": self.reason, "held_by": self.held_by}


@dataclass(frozen=True)
class Deferral:
    """A cluster's changes held back now: each pending disruptive change, and when they may next start."""

    changes: tuple[PendingChange, ...]
    inside_window: bool
    next_window: datetime | None  # the first moment every hold is lifted (None: no window ever opens)
    exclusions: tuple[Exclusion, ...] = field(default=())

    @property
    def reason(self) -> str:
        holds = []
        if not self.inside_window:
            holds.append("outside its maintenance windows")
        holds += [f"{e.scope.value} until {e.end.isoformat()}" for e in self.exclusions]
        when = f"; next window {self.next_window.isoformat()}" if self.next_window else ""
        return (
            f"{len(self.changes)} disruptive change(s) pending ({', '.join(holds)}){when}: the cluster's "
            "stack is not updated; its in-place changes wait with them"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "inside_window": self.inside_window,
            "next_window": self.next_window.isoformat() if self.next_window else None,
            "exclusions": [
                {"scope": e.scope.value, "until": e.end.isoformat(), "reason": e.reason}
                for e in self.exclusions
            ],
            "changes": [c.to_dict() for c in self.changes],
        }


def restricted(policy: MaintenancePolicy, moment: datetime) -> bool:
    """Whether anything may be held at `moment` (so `up` needs Terraform's plan to decide)."""
    return not policy.inside(moment) or bool(policy.exclusions_at(moment))


def defer(
    policy: MaintenancePolicy, moment: datetime, terraform: Mapping[str, Any] | None
) -> Deferral | None:
    """The deferral of a deployed cluster whose Terraform plan is `terraform` (None or `{error}` /
    `{skipped}`: not read), or None when every change may be applied now."""
    if not restricted(policy, moment):
        return None
    inside = policy.inside(moment)
    resources = (terraform or {}).get("resources")
    if not terraform or terraform.get("error") or terraform.get("skipped") or resources is None:
        why = str((terraform or {}).get("error") or (terraform or {}).get("skipped") or "no plan")
        change = PendingChange("terraform", f"Terraform's plan was not read ({why}): assumed disruptive", "")
        holds = _holds_any(policy, moment, inside)
        if not holds:
            return None
        return _deferral(policy, moment, inside, [(change, holds[0])])
    pending: list[tuple[PendingChange, str]] = []
    for resource in resources:
        holder = _holder(policy, moment, inside, resource)
        if holder is not None:
            disruption = resource.get("disruption") or {}
            pending.append(
                (PendingChange(str(resource.get("address")), str(disruption.get("reason", "")), ""), holder)
            )
    return _deferral(policy, moment, inside, pending) if pending else None


def _holds_any(policy: MaintenancePolicy, moment: datetime, inside: bool) -> list[str]:
    """What holds a change of unknown kind: everything in force that could (it may be a minor hop)."""
    holds = [] if inside else ["outside-window"]
    return holds + [e.scope.value for e in policy.exclusions_at(moment)]


def _holder(
    policy: MaintenancePolicy, moment: datetime, inside: bool, resource: Mapping[str, Any]
) -> str | None:
    """What holds this change now (None: it may go)."""
    if (resource.get("disruption") or {}).get("class") != DISRUPTIVE:
        return None
    versions = _version_changes(resource)
    if versions:
        if policy.blocks(moment, ExclusionScope.NO_UPGRADES) is not None:
            return ExclusionScope.NO_UPGRADES.value
        if any(_minor_hop(before, after) for before, after in versions) and (
            policy.blocks(moment, ExclusionScope.NO_MINOR) is not None
        ):
            return ExclusionScope.NO_MINOR.value
    if policy.blocks(moment, ExclusionScope.NO_DISRUPTIVE) is not None:
        return ExclusionScope.NO_DISRUPTIVE.value
    return None if inside else "outside-window"


def _version_changes(resource: Mapping[str, Any]) -> list[tuple[Any, Any]]:
    found = []
    for attribute in resource.get("attributes") or []:
        name = str(attribute.get("name", ""))
        if name in _VERSION_NAMES or name.endswith(tuple(f".{n}" for n in _VERSION_NAMES)):
            found.append((attribute.get("before"), attribute.get("after")))
    return found


def _minor_hop(before: Any, after: Any) -> bool:
    """A change of minor (or one whose minors cannot be read: assumed a minor hop)."""
    old, new = parse_minor(str(before or "")), parse_minor(str(after or ""))
    return old is None or new is None or old != new


def _deferral(
    policy: MaintenancePolicy, moment: datetime, inside: bool, pending: Sequence[tuple[PendingChange, str]]
) -> Deferral:
    changes = tuple(PendingChange(c.resource, c.reason, holder) for c, holder in pending)
    scopes = {holder for _, holder in pending}
    exclusions = tuple(e for e in policy.exclusions_at(moment) if e.scope.value in scopes)
    return Deferral(changes, inside, next_opening(policy, moment, exclusions), exclusions)


def next_opening(
    policy: MaintenancePolicy, moment: datetime, exclusions: Sequence[Exclusion] = ()
) -> datetime | None:
    """The first moment from `moment` on at which the holding `exclusions` have ended and a window is open:
    when a deferred change may next start (None: no window opens within reach)."""
    start = max([moment, *(e.end for e in exclusions)])
    return start if policy.inside(start) else policy.next_start(start)


__all__ = ("Deferral", "PendingChange", "defer", "next_opening", "restricted")
