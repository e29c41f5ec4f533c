"""`npa-pulumi approve`: a person's approval of a rollout wave (`rollout.approval: {before: N, min: M}`),
recorded as an audit record in the backend, beside the stacks (engine/audit.py). The record names who
approved, the wave and the spec's digest: a staged `up` of that very spec counts the approvals of other
identities than its own before it starts the wave (engine/rollout.py `read_approvals`). An approval of
another spec (any byte changed) counts for nothing; a run never approves its own change."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from npa_pulumi.errors import NpaError, UserInputError
from npa_pulumi.sdk.operations import SpecSource, _selected, open_fleet
from npa_pulumi.sdk.requests import FleetRequest


class ApprovalNotRecorded(NpaError):
    """The backend keeps no audit trail here: an approval nobody can read back would gate nothing."""

    kind = "approval-not-recorded"


def approve(spec: SpecSource, wave: int, request: FleetRequest = FleetRequest()) -> dict[str, Any]:
    """Record the caller's approval of `wave` of the spec's rollout; the record's summary."""
    from npa_pulumi.engine import audit as trail
    from npa_pulumi.engine.automation import AuditUnavailable
    from npa_pulumi.engine.rollout import APPROVE_COMMAND
    from npa_pulumi.sdk.audit import caller

    selected = _selected(spec, request.selection)
    rollout = selected.spec.rollout
    gate = rollout.approval if rollout is not None else None
    if gate is None or gate.before != wave:
        asked = f"wave {gate.before}" if gate is not None else "no wave (the spec has no rollout.approval)"
        raise UserInputError(f"--wave {wave}: the spec's rollout asks approval for {asked}; nothing recorded")
    fleet = open_fleet(selected, request)
    try:
        who = caller(request, fleet)
        digest = trail.spec_digest(selected.spec_path, selected.spec.model_dump(mode="json"))
        now = datetime.now(UTC).isoformat(timespec="seconds")
        entry = trail.AuditRecord(
            command=APPROVE_COMMAND,
            fleet=selected.spec.name,
            who=who,
            selection={"wave": wave},
            spec_digest=digest,
            cloud=fleet.context.where.cloud,
            started_at=now,
            finished_at=now,
            outcome="approved",
        )
        try:
            where = trail.append(fleet.context.settings.backend_url, entry)
        except AuditUnavailable as err:
            raise ApprovalNotRecorded(f"the approval was not recorded: {err}") from None
    finally:
        fleet.close()
    return {"approved": True, "wave": wave, "by": who.identity, "spec_digest": digest, "record": where}
