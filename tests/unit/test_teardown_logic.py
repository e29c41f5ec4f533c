"""The teardown's pure logic: proof of ownership from stack outputs and records, retry flags, records and
receipts on disk, and how failed phases count."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from npa_pulumi.engine.teardown.model import ProjectEvidence, TeardownOptions
from npa_pulumi.engine.teardown.receipts import write_receipt
from npa_pulumi.engine.teardown.records import drop_record, read_record, write_record
from npa_pulumi.output.results import FleetResult, TeardownPhase

OUTPUTS = {
    "project_id": "project-1",
    "project_created": True,
    "network_id": "vpcnetwork-1",
    "subnet_id": "vpcsubnet-1",
    "network_owned": True,
    "bucket_id": "bucket-1",
    "bucket_name": "b",
    "bucket_created": False,
    "storage_service_account_id": "serviceaccount-1",
    "storage_key_id": "accesskey-1",
    "storage_secret_access_key": "[secret]",
}


def test_evidence_reads_only_explicit_true_as_proof() -> None:
    ev = ProjectEvidence.from_outputs("f.a", "a", {**OUTPUTS, "project_created": "true"})
    assert ev.project_created is False  # a string is not a recorded creation
    assert ev.network_owned is True and ev.bucket_created is False
    assert ev.service_account_created is False  # missing output: no proof
    assert "secret" not in json.dumps(ev.__dict__)


def test_a_record_of_the_same_ids_proves_what_a_redeployed_stack_found() -> None:
    record = ProjectEvidence(
        "f.a",
        "a",
        project_id="project-1",
        project_created=True,
        bucket_id="bucket-1",
        bucket_created=True,
        service_account_id="serviceaccount-OTHER",
        service_account_created=True,
    )
    found = ProjectEvidence.from_outputs("f.a", "a", {**OUTPUTS, "project_created": False})
    merged = found.merged_with(record)
    assert merged.project_created and merged.bucket_created
    assert not merged.service_account_created  # another account's record proves nothing about this one
    other_project = ProjectEvidence("f.a", "a", project_id="project-2", project_created=True)
    assert not found.merged_with(other_project).project_created


def test_retry_flags_repeat_exactly_what_was_asked() -> None:
    assert TeardownOptions().flags() == []
    asked = TeardownOptions(delete_buckets=True, delete_projects=True)
    assert asked.flags() == ["--delete-buckets", "--delete-projects"]


def test_records_and_receipts_are_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path / "npa"))
    ev = ProjectEvidence("f.a", "a", project_id="project-1", project_created=True)
    write_record("f", ev)
    path = tmp_path / "npa" / "teardown" / "f" / "f.a.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_record("f", "f.a") == ev
    path.write_text("{not json")
    assert read_record("f", "f.a") is None  # unreadable evidence is no proof
    drop_record("f", "f.a")
    assert read_record("f", "f.a") is None
    receipt = write_receipt("f", {"phases": []})
    assert receipt.parent == tmp_path / "npa" / "teardown-receipts" / "f" and receipt.name.endswith(
        "-destroy.json"
    )
    assert stat.S_IMODE(receipt.stat().st_mode) == 0o600
    assert stat.S_IMODE(receipt.parent.stat().st_mode) == 0o700


def test_failed_phases_without_a_stack_fail_the_result() -> None:
    result = FleetResult(command="destroy", fleet="f", cloud="local", backend="file://x")
    result.phases = [TeardownPhase(phase="network", project_key="a", stack="f.a", status="failed")]
    # a network failure is the project stack's failure, counted with the stacks
    assert result.failed_count == 0
    result.phases.append(TeardownPhase(phase="bucket", project_key="a", stack="f.a", status="failed"))
    assert result.failed_count == 1
    document = result.to_json()
    assert document["ok"] is False
    assert [p["name"] for p in document["phases"]] == ["network:f.a", "bucket:f.a"]
    assert FleetResult(command="up", fleet="f", cloud="local", backend="b").to_json().get("phases") is None


def test_a_failed_or_blocked_phase_makes_a_partial_cleanup() -> None:
    result = FleetResult(command="destroy", fleet="f", cloud="local", backend="file://x")
    result.phases = [TeardownPhase(phase="bucket", project_key="a", stack="f.a", status="done")]
    assert (result.partial_cleanup, result.outcome) == (False, "ok")
    result.phases.append(TeardownPhase(phase="project", project_key="a", stack="f.a", status="blocked"))
    assert (result.partial_cleanup, result.outcome) == (True, "partial-cleanup")
    assert result.to_json()["outcome"] == "partial-cleanup"
    result.dry_run = True  # a plan is never a cleanup, partial or not
    assert (result.partial_cleanup, result.to_json()["outcome"]) == (False, "planned")


def _receipt(home: Path, fleet: str, rid: str, **extra: object) -> Path:
    path = home / "teardown-receipts" / fleet / f"{rid}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    phases = [
        {"name": "network:f.a", "phase": "network", "project_key": "a", "stack": "f.a", "status": "done"},
        {"name": "bucket:f.a", "phase": "bucket", "project_key": "a", "stack": "f.a", "status": "done"},
        {"name": "project:f.a", "phase": "project", "project_key": "a", "stack": "f.a", "status": "blocked"},
    ]
    document = {"version": 1, "command": "destroy", "fleet": fleet, "cloud": "local", "phases": phases}
    path.write_text(json.dumps({**document, **extra}))
    return path


def test_receipts_are_found_by_id_and_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from npa_pulumi.engine.teardown.resume import ReceiptMismatch, check_identity, find_receipt
    from npa_pulumi.errors import UserInputError

    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path / "npa"))
    _receipt(tmp_path / "npa", "f", "20260101T000000Z-1-destroy", asked={"delete_projects": True})
    receipt = find_receipt("20260101T000000Z-1-destroy")
    assert receipt.fleet == "f" and receipt.options().delete_projects and not receipt.options().delete_buckets
    assert receipt.unfinished_stack_phases() == []
    check_identity(receipt, {"cloud": "local", "backend": None})  # the same, or not given: fine
    with pytest.raises(ReceiptMismatch, match="cloud: 'nebius' given, the receipt has 'local'") as refused:
        check_identity(receipt, {"cloud": "nebius"})
    assert refused.value.exit_code == 2
    for bad in ("../../etc/passwd", "no-such-receipt"):
        with pytest.raises(UserInputError):
            find_receipt(bad)
    _receipt(tmp_path / "npa", "f", "old", version=0)
    with pytest.raises(UserInputError, match="version-1"):
        find_receipt("old")


def test_completed_phases_stay_completed_on_a_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from npa_pulumi.engine.teardown.resume import carry_completed, find_receipt

    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path / "npa"))
    _receipt(tmp_path / "npa", "f", "r1")
    receipt = find_receipt("r1")
    now = [
        TeardownPhase(phase="bucket", project_key="a", stack="f.a", status="absent"),
        TeardownPhase(phase="project", project_key="a", stack="f.a", status="done"),
    ]
    merged = {p.name: p for p in carry_completed(receipt, now)}
    assert list(merged) == ["network:f.a", "bucket:f.a", "project:f.a"]  # the receipt's order
    assert merged["bucket:f.a"].status == "done" and merged["bucket:f.a"].reason == "done by receipt r1"
    assert merged["network:f.a"].status == "done"  # not planned again (its stack is gone): carried
    assert merged["project:f.a"].status == "done"
