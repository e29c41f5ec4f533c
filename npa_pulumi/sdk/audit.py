"""The SDK's side of the audit trail (engine/audit.py): the record a mutating operation (or a repair:
`verify_mig` with `reconcile`, `health` with `requalify`) appends when it ends, and `audit`, the records
of a fleet.

    records = audit("fleet.yaml", since=datetime(2026, 1, 1, tzinfo=UTC))

Recording never fails an operation: a backend that keeps no trail (or refuses the write) leaves a warning
on the result.
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from npa_pulumi.errors import NpaError
from npa_pulumi.output.results import FleetResult
from npa_pulumi.spec import FleetSpec, load_spec

if TYPE_CHECKING:
    from npa_pulumi.engine.audit import AuditRecord, Who
    from npa_pulumi.engine.orchestrator import Fleet
    from npa_pulumi.output.health import FleetHealth
    from npa_pulumi.plan import Target
    from npa_pulumi.sdk.requests import FleetRequest, Selection

log = logging.getLogger(__name__)


class AuditTrailUnavailable(NpaError):
    """The backend keeps no audit trail readable from here (exit 1)."""

    kind = "audit-unavailable"


class Selected(Protocol):
    """What `sdk.operations.Selected` holds that a record reads (a protocol: operations imports this)."""

    @property
    def spec(self) -> FleetSpec: ...
    @property
    def targets(self) -> list[Target]: ...
    @property
    def selection(self) -> Selection: ...
    @property
    def spec_path(self) -> str | None: ...


def recorded(
    selected: Selected,
    request: FleetRequest,
    fleet: Fleet,
    started: datetime,
    result: FleetResult,
    repair: str | None = None,
) -> FleetResult:
    """Append the run's record beside its stacks; `result`, with a warning when it could not be. A run
    refused before any stack (preflight, the budget, a recipe check) changed nothing, the backend
    included: it leaves no record. `repair` names the repair a verifier ran (`reconcile`)."""
    if not result.stacks and not result.phases:
        return result
    from npa_pulumi.engine import audit as trail

    entry = trail.record(
        result, _who(request, fleet), started, _selection(selected), _digest(selected), repair=repair
    )
    warning = _append(result.backend, entry)
    if warning:
        result.warnings.append(warning)
    return result


def recorded_requalify(
    selected: Selected, request: FleetRequest, fleet: Fleet, started: datetime, report: FleetHealth
) -> FleetHealth:
    """`health --requalify`'s record (when it probed, or looked for nodes to probe, on any cluster);
    `report`, with a warning when the record could not be written."""
    from npa_pulumi.engine import audit as trail

    entry = trail.requalify_record(
        report, _who(request, fleet), started, _selection(selected), _digest(selected)
    )
    if entry is not None:
        warning = _append(fleet.context.settings.backend_url, entry)
        if warning:
            report.warnings.append(warning)
    return report


def recorded_remediation(
    selected: Selected, request: FleetRequest, fleet: Fleet, started: datetime, report: FleetHealth
) -> FleetHealth:
    """The record of one `health --watch --remediate` read that acted; `report`, with a warning when the
    record could not be written."""
    from npa_pulumi.engine import audit as trail

    entry = trail.remediation_record(
        report, _who(request, fleet), started, _selection(selected), _digest(selected)
    )
    if entry is not None:
        warning = _append(fleet.context.settings.backend_url, entry)
        if warning:
            report.warnings.append(warning)
    return report


def caller(request: FleetRequest, fleet: Fleet) -> Who:
    """Who runs this (the cloud's principal when it can be read), as a record names them."""
    return _who(request, fleet)


def recorded_breaker_reset(
    selected: Selected, fleet: Fleet, who: Who, started: datetime, scope: str
) -> list[str]:
    """The record of `health breaker reset` (a person closed a breaker); the warnings when it could not be
    written."""
    from npa_pulumi.engine import audit as trail

    entry = trail.AuditRecord(
        command="health",
        repair="breaker-reset",
        fleet=selected.spec.name,
        who=who,
        selection={"scope": scope},
        spec_digest=_digest(selected),
        cloud=fleet.context.where.cloud,
        started_at=started.isoformat(timespec="seconds"),
        finished_at=datetime.now(started.tzinfo).isoformat(timespec="seconds"),
        outcome="ok",
        totals={"breakers": 1},
        stacks=[],
    )
    warning = _append(fleet.context.settings.backend_url, entry)
    return [warning] if warning else []


def _who(request: FleetRequest, fleet: Fleet) -> Who:
    from npa_pulumi.engine import audit as trail

    try:
        principal = fleet.context.cloud.principal()
    except Exception as err:  # the record says who as far as it is known: never a failed run
        log.debug("audit: the principal could not be read: %s", err)
        principal = None
    return trail.who(principal, request.where.profile)


def _selection(selected: Selected) -> dict[str, object]:
    selection = selected.selection
    return {
        "projects": list(selection.projects),
        "clusters": list(selection.clusters),
        "prefix": selection.prefix,
        "shard": selection.shard,
        "stage": selection.stage,
        "targets": [t.cluster_stack for t in selected.targets],
    }


def _digest(selected: Selected) -> str | None:
    from npa_pulumi.engine import audit as trail

    return trail.spec_digest(selected.spec_path, selected.spec.model_dump(mode="json"))


def _append(backend: str, entry: AuditRecord) -> str | None:
    """Write the record; the warning when the backend keeps no trail here or refused it."""
    from npa_pulumi.engine import audit as trail
    from npa_pulumi.engine.automation import AuditUnavailable

    try:
        trail.append(backend, entry)
    except AuditUnavailable as err:
        return f"audit: {err}"
    return None


def audit(
    spec: FleetSpec | str | Path, backend: str | None = None, since: datetime | None = None
) -> list[AuditRecord]:
    """The fleet's audit records in its backend (`backend`, else $PULUMI_BACKEND_URL or the default),
    oldest first, from `since` on; AuditTrailUnavailable when the backend keeps none here."""
    from npa_pulumi.engine import audit as trail
    from npa_pulumi.engine.automation import AuditUnavailable, resolve_backend_url

    fleet = spec if isinstance(spec, FleetSpec) else load_spec(spec)
    try:
        return trail.read(resolve_backend_url(backend), fleet.name, since)
    except AuditUnavailable as err:
        raise AuditTrailUnavailable(str(err)) from None
