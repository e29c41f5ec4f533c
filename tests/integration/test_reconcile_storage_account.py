"""`reconcile storage-account --attest-npa-created` (the teardown guide's legacy path, issue 57 item 5)
proves the exact account against the local cloud and records the attestation; a wrong id, another
account's name or a dry run records nothing. Only the project's teardown record is needed (no stack)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from fleet_helpers import npa, write_spec

pytestmark = pytest.mark.integration

NO_KUBE = {"NPA_LOCAL_CLOUD_KUBERNETES_API": "0"}
SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: leg
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - project_id: project-existing1
"""
STACK = "leg.project-existing1"


def _account(name: str) -> str:
    """A service account made outside the fleet (no fleet labels), as the original's storage setup did."""
    from npa_pulumi.cloud.factory import make_cloud

    return make_cloud("local").create_service_account("project-existing1", name, labels={}).id


def _record(home: Path, account_id: str) -> None:
    """The project's teardown record: the account its stack found by name (created: false)."""
    path = home / ".npa-pulumi" / "teardown" / "leg" / f"{STACK}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    evidence = {
        "project_stack": STACK,
        "project_key": "project-existing1",
        "project_id": "project-existing1",
        "service_account_id": account_id,
    }
    path.write_text(json.dumps(evidence))


def test_the_exact_account_is_proved_and_attested(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NPA_LOCAL_CLOUD_KUBERNETES_API", "0")
    npa("local-cloud", "init", env=NO_KUBE, check=True)
    account = _account("npa-fleet-storage")
    _record(isolated_home, account)
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    attestation = isolated_home / ".npa-pulumi" / "teardown" / "leg" / "attestations" / f"{STACK}.json"
    base = ["reconcile", "storage-account", "--spec", str(spec), "--project", "project-existing1"]
    why = ["--reason", "made by npa fleet deploy (deploy.log of 2026-08-22)"]

    wrong = npa(*base, "--id", "serviceaccount-e00other", *why, "--attest-npa-created", "--yes", env=NO_KUBE)
    assert wrong.code == 1 and "only the recorded account" in wrong.stderr
    dry = npa(*base, "--id", account, *why, "--dry-run", "--output", "json", env=NO_KUBE)
    assert dry.code == 0 and dry.json()["attested"] is False and not attestation.exists()
    unasked = npa(*base, "--id", account, *why, "--yes", env=NO_KUBE)
    assert unasked.code == 2 and "--attest-npa-created" in unasked.stderr and not attestation.exists()

    done = npa(*base, "--id", account, *why, "--attest-npa-created", "--yes", "--output", "json", env=NO_KUBE)
    assert done.code == 0, done.stderr[-2000:]
    recorded = json.loads(attestation.read_text())
    assert recorded["service_account_id"] == account and recorded["project_id"] == "project-existing1"
    assert recorded["reason"].startswith("made by npa fleet") and recorded["tenant_id"] == "tenant-local"
    assert stat.S_IMODE(os.stat(attestation).st_mode) == 0o600


def test_an_account_of_another_name_is_not_attested(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NPA_LOCAL_CLOUD_KUBERNETES_API", "0")
    npa("local-cloud", "init", env=NO_KUBE, check=True)
    account = _account("someone-elses")
    _record(isolated_home, account)
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    base = ["reconcile", "storage-account", "--spec", str(spec), "--project", "project-existing1"]
    result = npa(*base, "--id", account, "--reason", "r", "--attest-npa-created", "--yes", env=NO_KUBE)
    assert result.code == 1 and "is named 'someone-elses'" in result.stderr
