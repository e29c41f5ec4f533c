"""The teardown's pure logic: proof of ownership from stack outputs and records, retry flags, records and
receipts on disk, and how failed phases count."""

from __future__ import annotations

import dataclasses
import json
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from npa_pulumi.engine.teardown.model import ProjectEvidence, TeardownOptions
from npa_pulumi.engine.teardown.phases import GuardedPhases, phase_factory
from npa_pulumi.engine.teardown.receipts import write_receipt
from npa_pulumi.engine.teardown.records import drop_record, read_record, write_record
from npa_pulumi.output.results import FleetResult, TeardownPhase
from npa_pulumi.simulator import LocalCloud
from npa_pulumi.simulator.cloud import as_port

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


# ---------------------------------------------------------------------------- refusals and the inventory

FLEET = "f"
OURS = {"npa-fleet": FLEET, "managed-by": "npa-pulumi"}


def test_a_refusal_is_a_partial_cleanup_and_a_retention_is_not() -> None:
    result = FleetResult(command="destroy", fleet="f", cloud="local", backend="file://x")
    result.phases = [TeardownPhase(phase="bucket", project_key="a", stack="f.a", status="retained")]
    assert (result.partial_cleanup, result.outcome, result.to_json()["ok"]) == (False, "ok", True)
    result.phases.append(TeardownPhase(phase="project", project_key="a", stack="f.a", status="refused"))
    assert (result.partial_cleanup, result.outcome) == (True, "partial-cleanup")
    assert result.failed_count == 0 and result.to_json()["ok"] is False  # never success
    cleanup = FleetResult(
        command="cleanup", fleet="f", cloud="local", backend="file://x", phases=result.phases
    )
    assert cleanup.partial_cleanup


@pytest.fixture
def local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalCloud]:
    from npa_pulumi.simulator import seaweedd

    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path / "npa"))
    try:
        yield LocalCloud(tmp_path / "cloud")
    finally:
        seaweedd.stop(tmp_path / "cloud")  # the S3 server an object written started (objects live there)


def _guarded(cloud: LocalCloud, **asked: bool) -> GuardedPhases:
    said: list[str] = []

    def retry(phase: TeardownPhase, key: str) -> None:
        phase.retry_command = f"retry {key}"

    return GuardedPhases(as_port(cloud), FLEET, TeardownOptions(**asked), said.append, retry)


def _fleet_project(cloud: LocalCloud) -> ProjectEvidence:
    """A project, bucket and storage identity the fleet created, as its project stack records them."""
    tenant = cloud.principal().tenant_id
    project = cloud.create_project(tenant, "f-alpha", "us-central1", labels={**OURS, "npa-project": "alpha"})
    bucket = cloud.create_bucket(project.id, "f-alpha-bucket", "standard", 1024, labels=OURS)
    account = cloud.create_service_account(project.id, "npa-fleet-storage", labels=OURS)
    cloud.create_access_key(project.id, account.id)
    cloud.grant_bucket_access(project.id, bucket.id, account.id, "npa-fleet-storage-access")
    return ProjectEvidence(
        "f.alpha",
        "alpha",
        project_id=project.id,
        project_created=True,
        bucket_id=bucket.id,
        bucket_name=bucket.name,
        bucket_created=True,
        service_account_id=account.id,
        service_account_created=True,
    )


def _plan(guarded: GuardedPhases, ev: ProjectEvidence) -> dict[str, TeardownPhase]:
    return {p.phase: p for p in guarded.plan(ev, phase_factory(ev.project_key, ev.project_stack), [])}


def _with(ev: ProjectEvidence, **changed: object) -> ProjectEvidence:
    return dataclasses.replace(ev, **changed)  # type: ignore[arg-type]


def test_what_was_not_asked_for_is_retained_and_what_cannot_be_proved_is_refused(local: LocalCloud) -> None:
    ev = _fleet_project(local)
    plain = _plan(_guarded(local), ev)
    assert {k: p.status for k, p in plain.items()} == {
        "bucket": "retained",
        "storage-identity": "retained",
        "project": "retained",
    }
    # asked, but the bucket existed before the fleet (no durable record of its creation): refused
    unproven = _with(ev, bucket_created=False)
    phases = _plan(_guarded(local, delete_buckets=True, delete_projects=True), unproven)
    assert phases["bucket"].status == "refused" and "no durable record" in (phases["bucket"].reason or "")
    assert phases["project"].status == "refused" and "still holds" in (phases["project"].reason or "")
    # a bucket without the fleet's labels (removed out of band), created by the fleet: refused too
    bare = local.create_bucket(ev.project_id, "relabelled", "standard", 1024)
    relabelled = _with(ev, bucket_id=bare.id, bucket_name=bare.name)
    phases = _plan(_guarded(local, delete_buckets=True), relabelled)
    assert phases["bucket"].status == "refused" and "labels" in (phases["bucket"].reason or "")
    # a project the spec names by id is used, never deleted: not asked, so retained
    declared = _with(ev, project_created=False, project_declared=True)
    assert _plan(_guarded(local, delete_projects=True), declared)["project"].status == "retained"
    found = _with(ev, project_created=False)  # found by name: unproven
    assert _plan(_guarded(local, delete_projects=True), found)["project"].status == "refused"


def test_the_storage_identity_takes_its_grants_group_and_the_project_names_what_holds_it(
    local: LocalCloud,
) -> None:
    ev = _fleet_project(local)
    [group] = local.list_groups(ev.project_id)
    assert group.labels == OURS  # the grant's group carries its account's labels
    everything = {"delete_buckets": True, "delete_storage_identity": True, "delete_projects": True}
    phases = _plan(_guarded(local, **everything), ev)
    assert phases["storage-identity"].deletes["group_ids"] == [group.id]
    assert phases["project"].status == "planned" and phases["project"].deletes == {
        "project_id": ev.project_id
    }

    # what a user added to the project: each refuses it, named by kind, id and name
    simulator = local.simulator
    vm = simulator.create_instance(ev.project_id, "someones-vm")["id"]
    disk = simulator.create_disk(ev.project_id, "someones-disk")["id"]
    network = local.create_network(ev.project_id, "someones-net")
    sg = simulator.create_security_group(ev.project_id, network.id, "someones-sg")["id"]
    registry = simulator.create_registry(ev.project_id, "someones-registry")["id"]
    project = _plan(_guarded(local, **everything), ev)["project"]
    assert project.status == "refused"
    assert sorted(project.retains["foreign"]) == sorted(
        [
            f"network {network.id} (someones-net)",
            f"security group {sg} (someones-sg)",
            f"instance {vm} (someones-vm)",
            f"disk {disk} (someones-disk)",
            f"registry {registry} (someones-registry)",
        ]
    )
    assert f"instance {vm} (someones-vm)" in (project.reason or "")

    # the clusters this run deletes may bring VMs and disks (their nodes): judged once those are gone
    guarded = _guarded(local, **everything)
    subnet = local.create_subnet(ev.project_id, network.id, "someones-subnet")
    cluster = local.create_cluster(ev.project_id, "c1", subnet.id)
    guarded.doomed_clusters = {cluster.id}
    foreign = _plan(guarded, ev)["project"].retains["foreign"]
    assert not any(item.startswith(("instance", "disk")) for item in foreign)


def test_a_project_whose_inventory_cannot_be_read_is_refused() -> None:
    from npa_pulumi.cloud.errors import PermissionDenied
    from npa_pulumi.engine.teardown.phases import decide_project

    def unreadable() -> tuple[list[str], dict[str, str]]:
        raise PermissionDenied("no access to list_instances")

    phase = decide_project(phase_factory("a", "f.a"), {"project_id": "project-1"}, [], unreadable)
    assert phase.status == "refused" and "could not be read" in (phase.reason or "")
    assert phase.deletes == {} and phase.retains == {"project_id": "project-1"}


@pytest.mark.integration  # the bucket's object lives in the local cloud's S3 server (SeaweedFS: `make tools`)
def test_a_guard_that_fails_right_before_the_delete_refuses_and_blocks_the_project(local: LocalCloud) -> None:
    ev = _fleet_project(local)
    guarded = _guarded(local, delete_buckets=True, delete_storage_identity=True, delete_projects=True)
    planned = list(_plan(guarded, ev).values())
    assert {p.status for p in planned} == {"planned"}
    local.simulator.put_object(ev.bucket_id, "ckpt/1", "data")  # after the plan: the guard sees it
    guarded.run(ev, "alpha", planned)
    by: dict[str, TeardownPhase] = {p.phase: p for p in planned}
    assert by["bucket"].status == "refused" and by["bucket"].retry_command == "retry alpha"
    assert by["storage-identity"].status == "done"  # independent: it went on, its group with it
    assert local.list_groups(ev.project_id) == [] and local.list_service_accounts(ev.project_id) == []
    assert by["project"].status == "blocked" and by["project"].blocked_by == ["bucket:f.alpha"]
    result = FleetResult(command="destroy", fleet="f", cloud="local", backend="b", phases=planned)
    assert result.partial_cleanup


def test_a_phase_out_of_this_runs_scope_is_retained_with_both_reasons() -> None:
    from npa_pulumi.engine.teardown.run import _out_of_scope

    refused = TeardownPhase(
        phase="bucket", project_key="a", stack="f.a", status="refused", reason="no labels"
    )
    _out_of_scope(refused, "--stage clusters keeps the project stacks")
    assert refused.status == "retained"
    assert refused.reason == "--stage clusters keeps the project stacks; no labels"
    planned = TeardownPhase(phase="project", project_key="a", stack="f.a", deletes={"project_id": "p"})
    _out_of_scope(planned, "shard 1/2")
    assert (planned.status, planned.reason, planned.deletes, planned.retains) == (
        "retained",
        "shard 1/2",
        {},
        {"project_id": "p"},
    )
