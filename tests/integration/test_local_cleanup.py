"""`npa-pulumi cleanup` without a spec is local only (issue 18 item 6): it reports what the npa home holds,
removes with --yes only the residue of stacks verified gone (never what a live stack uses, never logs or
teardown records), lists receipts and prunes only old, fully terminal ones; a backend it cannot read here
leaves everything unverified and in place."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest
from fleet_helpers import npa, write_spec

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: tidy
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
projects:
  - project_id: project-existing1
    clusters:
      - name: kept
"""
LIVE = "tidy.project-existing1.kept"
GHOST = "tidy.project-existing1.ghost"
OLD = time.time() - 40 * 86_400


def _receipt(home: Path, rid: str, outcome: str, resumes: str | None = None, old: bool = True) -> Path:
    path = home / "teardown-receipts" / "tidy" / f"{rid}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"id": rid, "command": "destroy", "outcome": outcome, "resumes": resumes}))
    if old:
        os.utime(path, (OLD, OLD))
    return path


def _plant(home: Path) -> dict[str, Path]:
    """Residue of a stack that never existed in this backend, and a dead run's record."""
    ghost_work = home / "work" / GHOST
    (ghost_work / "k8s-training").mkdir(parents=True)
    (ghost_work / "k8s-training" / "terraform.tfstate.backup").write_text("{}")
    kubeconfig = home / "kubeconfigs" / "ghost.yaml"
    kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    kubeconfig.write_text("apiVersion: v1\n")
    registration = home / "clusters" / "ghost.json"
    registration.parent.mkdir(parents=True, exist_ok=True)
    registration.write_text(json.dumps({"stack": GHOST}))
    run_record = home / "state" / ".npa-runs" / "tidy" / "dead.json"
    run_record.parent.mkdir(parents=True, exist_ok=True)
    run_record.write_text(
        json.dumps(
            {
                "pid": 4_000_000,  # above pid_max: provably not running
                "hostname": socket.gethostname(),
                "username": "someone",
                "timestamp": "2026-01-01T00:00:00Z",
                "command": "up",
                "stacks": [GHOST],
            }
        )
    )
    return {"work": ghost_work, "kubeconfig": kubeconfig, "registration": registration, "run": run_record}


def test_local_cleanup_reports_removes_only_residue_and_prunes_only_terminal_receipts(
    isolated_home: Path, tmp_path: Path
) -> None:
    home = isolated_home / ".npa-pulumi"
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    npa("local-cloud", "init", check=True)
    npa("up", "--spec", str(spec), "--yes", "--no-health-gate", "--output", "json", check=True)
    live_work = home / "work" / LIVE
    assert live_work.is_dir()
    planted = _plant(home)
    _receipt(home, "20250101T000000Z-1-destroy", "ok")
    _receipt(home, "20250102T000000Z-2-destroy", "partial-cleanup")
    _receipt(home, "20250103T000000Z-3-destroy", "ok", resumes="20250102T000000Z-2-destroy")
    _receipt(home, "20250104T000000Z-4-destroy", "partial-cleanup")  # never resumed: kept
    _receipt(home, "20261201T000000Z-5-destroy", "ok", old=False)  # recent: kept

    # A report: nothing changes without --yes.
    report = npa("cleanup", "--output", "json")
    assert report.code == 0, report.stderr[-3000:]
    document = report.json()
    items = {item["path"]: item for item in document["items"]}
    assert items[str(live_work)]["stack_state"] == "exists" and not items[str(live_work)]["removable"]
    for path in planted.values():
        assert items[str(path)]["removable"], path
    assert items[str(planted["work"])]["stack_state"] == "gone"
    assert document["operational_residue_present"] is True
    assert document["verification_unresolved"] == []
    (costing,) = document["still_costing"]
    assert costing["stack"] == LIVE and costing["holds"].startswith("cluster ")
    assert "--only-projects project-existing1 --only-clusters kept --yes" in costing["command"]
    terminal = {r["id"]: r["terminal"] for r in document["receipts"]}
    assert terminal == {
        "20250101T000000Z-1-destroy": True,
        "20250102T000000Z-2-destroy": True,  # continued to the end by receipt 3
        "20250103T000000Z-3-destroy": True,
        "20250104T000000Z-4-destroy": False,
        "20261201T000000Z-5-destroy": True,
    }
    assert all(path.exists() for path in planted.values())

    # Bad input is refused before anything changes; pruning without --yes is refused when not interactive.
    assert npa("cleanup", "--prune-receipts", "--output", "json").code == 2
    assert npa("cleanup", "--delete-buckets", "--output", "json").code == 2
    refused = npa("cleanup", "--prune-receipts", "--receipt-retention-days", "30", "--output", "json")
    assert refused.code == 1 and "without --yes" in refused.json()["error"]["message"]
    assert len(list((home / "teardown-receipts" / "tidy").glob("*.json"))) == 5

    # A backend this machine cannot read: every stack-bound item is unverified and stays.
    elsewhere = npa(
        "cleanup", "--backend", "s3://state?endpoint=http://127.0.0.1:9&region=x", "--yes", "--output", "json"
    )
    assert elsewhere.code == 0, elsewhere.stderr[-3000:]
    unverified = set(elsewhere.json()["verification_unresolved"])
    assert {str(live_work), str(planted["work"]), str(planted["kubeconfig"])} <= unverified
    assert planted["work"].exists() and planted["kubeconfig"].exists()

    applied = npa(
        "cleanup", "--yes", "--prune-receipts", "--receipt-retention-days", "30", "--output", "json"
    )
    assert applied.code == 0, applied.stderr[-3000:]
    result = applied.json()
    assert not any(path.exists() for path in planted.values())
    assert live_work.is_dir() and (home / "logs").is_dir()
    assert result["operational_residue_present"] is False
    assert sorted(result["pruned"]) == [
        "20250101T000000Z-1-destroy",
        "20250102T000000Z-2-destroy",
        "20250103T000000Z-3-destroy",
    ]
    assert result["audit_receipts_retained"] == 2
    left = sorted(p.stem for p in (home / "teardown-receipts" / "tidy").glob("*.json"))
    assert left == ["20250104T000000Z-4-destroy", "20261201T000000Z-5-destroy"]
    # The cluster is untouched: cleanup never talks to the cloud.
    status = npa("status", "--spec", str(spec), "--output", "json")
    assert status.code == 0 and status.json()["stacks"][-1]["stack"] == LIVE
