"""The teardown guide's legacy path for a storage service account whose creation no record proves (one the
fleet found by name, say the original's `npa-fleet-storage`): `reconcile storage-account --id <exact id>
--reason ... --attest-npa-created` proves the account's identity against the cloud and records who attested
what, when and why; the next `destroy --delete-storage-identity` may then delete it (its access keys first,
as always), and its receipt carries the attestation.

What is proved before anything is written: the exact id is the account the project stack (or its teardown
record) names, the cloud lists it in that project under the fleet's storage account name, and the project
is in this fleet's tenant. A display name alone is never ownership. The attestation is a private file
(`<npa home>/teardown/<fleet>/attestations/<project stack>.json`, 0600): ids, names, the operator, the time,
the reason, the selected profile; never a secret. It never deletes anything itself.
"""

from __future__ import annotations

import getpass
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_pulumi.cloud.errors import CloudError
from npa_pulumi.components.cloud_resources import STORAGE_SERVICE_ACCOUNT
from npa_pulumi.engine.teardown.model import ProjectEvidence
from npa_pulumi.engine.teardown.records import private_dir, read_record, records_dir
from npa_pulumi.errors import NpaError, UserInputError
from npa_pulumi.runtime.files import write_atomically

if TYPE_CHECKING:
    from npa_pulumi.engine.context import FleetContext


class AttestationRefused(NpaError):
    """The account is not provably the one asked about: nothing is recorded (exit 1)."""

    kind = "attestation-refused"


@dataclass(frozen=True)
class Attestation:
    """An operator's record that npa created this storage service account (the guide's legacy evidence)."""

    service_account_id: str
    name: str
    project_id: str
    tenant_id: str
    profile: str
    operator: str
    when: str
    reason: str


def attestation_path(fleet: str, project_stack: str) -> Path:
    return records_dir(fleet) / "attestations" / f"{project_stack}.json"


def read_attestation(fleet: str, project_stack: str) -> Attestation | None:
    try:
        data = json.loads(attestation_path(fleet, project_stack).read_text())
        return Attestation(**{k: str(data[k]) for k in Attestation.__dataclass_fields__})
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none, or unreadable: no proof


def attests(attestation: Attestation | None, ev: ProjectEvidence) -> bool:
    """Whether the attestation is for exactly this project's recorded account."""
    return (
        attestation is not None
        and bool(ev.service_account_id)
        and attestation.service_account_id == ev.service_account_id
        and attestation.project_id == ev.project_id
    )


def _evidence(context: FleetContext, project_key: str) -> ProjectEvidence:
    plans = [p for p in context.plans().projects if p.project_key == project_key]
    if not plans:
        known = ", ".join(sorted(p.project_key for p in context.plans().projects))
        raise UserInputError(f"--project {project_key}: not a project of the spec's selection ({known})")
    plan = plans[0]
    outputs = context.stack_outputs([context.project_op(plan)]).get(plan.stack)
    record = read_record(context.spec.name, plan.stack)
    if outputs is not None:
        return ProjectEvidence.from_outputs(plan.stack, project_key, outputs).merged_with(record)
    if record is not None:
        return record
    raise AttestationRefused(
        f"project {project_key}: no project stack and no teardown record name its account"
    )


def attest_storage_account(
    context: FleetContext, project_key: str, account_id: str, reason: str, dry_run: bool
) -> dict[str, Any]:
    """Prove the account (reads only) and, unless `dry_run`, record the attestation. Raises
    AttestationRefused, naming what does not match."""
    if not reason.strip():
        raise UserInputError("--reason is required: what evidence says npa created this account")
    ev = _evidence(context, project_key)
    if ev.service_account_id != account_id:
        raise AttestationRefused(
            f"project {project_key} records service account {ev.service_account_id or '(none)'}, not "
            f"{account_id}: only the recorded account can be attested"
        )
    tenant = context.tenant_id()
    try:
        project = context.cloud.get_project(ev.project_id)
        accounts = [a for a in context.cloud.list_service_accounts(ev.project_id) if a.id == account_id]
    except CloudError as err:
        raise AttestationRefused(f"the account's project {ev.project_id} cannot be read: {err}") from None
    problems = []
    if project.tenant_id != tenant:
        problems.append(f"project {ev.project_id} is of tenant {project.tenant_id}, not {tenant}")
    if not accounts:
        problems.append(f"project {ev.project_id} has no service account {account_id}")
    elif accounts[0].name != STORAGE_SERVICE_ACCOUNT:
        problems.append(
            f"service account {account_id} is named {accounts[0].name!r}, not {STORAGE_SERVICE_ACCOUNT!r}"
        )
    if problems:
        raise AttestationRefused("; ".join(problems))
    if ev.service_account_created:
        return {"attested": False, "reason": "the fleet's own record already proves it created the account"}
    attestation = Attestation(
        service_account_id=account_id,
        name=STORAGE_SERVICE_ACCOUNT,
        project_id=ev.project_id,
        tenant_id=tenant,
        profile=context.profile or "",
        operator=getpass.getuser(),
        when=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        reason=reason.strip(),
    )
    path = attestation_path(context.spec.name, ev.project_stack)
    if not dry_run:
        private_dir(path.parent)
        write_atomically(path, json.dumps(asdict(attestation), indent=2, sort_keys=True) + "\n", mode=0o600)
    return {
        "attested": not dry_run,
        "dry_run": dry_run,
        "path": str(path),
        "attestation": asdict(attestation),
    }
