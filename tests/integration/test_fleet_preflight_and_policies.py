"""`up` stops in preflight before any mutation when the tenant falls short; user policy packs run with the
built-in one and their results are reported per stack; a policy config can make them mandatory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fleet_helpers import REPO, inventory, npa, write_spec

pytestmark = pytest.mark.integration

EXTRA_PACK = Path(__file__).parent / "support" / "extra_pack"

GPU_FLEET = """\
apiVersion: npa.fleet/v0.0.1
name: short
region: us-central1
project_prefix: "short-"
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  gpu_nodes: {count: 1, platform: gpu-rtx6000, preset: 1gpu-24vcpu-218gb}
projects:
  - name: a
    object_storage: {enabled: true, storage_class: enhanced, size_gibibytes: 64}
"""

CPU_FLEET = """\
apiVersion: npa.fleet/v0.0.1
name: pol
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - project_id: project-existing1
"""


def test_up_stops_in_preflight_and_changes_nothing(isolated_home: Path, tmp_path: Path) -> None:
    short_tenant = REPO / "examples" / "local-tenant-short.yaml"
    npa("local-cloud", "init", "--tenant-fixture", str(short_tenant), check=True)
    before = inventory()
    spec = write_spec(tmp_path / "fleet.yaml", GPU_FLEET)

    result = npa("up", "--spec", str(spec), "--yes", "--output", "json")
    assert result.code == 1
    document = result.json()
    assert document["preflight"]["ok"] is False
    short = {r["name"] for r in document["preflight"]["requirements"] if r["shortfall"]}
    assert "compute.instance.gpu.rtx6000" in short  # on-demand GPU quota is 0 in the short tenant
    assert document["stacks"] == []
    assert "preflight" in document["error"]
    after = inventory()
    kinds = ("projects", "networks", "subnets", "mk8s_clusters", "node_groups", "buckets", "service_accounts")
    for kind in kinds:
        assert after[kind] == before[kind], f"preflight failure must not create {kind}"


def test_extra_policy_pack_results_per_stack(isolated_home: Path, tmp_path: Path) -> None:
    npa("local-cloud", "init", check=True)
    spec = write_spec(tmp_path / "fleet.yaml", CPU_FLEET)

    advisory = npa("preview", "--spec", str(spec), "--policy-pack", str(EXTRA_PACK), "--output", "json")
    assert advisory.code == 0, advisory.stderr[-3000:]
    clusters = {c["stack"]: c for c in advisory.json()["clusters"]}
    [violation] = clusters["pol.project-existing1.cluster"]["policy"]
    assert violation["policy"] == "change-ticket-required"
    assert violation["level"] == "advisory"
    assert "change ticket" in violation["message"]

    config = tmp_path / "policy-config.json"
    config.write_text(json.dumps({"change-ticket-required": "mandatory"}))
    blocked = npa(
        "up",
        "--spec",
        str(spec),
        "--yes",
        "--policy-pack",
        str(EXTRA_PACK),
        "--policy-config",
        str(config),
        "--output",
        "json",
    )
    assert blocked.code == 1
    cluster = {c["stack"]: c for c in blocked.json()["clusters"]}["pol.project-existing1.cluster"]
    assert cluster["status"] == "failed"
    levels = {v["level"] for v in cluster["policy"] if v["policy"] == "change-ticket-required"}
    assert levels == {"mandatory"}
    assert inventory()["mk8s_clusters"] == []  # the mandatory violation stopped the update before any change
