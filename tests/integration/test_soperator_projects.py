"""A project whose selected clusters are all `backend: soperator` (planned, not deployable yet): `up`
creates nothing for it — no project, network or bucket that preflight never budgeted — and a bucket
declared for it is refused before any change, as the original tool refused object storage without an mk8s
target."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_helpers import inventory, npa, write_spec

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: sop
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - project_id: project-existing1
  - name: hpc
    clusters:
      - name: slurm
        backend: soperator
        soperator:
          slurm_operator_version: "4.1.0"
          workers:
            - {name: cpu, platform: cpu-d3, preset: 16vcpu-64gb, size: 2}
"""
STORAGE = "    object_storage: {enabled: true, storage_class: standard, size_gibibytes: 16}\n"


def test_a_soperator_only_project_is_not_created(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    npa("local-cloud", "init", check=True)
    projects_before = inventory()["projects"]
    result = npa("up", "--spec", str(spec), "--yes", "--output", "json")
    assert result.code == 1, result.stderr[-3000:]  # the soperator target cannot be deployed: a failure
    stacks = {s["stack"]: s for s in result.json()["stacks"]}
    assert stacks["sop.hpc.slurm"]["status"] == "not-deployable"
    assert "sop.hpc" not in stacks  # no project stack: nothing of the project is created
    assert stacks["sop.project-existing1.cluster"]["status"] == "deployed"
    after = inventory()
    assert after["projects"] == projects_before
    assert not [n for n in after["networks"] if n["name"].startswith("hpc")]


@pytest.mark.parametrize("command", ["up", "preview"])
def test_object_storage_without_an_mk8s_cluster_is_refused(
    isolated_home: Path, tmp_path: Path, command: str
) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", SPEC.replace("  - name: hpc\n", "  - name: hpc\n" + STORAGE))
    npa("local-cloud", "init", check=True)
    before = inventory()
    extra = ["--yes"] if command == "up" else []
    result = npa(command, "--spec", str(spec), *extra, "--output", "json")
    assert result.code == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    [problem] = result.json()["error"]["problems"]
    assert problem["path"] == "projects[1].object_storage" and "mk8s" in problem["message"]
    assert (problem["line"], problem["column"]) == (9, 5)
    assert inventory() == before
    assert not (isolated_home / ".npa-pulumi" / "state" / ".pulumi" / "stacks").exists()
