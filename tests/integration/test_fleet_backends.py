"""Both backends deploy side by side: a soperator target next to an mk8s target in one project, each in a
cluster stack of its own on the project's shared network; deselecting one leaves it untouched, and a
preview lists both as what they are."""

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
          slurm_operator_version: "4.1.6"
          workers:
            - {name: cpu, platform: cpu-d3, preset: 16vcpu-64gb, size: 2}
"""


def test_a_soperator_target_deploys_beside_an_mk8s_target(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", MIXED)
    plan = npa("plan", "--spec", str(spec), "--output", "json")
    assert plan.code == 0, plan.stderr
    backends = {c["name"]: c["backend"] for p in plan.json()["projects"] for c in p["clusters"]}
    assert backends == {"train": "mk8s", "slurm": "soperator"}

    npa("local-cloud", "init", check=True)
    result = npa("up", "--spec", str(spec), "--yes", "--output", "json")
    assert result.code == 0, result.stderr[-3000:]
    document = result.json()
    clusters = {c["cluster_name"]: c for c in document["clusters"]}
    assert clusters["train"]["status"] == clusters["slurm"]["status"] == "deployed"
    assert clusters["slurm"]["backend"] == "soperator" and clusters["train"]["backend"] == "mk8s"
    assert document["ok"] is True and document["backend_counts"] == {"mk8s": 1, "soperator": 1}
    assert sorted(c["name"] for c in inventory()["mk8s_clusters"]) == ["soperator-slurm", "train"]

    # Deselected, the soperator target is left alone (the deployed mk8s cluster is unchanged).
    again = npa("up", "--spec", str(spec), "--only-clusters", "train", "--yes", "--output", "json")
    assert again.code == 0, again.stderr[-3000:]
    assert [c["status"] for c in again.json()["clusters"]] == ["unchanged"]
    assert sorted(c["name"] for c in inventory()["mk8s_clusters"]) == ["soperator-slurm", "train"]

    # A preview plans both (nothing is listed as unsupported) and changes nothing.
    preview = npa("preview", "--spec", str(spec), "--output", "json")
    assert preview.code == 0, preview.stderr[-3000:]
    previewed = {s["stack"]: s["status"] for s in preview.json()["stacks"]}
    assert "not-supported" not in previewed.values()
    assert {"mixed.project-existing1.slurm", "mixed.project-existing1.train"} <= set(previewed)
