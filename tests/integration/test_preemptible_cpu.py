"""`cpu_nodes.preemptible: true` end to end: the plan shows it, preflight budgets the nodes as preemptible
instances, the recipe gets `cpu_nodes_preemptible = true` and the cloud's CPU node group is preemptible."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_helpers import inventory, npa, write_spec

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: spot
region: us-central1
projects:
  - project_id: project-existing1
    clusters:
      - name: cheap
        cpu_nodes: {count: 2, platform: cpu-d3, preset: 4vcpu-16gb, preemptible: true}
"""


def test_preemptible_cpu_pool_end_to_end(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    plan = npa("plan", "--spec", str(spec), "--output", "json")
    assert plan.code == 0, plan.stderr
    assert plan.json()["projects"][0]["clusters"][0]["cpu_nodes"]["preemptible"] is True

    tfvars = npa("tfvars", "--spec", str(spec))
    assert tfvars.code == 0, tfvars.stderr
    assert '"cpu_nodes_preemptible": true' in tfvars.stdout

    npa("local-cloud", "init", check=True)
    preflight = npa("preflight", "--spec", str(spec), "--output", "json")
    assert preflight.code == 0, preflight.stderr
    needed = {r["name"]: r["required"] for r in preflight.json()["requirements"]}
    assert needed["compute.instance.preemptible.count"] == 2
    assert "compute.instance.count" not in needed

    up = npa("up", "--spec", str(spec), "--yes", "--output", "json")
    assert up.code == 0, up.stderr[-3000:]
    [group] = inventory()["node_groups"]
    assert group["preemptible"] is True and group["target_node_count"] == 2
