"""`cleanup --spec` deletes nothing in the cloud unless asked explicitly (issue 57 item 5, as the teardown
guide keeps cleanup local): it reports an orphan network of the fleet; `--delete-orphans` is what deletes
it; a deletion flag without `--delete-orphans` is refused (exit 2) before anything is read or changed."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_helpers import inventory, npa, write_spec

pytestmark = pytest.mark.integration

NO_KUBE = {"NPA_LOCAL_CLOUD_KUBERNETES_API": "0"}
SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: sweep
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - project_id: project-existing1
"""


def _orphan_network() -> str:
    """A network the fleet made (its labels) that no stack references: what a crashed run leaves."""
    from npa_pulumi.cloud.factory import make_cloud
    from npa_pulumi.engine.teardown.phases import MANAGED_BY

    labels = {"npa-fleet": "sweep", "managed-by": MANAGED_BY}
    return make_cloud("local").create_network("project-existing1", "sweep-orphan", labels=labels).id


def test_cleanup_reports_and_only_delete_orphans_deletes(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NPA_LOCAL_CLOUD_KUBERNETES_API", "0")
    npa("local-cloud", "init", env=NO_KUBE, check=True)
    network = _orphan_network()
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    before = inventory(env=NO_KUBE)

    reported = npa("cleanup", "--spec", str(spec), "--yes", "--output", "json", env=NO_KUBE)
    assert reported.code == 0, reported.stderr[-3000:]
    assert reported.json()["dry_run"] is True and "--delete-orphans" in reported.stderr
    assert [p for p in reported.json()["phases"] if network in str(p["deletes"])]
    assert inventory(env=NO_KUBE) == before  # nothing deleted in the cloud

    refused = npa("cleanup", "--spec", str(spec), "--delete-buckets", "--yes", env=NO_KUBE)
    assert refused.code == 2 and "--delete-orphans" in refused.stderr
    assert inventory(env=NO_KUBE) == before

    deleted = npa(
        "cleanup", "--spec", str(spec), "--delete-orphans", "--yes", "--output", "json", env=NO_KUBE
    )
    assert deleted.code == 0, deleted.stderr[-3000:]
    assert network not in {n["id"] for n in inventory(env=NO_KUBE)["networks"]}
