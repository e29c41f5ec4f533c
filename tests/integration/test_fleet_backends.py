"""A soperator target is planned and validated, but this version cannot deploy it: `up` reports it as a
failure of its own (exit 1, the reason and what to do) while the mk8s target next to it deploys, and
deselecting it makes the run succeed."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_helpers import inventory, npa, write_spec

pytestmark = pytest.mark.integration

MIXED = """\
apiVersion: npa.fleet/v0.0.1
name: mixed
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - project_id: project-existing1
    clusters:
      - name: train
      - name: slurm
        backend: soperator
        soperator:
          slurm_operator_version: "4.1.0"
          workers:
            - {name: cpu, platform: cpu-d3, preset: 16vcpu-64gb, size: 2}
"""


def test_an_undeployable_soperator_target_fails_up(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", MIXED)
    plan = npa("plan", "--spec", str(spec), "--output", "json")
    assert plan.code == 0, plan.stderr
    backends = {c["name"]: c["backend"] for p in plan.json()["projects"] for c in p["clusters"]}
    assert backends == {"train": "mk8s", "slurm": "soperator"}

    npa("local-cloud", "init", check=True)
    result = npa("up", "--spec", str(spec), "--yes", "--output", "json")
    assert result.code == 1, result.stderr[-3000:]
    document = result.json()
    clusters = {c["cluster_name"]: c for c in document["clusters"]}
    assert clusters["train"]["status"] == "deployed"
    assert clusters["slurm"]["status"] == "not-deployable"
    assert "not supported yet" in clusters["slurm"]["error"]
    assert "--only-clusters" in clusters["slurm"]["error"]
    assert clusters["slurm"]["retry_command"] is None  # retrying would change nothing
    assert document["ok"] is False and document["totals"]["not-deployable"] == 1
    assert [c["name"] for c in inventory()["mk8s_clusters"]] == ["train"]

    # Deselected, the same fleet's run succeeds (the deployed cluster is unchanged).
    again = npa("up", "--spec", str(spec), "--only-clusters", "train", "--yes", "--output", "json")
    assert again.code == 0, again.stderr[-3000:]
    assert [c["status"] for c in again.json()["clusters"]] == ["unchanged"]

    # A preview lists it as not supported without failing (it changes nothing).
    preview = npa("preview", "--spec", str(spec), "--output", "json")
    assert preview.code == 0, preview.stderr[-3000:]
    previewed = {s["stack"]: s["status"] for s in preview.json()["stacks"]}
    assert previewed["mixed.project-existing1.slurm"] == "not-supported"
