"""The teardown guide's legacy path (issue 57 item 5): a storage service account the fleet found by name
(say the original's `npa-fleet-storage`) is never deleted on a display name; an operator's attestation of
that exact account (engine/teardown/attestations.py) proves it, and the storage-identity phase then deletes
it with the attestation in what the receipt records. The local cloud stands in for Nebius."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from npa_pulumi.components.cloud_resources import STORAGE_SERVICE_ACCOUNT
from npa_pulumi.engine.teardown.attestations import Attestation, attestation_path, attests, read_attestation
from npa_pulumi.engine.teardown.model import ProjectEvidence, TeardownOptions
from npa_pulumi.engine.teardown.phases import GuardedPhases, phase_factory
from npa_pulumi.simulator import LocalCloud

FLEET = "legacy"
STACK = f"{FLEET}.alpha"


@pytest.fixture
def cloud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LocalCloud:
    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path / "npa-home"))
    monkeypatch.setenv("NPA_LOCAL_CLOUD_KUBERNETES_API", "0")
    return LocalCloud(tmp_path / "cloud")


def _found_by_name(cloud: LocalCloud, name: str = STORAGE_SERVICE_ACCOUNT) -> ProjectEvidence:
    """What a project stack records of an account it found by name: its id, and created: false."""
    project = cloud.create_project(cloud.principal().tenant_id, "alpha", "us-central1")
    account = cloud.create_service_account(project.id, name)  # the original's: no fleet labels
    cloud.create_access_key(project.id, account.id)
    return ProjectEvidence(
        project_stack=STACK, project_key="alpha", project_id=project.id, service_account_id=account.id
    )


def _attest(ev: ProjectEvidence, account_id: str | None = None) -> Attestation:
    attestation = Attestation(
        service_account_id=account_id or ev.service_account_id,
        name=STORAGE_SERVICE_ACCOUNT,
        project_id=ev.project_id,
        tenant_id="tenant-local",
        profile="",
        operator="ops",
        when="2026-12-07T00:00:00Z",
        reason="created by `npa fleet deploy` on 2026-08-22 (its deploy.log)",
    )
    path = attestation_path(FLEET, STACK)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(asdict(attestation)))
    return attestation


def _identity_phase(cloud: LocalCloud, ev: ProjectEvidence) -> dict[str, object]:
    guarded = GuardedPhases(
        cloud, FLEET, TeardownOptions(delete_storage_identity=True), lambda _: None, lambda *_: None
    )
    phase = guarded.plan_identity(ev, phase_factory(ev.project_key, STACK))
    return {"status": str(phase.status), "deletes": phase.deletes, "reason": phase.reason or ""}


def test_an_account_found_by_name_is_refused_and_told_how_to_attest(cloud: LocalCloud) -> None:
    ev = _found_by_name(cloud)
    phase = _identity_phase(cloud, ev)
    assert phase["status"] == "refused"
    assert f"reconcile storage-account --spec F --project alpha --id {ev.service_account_id}" in str(
        phase["reason"]
    )


def test_an_attested_account_is_deleted_with_its_attestation_recorded(cloud: LocalCloud) -> None:
    ev = _found_by_name(cloud)
    attestation = _attest(ev)
    assert attests(read_attestation(FLEET, STACK), ev)
    phase = _identity_phase(cloud, ev)
    assert phase["status"] == "planned"
    deletes = phase["deletes"]
    assert isinstance(deletes, dict)
    assert deletes["service_account_id"] == ev.service_account_id and len(deletes["access_key_ids"]) == 1
    assert deletes["attestation"] == asdict(attestation)  # what the receipt records


def test_an_attestation_of_another_account_proves_nothing(cloud: LocalCloud) -> None:
    ev = _found_by_name(cloud)
    _attest(ev, account_id="serviceaccount-e00other")
    assert not attests(read_attestation(FLEET, STACK), ev)
    assert _identity_phase(cloud, ev)["status"] == "refused"


def test_an_attested_account_that_is_not_the_storage_account_is_refused(cloud: LocalCloud) -> None:
    ev = _found_by_name(cloud, name="someone-elses-account")
    _attest(ev)
    phase = _identity_phase(cloud, ev)
    assert phase["status"] == "refused" and STORAGE_SERVICE_ACCOUNT in str(phase["reason"])
