"""Teardown you can audit (issue 18), end to end: real CLI processes, the real Pulumi engine, terraform and
the local cloud.

* `destroy --dry-run` lists the ordered phases with what each deletes or retains, and changes nothing;
* a full destroy with the opt-in flags deletes exactly what the fleet created (project, network, bucket,
  service account and its keys) and retains a pre-existing project and its reused subnet;
* re-creating a project stack rotates the storage access key instead of piling keys up, and the proof of
  ownership survives a destroy and a re-deploy (the teardown record);
* a failing phase (a fault on delete_bucket) is `failed` with an exact retry command, the dependent project
  phase is `blocked`, the independent storage identity phase completes; the retry finishes the job;
* every destroy leaves a private receipt without a secret;
* a deletion that was asked for and cannot be proved safe (a bucket whose labels were removed out of band,
  a project holding a user's VM, disk or security group) is `refused`: a partial cleanup, exit 2, with a
  receipt and the `destroy --receipt ID --yes` that continues it; a retention not asked for exits 0.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import CLI, inventory, npa, write_spec

from npa_pulumi.engine.automation.workspace import EngineSettings
from npa_pulumi.runtime.toolchain import find_pulumi

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: td
region: us-central1
project_prefix: "td-"
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
projects:
  - name: alpha
    object_storage: {enabled: true, storage_class: standard, size_gibibytes: 16}
    clusters:
      - name: c1
  - project_id: project-existing1
    clusters:
      - name: c1
"""

OPT_IN = ("--delete-buckets", "--delete-storage-identity", "--delete-projects")


def _ids(cloud: dict[str, Any]) -> dict[str, list[str]]:
    """Every object's id, per kind (what a mutation would change; states may move on by themselves)."""
    return {
        kind: sorted(str(item.get("id")) for item in items)
        for kind, items in cloud.items()
        if kind not in ("quotas", "capacity_block_groups")
    }


def _up(spec: Path) -> dict[str, Any]:
    result = npa("up", "--spec", str(spec), "--cloud", "local", "--yes", "-j", "2", "--output", "json")
    assert result.code == 0, result.stderr[-4000:] + result.stdout[-3000:]
    document: dict[str, Any] = result.json()
    return document


def _phases(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in document["phases"]}


def _secret_of(stack: str) -> str:
    settings = EngineSettings.resolve(None)
    proc = subprocess.run(
        [str(find_pulumi()), "stack", "output", "--json", "--show-secrets", "--stack", stack],
        cwd=settings.work_dir,
        env={**os.environ, **settings.env()},
        capture_output=True,
        text=True,
        check=True,
    )
    secret: str = json.loads(proc.stdout)["storage_secret_access_key"]
    return secret


def _receipts(home: Path) -> list[Path]:
    return sorted((home / ".npa-pulumi" / "teardown-receipts" / "td").glob("*-destroy.json"))


def _alpha(cloud: dict[str, Any]) -> str:
    return next(str(p["id"]) for p in cloud["projects"] if p["name"] == "td-alpha")


def test_dry_run_then_full_guarded_destroy(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    npa("local-cloud", "init", check=True)
    _up(spec)
    secret = _secret_of("td.alpha")
    before = inventory()
    alpha = _alpha(before)

    # ---- dry run: the exact ordered phases, no confirmation needed, nothing changed
    dry = npa("destroy", "--spec", str(spec), "--dry-run", *OPT_IN, "--output", "json", input_text="")
    assert dry.code == 0, dry.stderr[-3000:]
    plan = dry.json()
    assert plan["dry_run"] is True and plan["ok"] is True and plan["receipt"] is None
    assert [p["name"] for p in plan["phases"]] == [
        "cluster:td.alpha.c1",
        "cluster:td.project-existing1.c1",
        "network:td.alpha",
        "bucket:td.alpha",
        "storage-identity:td.alpha",
        "project:td.alpha",
        "network:td.project-existing1",
        "project:td.project-existing1",
    ]
    phases = _phases(plan)
    cluster_id = phases["cluster:td.alpha.c1"]["deletes"]["cluster_id"]
    assert cluster_id in {c["id"] for c in before["mk8s_clusters"]}
    assert {p["status"] for n, p in phases.items() if n.endswith("td.alpha") or "alpha." in n} == {"planned"}
    assert phases["bucket:td.alpha"]["deletes"]["objects"] == 0
    assert phases["project:td.alpha"]["deletes"] == {"project_id": alpha}
    existing = phases["project:td.project-existing1"]
    assert existing["status"] == "retained" and "created" in existing["reason"]
    reused = phases["network:td.project-existing1"]
    assert reused["status"] == "retained"
    assert reused["retains"]["subnet_id"] and "reused" in reused["reason"]
    assert _ids(inventory()) == _ids(before)
    assert _receipts(isolated_home) == []

    # ---- the text form says the same, and changes nothing either
    text = npa("destroy", "--spec", str(spec), "--dry-run", input_text="", env={"COLUMNS": "300"})
    assert text.code == 0 and "dry run" in text.stdout and "storage-identity:td.alpha" in text.stdout
    assert _ids(inventory()) == _ids(before)

    # ---- destructive with the opt-in flags and no terminal: refused, one JSON document, nothing changed
    refused = npa("destroy", "--spec", str(spec), *OPT_IN, "--output", "json", input_text="")
    assert refused.code == 1
    assert refused.json()["error"]["kind"] == "not-confirmed"
    assert _ids(inventory()) == _ids(before)

    # ---- the full guarded teardown, with deletes that complete asynchronously as a real cloud's do: each
    # object stays DELETING for 2 s, so every phase must wait for verified absence before the next one
    npa("local-cloud", "set", "delete-lag-seconds", "2", check=True)
    done = npa("destroy", "--spec", str(spec), *OPT_IN, "--yes", "--output", "json")
    assert done.code == 0, done.stderr[-3000:] + done.stdout[-3000:]
    outcome = _phases(done.json())
    for name in ("network:td.alpha", "bucket:td.alpha", "storage-identity:td.alpha", "project:td.alpha"):
        assert outcome[name]["status"] == "done", outcome[name]
    assert outcome["project:td.project-existing1"]["status"] == "retained"
    cloud = inventory()
    assert alpha not in {p["id"] for p in cloud["projects"]}
    assert [b for b in cloud["buckets"] if b["project_id"] == alpha] == []
    assert [a for a in cloud["service_accounts"] if a["project_id"] == alpha] == []
    assert [k for k in cloud["access_keys"] if k["project_id"] == alpha] == []
    assert [n for n in cloud["networks"] if n["project_id"] == alpha] == []
    assert cloud["mk8s_clusters"] == []
    # what the fleet did not create stays: the pre-existing project and its own network
    assert "project-existing1" in {p["id"] for p in cloud["projects"]}
    assert [s for s in cloud["subnets"] if s["project_id"] == "project-existing1"]
    assert [n for n in cloud["networks"] if n["project_id"] == "project-existing1"]

    # ---- the receipt: private, complete, and without a secret
    receipts = _receipts(isolated_home)
    assert len(receipts) == 1 and str(receipts[0]) == done.json()["receipt"]
    assert stat.S_IMODE(receipts[0].stat().st_mode) == 0o600
    receipt = json.loads(receipts[0].read_text())
    assert receipt["outcome"] == "ok" and receipt["asked"]["delete_projects"] is True
    assert {p["name"]: p["status"] for p in receipt["phases"]}["bucket:td.alpha"] == "done"
    assert secret not in receipts[0].read_text()
    assert secret not in done.stdout + done.stderr
    # nothing of alpha left to prove: its teardown record is gone with it
    assert not (isolated_home / ".npa-pulumi" / "teardown" / "td" / "td.alpha.json").exists()


ALPHA_ONLY = "--only-projects", "alpha"


def test_rotation_then_failed_phase_blocks_the_project(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    npa("local-cloud", "init", check=True)
    _up(spec)
    first = inventory()
    alpha = _alpha(first)
    account = next(a["id"] for a in first["service_accounts"] if a["project_id"] == alpha)

    # ---- a plain destroy retains bucket, identity and project; a re-deploy rotates the key
    plain = npa("destroy", "--spec", str(spec), *ALPHA_ONLY, "--yes", "--output", "json")
    assert plain.code == 0, plain.stderr[-3000:]
    assert {p["name"]: p["status"] for p in plain.json()["phases"]}["bucket:td.alpha"] == "retained"
    record = isolated_home / ".npa-pulumi" / "teardown" / "td" / "td.alpha.json"
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    _up(spec)
    keys = [k for k in inventory()["access_keys"] if k["service_account_id"] == account]
    assert len(keys) == 1, keys  # the old key was deleted, not left behind

    # ---- a bucket with data is refused without --delete-nonempty-buckets
    bucket = next(b["id"] for b in inventory()["buckets"] if b["project_id"] == alpha)
    put = npa(
        "local-cloud", "api", "put_object", "--args", json.dumps({"bucket_id": bucket, "key": "ckpt/1"})
    )
    assert put.code == 0, put.stderr
    dry = npa("destroy", "--spec", str(spec), *ALPHA_ONLY, "--dry-run", *OPT_IN, "--output", "json")
    phases = _phases(dry.json())
    # proof survived destroy + re-deploy (the re-deployed stack found the bucket; the record proves it);
    # asked to delete, it holds data: refused (a real run of it would be a partial cleanup)
    assert phases["bucket:td.alpha"]["status"] == "refused"
    assert "1 object" in phases["bucket:td.alpha"]["reason"]
    assert phases["project:td.alpha"]["status"] == "refused"
    assert "bucket" in phases["project:td.alpha"]["reason"]

    # ---- bad input: a clear error, exit 2, no traceback
    bad = npa("destroy", "--spec", str(spec), "--delete-nonempty-buckets", "--yes", "--output", "json")
    assert bad.code == 2 and "Traceback" not in bad.stderr
    assert "--delete-buckets" in bad.json()["error"]["message"]

    # ---- a failing bucket phase: failed with a retry, project blocked, storage identity done
    npa(
        "local-cloud",
        "fault",
        "add",
        "--op",
        "delete_bucket",
        "--error",
        "unavailable",
        "--forever",
        check=True,
    )
    flags = (*OPT_IN, "--delete-nonempty-buckets")
    failed = npa("destroy", "--spec", str(spec), *ALPHA_ONLY, *flags, "--yes", "--output", "json")
    assert failed.code == 2, failed.stderr[-3000:]  # a partial cleanup: never success
    document = failed.json()
    assert document["ok"] is False and document["outcome"] == "partial-cleanup"
    phases = _phases(document)
    assert phases["network:td.alpha"]["status"] == "done"
    assert phases["bucket:td.alpha"]["status"] == "failed"
    retry = phases["bucket:td.alpha"]["retry_command"]
    assert "--delete-buckets" in retry and "--only-projects alpha" in retry and retry.endswith("--yes")
    assert phases["storage-identity:td.alpha"]["status"] == "done"
    assert phases["project:td.alpha"]["status"] == "blocked"
    assert phases["project:td.alpha"]["blocked_by"] == ["bucket:td.alpha"]
    cloud = inventory()
    assert alpha in {p["id"] for p in cloud["projects"]}
    assert bucket in {b["id"] for b in cloud["buckets"]}
    assert [a for a in cloud["service_accounts"] if a["project_id"] == alpha] == []
    receipt = json.loads(Path(document["receipt"]).read_text())
    assert receipt["outcome"] == "partial-cleanup"
    assert {p["name"]: p["status"] for p in receipt["phases"]}["project:td.alpha"] == "blocked"

    # ---- the exact retry command finishes the job once the cloud works again (the stack is gone: the
    # teardown record is the proof)
    npa("local-cloud", "fault", "clear", check=True)
    argv = shlex.split(retry)
    assert argv[0] == "npa-pulumi"
    again = npa(*argv[1:], "--output", "json")
    assert again.code == 0, again.stderr[-3000:] + again.stdout[-3000:]
    phases = _phases(again.json())
    assert phases["bucket:td.alpha"]["status"] == "done"
    assert phases["project:td.alpha"]["status"] == "done"
    cloud = inventory()
    assert alpha not in {p["id"] for p in cloud["projects"]}
    assert bucket not in {b["id"] for b in cloud["buckets"]}
    assert CLI  # the retry ran through the same CLI entry point as every other call here


def test_cleanup_finds_and_deletes_only_unreferenced_fleet_objects(
    isolated_home: Path, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    npa("local-cloud", "init", check=True)
    _up(spec)

    # ---- everything the fleet created is referenced by a stack: nothing to clean up
    fresh = npa("cleanup", "--spec", str(spec), "--delete-orphans", "--dry-run", *OPT_IN, "--output", "json")
    assert fresh.code == 0, fresh.stderr[-3000:]
    assert fresh.json()["phases"] == []

    # ---- a plain destroy of alpha leaves its project, bucket and storage identity: orphans now
    plain = npa("destroy", "--spec", str(spec), *ALPHA_ONLY, "--yes", "--output", "json")
    assert plain.code == 0, plain.stderr[-3000:]
    cloud = inventory()
    alpha = _alpha(cloud)

    # ... next to buckets a user made without the fleet's labels: in the pre-existing project, and in the
    # fleet's own (now orphaned) project
    def user_bucket(project_id: str, name: str) -> str:
        args = {"project_id": project_id, "name": name, "storage_class": "standard", "max_size_bytes": 1024}
        made = npa("local-cloud", "api", "create_bucket", "--args", json.dumps(args))
        assert made.code == 0, made.stderr
        return str(made.json()["result"]["id"])

    user_bucket("project-existing1", "users-own-bucket")
    users_in_alpha = user_bucket(alpha, "users-bucket-in-alpha")
    before = inventory()
    dry = npa("cleanup", "--spec", str(spec), "--delete-orphans", "--dry-run", *OPT_IN, "--output", "json")
    assert dry.code == 0, dry.stderr[-3000:]
    phases = _phases(dry.json())
    assert set(phases) == {"bucket:td.alpha", "storage-identity:td.alpha", "project:td.alpha"}
    assert phases["bucket:td.alpha"]["status"] == "planned"
    assert phases["bucket:td.alpha"]["deletes"]["bucket_id"] != users_in_alpha
    assert phases["storage-identity:td.alpha"]["status"] == "planned"
    # a project holding something the fleet did not create is refused, naming it
    assert phases["project:td.alpha"]["status"] == "refused"
    assert phases["project:td.alpha"]["retains"]["foreign"] == [
        f"bucket {users_in_alpha} (users-bucket-in-alpha)"
    ]
    assert _ids(inventory()) == _ids(before)

    # ---- without a terminal and without --yes: refused, nothing changed
    refused = npa(
        "cleanup", "--spec", str(spec), "--delete-orphans", *OPT_IN, "--output", "json", input_text=""
    )
    assert refused.code == 1 and refused.json()["error"]["kind"] == "not-confirmed"
    assert _ids(inventory()) == _ids(before)

    # the project deletion was asked for and refused: a partial cleanup (exit 2) with its receipt
    first = npa("cleanup", "--spec", str(spec), "--delete-orphans", *OPT_IN, "--yes", "--output", "json")
    assert first.code == 2, first.stderr[-3000:] + first.stdout[-3000:]
    assert {p["name"]: p["status"] for p in first.json()["phases"]} == {
        "bucket:td.alpha": "done",
        "storage-identity:td.alpha": "done",
        "project:td.alpha": "refused",
    }
    assert first.json()["outcome"] == "partial-cleanup" and first.json()["ok"] is False
    assert json.loads(Path(first.json()["receipt"]).read_text())["outcome"] == "partial-cleanup"
    assert first.json()["resume_command"].startswith("npa-pulumi cleanup ")
    cloud = inventory()
    assert alpha in {p["id"] for p in cloud["projects"]}
    assert [b["id"] for b in cloud["buckets"] if b["project_id"] == alpha] == [users_in_alpha]
    assert [a for a in cloud["service_accounts"] if a["project_id"] == alpha] == []

    # ---- once the user's bucket is gone, the orphaned fleet project goes too
    gone = npa("local-cloud", "api", "delete_bucket", "--args", json.dumps({"bucket_id": users_in_alpha}))
    assert gone.code == 0, gone.stderr
    done = npa("cleanup", "--spec", str(spec), "--delete-orphans", *OPT_IN, "--yes", "--output", "json")
    assert done.code == 0, done.stderr[-3000:] + done.stdout[-3000:]
    assert {p["name"]: p["status"] for p in done.json()["phases"]} == {"project:td.alpha": "done"}
    cloud = inventory()
    assert alpha not in {p["id"] for p in cloud["projects"]}
    # what a stack still references, and what the fleet never created, stay
    assert "users-own-bucket" in {b["name"] for b in cloud["buckets"]}
    assert len(cloud["mk8s_clusters"]) == 1
    receipt = Path(done.json()["receipt"])
    assert receipt.name.endswith("-cleanup.json") and stat.S_IMODE(receipt.stat().st_mode) == 0o600
    assert json.loads(receipt.read_text())["outcome"] == "ok"
    assert not (isolated_home / ".npa-pulumi" / "teardown" / "td" / "td.alpha.json").exists()


ALPHA_SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: td
region: us-central1
project_prefix: "td-"
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
projects:
  - name: alpha
    object_storage: {enabled: true, storage_class: standard, size_gibibytes: 16}
    clusters:
      - name: c1
"""


def test_permission_denied_mid_teardown_is_a_partial_cleanup_resumed_from_its_receipt(
    isolated_home: Path, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", ALPHA_SPEC)
    npa("local-cloud", "init", check=True)
    empty = _ids(inventory())  # the simulator before the fleet: what it must be left as
    _up(spec)
    secret = _secret_of("td.alpha")
    alpha = _alpha(inventory())

    # ---- the storage identity may not be deleted: permission denied, mid-teardown
    npa(
        "local-cloud",
        "fault",
        "add",
        "--op",
        "delete_service_account",
        "--error",
        "permission-denied",
        "--forever",
        check=True,
    )
    partial = npa(
        "destroy", "--spec", str(spec), *OPT_IN, "--delete-nonempty-buckets", "--yes", "--output", "json"
    )
    assert partial.code == 2, partial.stderr[-3000:] + partial.stdout[-3000:]
    assert "Traceback" not in partial.stderr
    document = partial.json()
    assert document["ok"] is False and document["outcome"] == "partial-cleanup"
    phases = _phases(document)
    assert {name: p["status"] for name, p in phases.items()} == {
        "cluster:td.alpha.c1": "done",
        "network:td.alpha": "done",
        "bucket:td.alpha": "done",
        "storage-identity:td.alpha": "failed",
        "project:td.alpha": "blocked",
    }
    assert "permission-denied" in phases["storage-identity:td.alpha"]["reason"]
    assert phases["project:td.alpha"]["blocked_by"] == ["storage-identity:td.alpha"]
    # the receipt: written, named by id, and it says the same
    receipt_id = document["receipt_id"]
    receipt_path = Path(document["receipt"])
    assert (
        receipt_path.name == f"{receipt_id}.json"
        and receipt_path.parent == _receipts(isolated_home)[0].parent
    )
    receipt = json.loads(receipt_path.read_text())
    assert receipt["id"] == receipt_id and receipt["outcome"] == "partial-cleanup"
    assert {p["name"]: p["status"] for p in receipt["phases"]} == {n: p["status"] for n, p in phases.items()}
    # only guarded phases are left: the retry needs the receipt id, not the spec
    resume = document["resume_command"]
    assert resume == f"npa-pulumi destroy --receipt {receipt_id} --yes"
    assert receipt["resume_command"] == resume
    assert secret not in receipt_path.read_text()
    # the text form says it too
    cloud = inventory()
    assert alpha in {p["id"] for p in cloud["projects"]}
    assert [a for a in cloud["service_accounts"] if a["project_id"] == alpha]  # still there
    assert [k for k in cloud["access_keys"] if k["project_id"] == alpha] == []  # its keys went first
    # the destroyed cluster stack left no work dir (Terraform state copies, tfvars); its log is kept
    npa_dir = isolated_home / ".npa-pulumi"
    assert not (npa_dir / "work" / "td.alpha.c1").exists()
    assert "destroy" in (npa_dir / "logs" / "td" / "td.alpha.c1.terraform.log").read_text()

    # ---- a receipt that does not match the flags: refused before anything is touched
    clash = npa("destroy", "--receipt", receipt_id, "--cloud", "nebius", "--yes", "--output", "json")
    assert clash.code == 2 and clash.json()["error"]["kind"] == "receipt-mismatch", clash.stdout
    other = write_spec(tmp_path / "other.yaml", ALPHA_SPEC.replace("name: td", "name: other"))
    clash = npa("destroy", "--receipt", receipt_id, "--spec", str(other), "--yes", "--output", "json")
    assert clash.code == 2 and "fleet" in clash.json()["error"]["message"], clash.stdout
    unknown = npa("destroy", "--receipt", "no-such-receipt", "--yes", "--output", "json")
    assert unknown.code == 2 and "no receipt" in unknown.json()["error"]["message"]
    assert "Traceback" not in clash.stderr + unknown.stderr
    assert [a for a in inventory()["service_accounts"] if a["project_id"] == alpha]

    # ---- a dry run of the resume plans exactly what is left, changes nothing and needs no --yes; without a
    # terminal and without --yes the resume itself is refused
    dry = npa("destroy", "--receipt", receipt_id, "--dry-run", "--output", "json", input_text="")
    assert dry.code == 0, dry.stderr[-3000:] + dry.stdout[-3000:]
    planned = {name: p["status"] for name, p in _phases(dry.json()).items()}
    assert planned["storage-identity:td.alpha"] == "planned" and planned["project:td.alpha"] == "planned"
    assert planned["bucket:td.alpha"] == "done" and dry.json()["receipt"] is None
    refused = npa("destroy", "--receipt", receipt_id, "--output", "json", input_text="")
    assert refused.code == 1 and refused.json()["error"]["kind"] == "not-confirmed"
    assert [a for a in inventory()["service_accounts"] if a["project_id"] == alpha]

    # ---- still denied: the resumed run is a partial cleanup again, with a receipt of its own
    argv = shlex.split(resume)
    again = npa(*argv[1:], "--output", "json")
    assert again.code == 2, again.stderr[-3000:] + again.stdout[-3000:]
    assert again.json()["resumes"] == receipt_id and again.json()["receipt_id"] != receipt_id

    # ---- the permission granted (the fault cleared): the retry from the receipt id completes, with the
    # spec gone; what was done stays done
    npa("local-cloud", "fault", "clear", check=True)
    spec.unlink()
    done = npa(*argv[1:], "--output", "json")
    assert done.code == 0, done.stderr[-3000:] + done.stdout[-3000:]
    finished = done.json()
    assert finished["outcome"] == "ok" and finished["resume_command"] is None
    statuses = {name: p["status"] for name, p in _phases(finished).items()}
    assert statuses == {
        "cluster:td.alpha.c1": "done",
        "network:td.alpha": "done",
        "bucket:td.alpha": "done",
        "storage-identity:td.alpha": "done",
        "project:td.alpha": "done",
    }
    assert _phases(finished)["bucket:td.alpha"]["reason"] == f"done by receipt {receipt_id}"
    final = json.loads(Path(finished["receipt"]).read_text())
    assert final["outcome"] == "ok" and final["resumes"] == receipt_id
    # the simulator holds nothing the fleet created
    assert _ids(inventory()) == empty
    assert not (isolated_home / ".npa-pulumi" / "teardown" / "td" / "td.alpha.json").exists()
    for path in _receipts(isolated_home):
        assert secret not in path.read_text()


def test_recreating_a_project_stack_three_times_leaves_exactly_one_access_key(
    isolated_home: Path, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", ALPHA_SPEC)
    npa("local-cloud", "init", check=True)
    first = _up(spec)
    alpha = _alpha(inventory())
    account = next(a["id"] for a in inventory()["service_accounts"] if a["project_id"] == alpha)
    minted = [next(p for p in first["projects"] if p["stack"] == "td.alpha")["outputs"]["storage_key_id"]]
    for _ in range(3):
        plain = npa("destroy", "--spec", str(spec), "--yes", "--output", "json")
        assert plain.code == 0, plain.stderr[-3000:]
        assert {p["name"]: p["status"] for p in plain.json()["phases"]}["network:td.alpha"] == "done"
        deployed = _up(spec)  # the project stack is created again; the account and its key are found
        minted.append(
            next(p for p in deployed["projects"] if p["stack"] == "td.alpha")["outputs"]["storage_key_id"]
        )
    cloud = inventory()
    assert [a["id"] for a in cloud["service_accounts"] if a["project_id"] == alpha] == [account]
    keys = [k["id"] for k in cloud["access_keys"] if k["service_account_id"] == account]
    # a new key each time (a secret is shown once), and only the newest is left
    assert len(set(minted)) == 4, minted
    assert keys == [minted[-1]], (keys, minted)


def test_the_default_network_of_a_created_project_goes_with_it_but_an_added_network_refuses_it(
    isolated_home: Path, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", ALPHA_SPEC)
    npa("local-cloud", "init", check=True)
    npa("local-cloud", "set", "project-default-network", "1", check=True)  # as Nebius does
    empty = _ids(inventory())
    _up(spec)
    cloud = inventory()
    alpha = _alpha(cloud)
    [network] = [n for n in cloud["networks"] if n["project_id"] == alpha]
    [subnet] = [s for s in cloud["subnets"] if s["project_id"] == alpha]
    assert network["name"] == "default-network" and subnet["name"].startswith("default-subnet-")
    [cluster] = cloud["mk8s_clusters"]
    assert cluster["subnet_id"] == subnet["id"]  # the fleet used the project's default subnet

    # ---- the plan: the network is not the fleet's, but came with the project it created
    dry = npa("destroy", "--spec", str(spec), *OPT_IN, "--dry-run", "--output", "json")
    assert dry.code == 0, dry.stderr[-3000:]
    phases = _phases(dry.json())
    assert phases["network:td.alpha"]["status"] == "retained"
    assert "default network" in phases["network:td.alpha"]["reason"]
    assert phases["project:td.alpha"]["status"] == "planned", phases["project:td.alpha"]
    [group] = [g for g in cloud["security_groups"] if g["project_id"] == alpha]
    assert group["default"] and group["network_id"] == network["id"]  # the network's, made by the cloud
    assert phases["project:td.alpha"]["deletes"] == {
        "project_id": alpha,
        "default_network_id": network["id"],
        "default_subnet_id": subnet["id"],
        "default_security_group_id": group["id"],
    }

    # ---- someone adds a network of their own: the project is refused, the default topology is not named
    args = {"project_id": alpha, "name": "someone-elses-net"}
    made = npa("local-cloud", "api", "create_network", "--args", json.dumps(args))
    assert made.code == 0, made.stderr
    added = str(made.json()["result"]["id"])
    dry = npa("destroy", "--spec", str(spec), *OPT_IN, "--dry-run", "--output", "json")
    project = _phases(dry.json())["project:td.alpha"]
    assert project["status"] == "refused"
    assert project["retains"]["foreign"] == [f"network {added} (someone-elses-net)"]
    gone = npa("local-cloud", "api", "delete_network", "--args", json.dumps({"network_id": added}))
    assert gone.code == 0, gone.stderr
    # ... and a subnet of someone's in the default network makes it mixed: all of it is foreign (fail closed)
    args = {"project_id": alpha, "network_id": network["id"], "name": "teams-subnet"}
    made = npa("local-cloud", "api", "create_subnet", "--args", json.dumps(args))
    assert made.code == 0, made.stderr
    extra = str(made.json()["result"]["id"])
    dry = npa("destroy", "--spec", str(spec), *OPT_IN, "--dry-run", "--output", "json")
    project = _phases(dry.json())["project:td.alpha"]
    assert project["status"] == "refused"
    assert sorted(project["retains"]["foreign"]) == sorted(
        [
            f"network {network['id']} (default-network)",
            f"subnet {subnet['id']} ({subnet['name']})",
            f"subnet {extra} (teams-subnet)",
        ]
    )
    gone = npa("local-cloud", "api", "delete_subnet", "--args", json.dumps({"subnet_id": extra}))
    assert gone.code == 0, gone.stderr

    # ---- the full teardown deletes the project with its default network, and records it
    done = npa("destroy", "--spec", str(spec), *OPT_IN, "--yes", "--output", "json")
    assert done.code == 0, done.stderr[-3000:] + done.stdout[-3000:]
    project = _phases(done.json())["project:td.alpha"]
    assert project["status"] == "done" and project["deletes"]["default_network_id"] == network["id"]
    receipt = json.loads(Path(done.json()["receipt"]).read_text())
    recorded = {p["name"]: p for p in receipt["phases"]}["project:td.alpha"]
    assert recorded["deletes"]["default_subnet_id"] == subnet["id"]
    assert recorded["deletes"]["default_security_group_id"] == group["id"]
    assert _ids(inventory()) == empty


def test_a_cluster_that_would_not_go_is_resumed_from_its_receipt_with_the_spec(
    isolated_home: Path, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", ALPHA_SPEC)
    npa("local-cloud", "init", check=True)
    empty = _ids(inventory())
    _up(spec)
    npa(
        "local-cloud",
        "fault",
        "add",
        "--op",
        "delete_cluster",
        "--error",
        "permission-denied",
        "--forever",
        check=True,
    )
    partial = npa("destroy", "--spec", str(spec), *OPT_IN, "--yes", "--output", "json")
    assert partial.code == 2, partial.stderr[-3000:] + partial.stdout[-3000:]
    document = partial.json()
    assert document["outcome"] == "partial-cleanup"
    statuses = {name: p["status"] for name, p in _phases(document).items()}
    assert statuses["cluster:td.alpha.c1"] == "failed"
    assert {statuses[n] for n in statuses if n != "cluster:td.alpha.c1"} == {"blocked"}
    # a stack is left: the resume needs the spec, and says so
    receipt_id = document["receipt_id"]
    resume = document["resume_command"]
    assert resume == f"npa-pulumi destroy --receipt {receipt_id} --spec {spec.resolve()} --yes"
    without = npa("destroy", "--receipt", receipt_id, "--yes", "--output", "json")
    assert without.code == 2 and "--spec" in without.json()["error"]["message"]
    assert inventory()["mk8s_clusters"]  # nothing was touched

    npa("local-cloud", "fault", "clear", check=True)
    done = npa(*shlex.split(resume)[1:], "--output", "json")
    assert done.code == 0, done.stderr[-3000:] + done.stdout[-3000:]
    assert done.json()["resumes"] == receipt_id
    assert {p["status"] for p in done.json()["phases"]} == {"done"}
    assert _ids(inventory()) == empty


def test_refused_deletions_are_partial_cleanups_continued_from_their_receipt(
    isolated_home: Path, tmp_path: Path
) -> None:
    """A deletion that was asked for and cannot be proved safe is a partial cleanup: exit 2, a receipt,
    and the `destroy --receipt ID --yes` that continues it; a retention that was not asked for is not.
    Only the project stack is deployed (`up --stage projects`): no cluster is needed for any of it."""
    spec = write_spec(tmp_path / "fleet.yaml", ALPHA_SPEC)
    npa("local-cloud", "init", check=True)
    npa("local-cloud", "set", "project-default-network", "1", check=True)  # as Nebius does
    empty = _ids(inventory())
    deployed = npa("up", "--spec", str(spec), "--stage", "projects", "--yes", "--output", "json")
    assert deployed.code == 0, deployed.stderr[-3000:] + deployed.stdout[-3000:]
    cloud = inventory()
    alpha = _alpha(cloud)
    [bucket] = [b for b in cloud["buckets"] if b["project_id"] == alpha]
    [network] = [n for n in cloud["networks"] if n["project_id"] == alpha]

    # ---- whole-project inventory: what a user put into the project refuses its deletion, by name
    def add(kind: str, name: str, *extra: str) -> str:
        made = npa("local-cloud", "add", kind, "--project", alpha, "--name", name, *extra, "--output", "json")
        assert made.code == 0, made.stderr
        return str(made.json()["result"]["id"])

    vm, disk = add("instance", "users-vm"), add("disk", "users-disk")
    sg = add("security-group", "users-sg", "--network", network["id"])
    dry = npa("destroy", "--spec", str(spec), *OPT_IN, "--dry-run", "--output", "json")
    assert dry.code == 0, dry.stderr[-3000:]
    project = _phases(dry.json())["project:td.alpha"]
    assert project["status"] == "refused"
    for named in (
        f"instance {vm} (users-vm)",
        f"disk {disk} (users-disk)",
        f"security group {sg} (users-sg)",
    ):
        assert named in project["retains"]["foreign"] and named in project["reason"]
    # ... while the rest of the teardown would go ahead
    assert _phases(dry.json())["bucket:td.alpha"]["status"] == "planned"

    # ---- a bucket whose labels were removed out of band cannot be proved the fleet's: asked to delete it,
    # the destroy refuses it and exits 2 with a receipt; what was not asked for is retained, not refused
    relabel = {"resource_id": bucket["id"], "labels": {"team": "ml"}}
    assert npa("local-cloud", "api", "set_labels", "--args", json.dumps(relabel)).code == 0
    partial = npa("destroy", "--spec", str(spec), "--delete-buckets", "--yes", "--output", "json")
    assert partial.code == 2, partial.stderr[-3000:] + partial.stdout[-3000:]
    document = partial.json()
    assert document["outcome"] == "partial-cleanup" and document["ok"] is False
    phases = _phases(document)
    assert phases["network:td.alpha"]["status"] == "retained"  # the project's default network: its own
    assert phases["bucket:td.alpha"]["status"] == "refused"
    assert "labels" in phases["bucket:td.alpha"]["reason"]
    assert phases["storage-identity:td.alpha"]["status"] == "retained"  # not asked for
    assert phases["project:td.alpha"]["status"] == "retained"  # not asked for
    receipt_id = document["receipt_id"]
    assert document["resume_command"] == f"npa-pulumi destroy --receipt {receipt_id} --yes"
    receipt = json.loads(Path(document["receipt"]).read_text())
    assert receipt["outcome"] == "partial-cleanup" and receipt["resume_command"] == document["resume_command"]
    assert {p["name"]: p["status"] for p in receipt["phases"]}["bucket:td.alpha"] == "refused"
    assert bucket["id"] in {b["id"] for b in inventory()["buckets"]}  # nothing unproven was deleted
    text = npa("destroy", "--receipt", receipt_id, "--dry-run", input_text="", env={"COLUMNS": "300"})
    assert text.code == 0 and "refused" in text.stdout, text.stdout

    # ---- the labels put back: the resume from the receipt (the stack is gone) finishes the bucket
    restore = {"resource_id": bucket["id"], "labels": bucket["labels"]}
    assert npa("local-cloud", "api", "set_labels", "--args", json.dumps(restore)).code == 0
    resumed = npa(*shlex.split(document["resume_command"])[1:], "--output", "json")
    assert resumed.code == 0, resumed.stderr[-3000:] + resumed.stdout[-3000:]
    assert _phases(resumed.json())["bucket:td.alpha"]["status"] == "done"
    assert bucket["id"] not in {b["id"] for b in inventory()["buckets"]}

    # ---- the project, asked for now, is refused while the user's VM, disk and security group stay; once
    # they are gone the resume deletes it with its storage identity (and its grant's group) and the
    # default topology, leaving the cloud as it was
    asked = npa(
        "destroy",
        "--spec",
        str(spec),
        "--delete-storage-identity",
        "--delete-projects",
        "--yes",
        "--output",
        "json",
    )
    assert asked.code == 2, asked.stderr[-3000:] + asked.stdout[-3000:]
    statuses = {name: p["status"] for name, p in _phases(asked.json()).items()}
    assert statuses["storage-identity:td.alpha"] == "done" and statuses["project:td.alpha"] == "refused"
    assert alpha in {p["id"] for p in inventory()["projects"]}
    for op, key, value in (
        ("delete_instance", "instance_id", vm),
        ("delete_disk", "disk_id", disk),
        ("delete_security_group", "security_group_id", sg),
    ):
        assert npa("local-cloud", "api", op, "--args", json.dumps({key: value})).code == 0
    done = npa(*shlex.split(asked.json()["resume_command"])[1:], "--output", "json")
    assert done.code == 0, done.stderr[-3000:] + done.stdout[-3000:]
    assert _phases(done.json())["project:td.alpha"]["status"] == "done"
    assert _ids(inventory()) == empty
