"""A soperator target is planned and validated, but `up` reports it as not supported yet — per target,
without failing the mk8s targets next to it."""

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


def test_soperator_target_is_reported_not_supported(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", MIXED)
    plan = npa("plan", "--spec", str(spec), "--output", "json")
    assert plan.code == 0, plan.stderr
    backends = {c["name"]: c["backend"] for p in plan.json()["projects"] for c in p["clusters"]}
    assert backends == {"train": "mk8s", "slurm": "soperator"}

    npa("local-cloud", "init", check=True)
    result = npa("up", "--spec", str(spec), "--yes", "--output", "json")
    assert result.code == 0, result.stderr[-3000:]
    clusters = {c["cluster_name"]: c for c in result.json()["clusters"]}
    assert clusters["train"]["status"] == "deployed"
    assert clusters["slurm"]["status"] == "not-supported"
    assert "not supported yet" in clusters["slurm"]["error"]
    assert [c["name"] for c in inventory()["mk8s_clusters"]] == ["train"]
