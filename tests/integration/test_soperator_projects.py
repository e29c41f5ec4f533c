"""A project whose selected clusters are all `backend: soperator`: `up` creates the project and its network
(preflight budgets them) and deploys the soperator cluster in it; a bucket declared for such a project is
refused before any change, as the original tool refused object storage without an mk8s target."""

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
          slurm_operator_version: "4.1.6"
          workers:
            - {name: cpu, platform: cpu-d3, preset: 16vcpu-64gb, size: 2}
"""
STORAGE = "    object_storage: {enabled: true, storage_class: standard, size_gibibytes: 16}\n"


def test_a_soperator_only_project_is_created_with_its_cluster(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    npa("local-cloud", "init", check=True)
    projects_before = inventory()["projects"]
    result = npa("up", "--spec", str(spec), "--yes", "--output", "json")
    assert result.code == 0, result.stderr[-3000:]
    stacks = {s["stack"]: s for s in result.json()["stacks"]}
    assert stacks["sop.hpc"]["status"] == "deployed"  # its project stack: project and network
    assert stacks["sop.hpc.slurm"]["status"] == "deployed"
    assert stacks["sop.project-existing1.cluster"]["status"] == "deployed"
    after = inventory()
    [created] = [p for p in after["projects"] if p not in projects_before]
    assert created["name"] == "hpc"
    [network] = [n for n in after["networks"] if n["project_id"] == created["id"]]
    [soperator] = [c for c in after["mk8s_clusters"] if c["name"] == "soperator-slurm"]
    assert soperator["project_id"] == created["id"]
    [subnet] = [s for s in after["subnets"] if s["network_id"] == network["id"]]
    assert soperator["subnet_id"] == subnet["id"]


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
