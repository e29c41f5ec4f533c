"""Drift repair (issue #15 part 2): objects deleted or changed in the cloud behind the fleet's back are
reported by `status` and `refresh`, brought back to the spec by `up`, and a second `up` has nothing to do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import inventory, npa, write_spec

pytestmark = pytest.mark.integration

TWO_CLUSTERS = """\
apiVersion: npa.fleet/v0.0.1
name: drift
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - project_id: project-existing1
    object_storage: {enabled: true, storage_class: standard, size_gibibytes: 16}
    clusters:
      - name: gone
      - name: resized
"""


def _clusters(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["cluster_name"]: c for c in document["clusters"]}


def _api(operation: str, **args: Any) -> Any:
    return npa("local-cloud", "api", operation, "--args", json.dumps(args), check=True).json()["result"]


def test_up_repairs_a_deleted_cluster_a_resized_node_group_and_a_deleted_bucket(
    isolated_home: Path, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", TWO_CLUSTERS)
    npa("local-cloud", "init", check=True)
    deployed = npa("up", "--spec", str(spec), "--yes", "-j", "2", "--output", "json")
    assert deployed.code == 0, deployed.stderr[-3000:]
    ids = {name: c["cluster_id"] for name, c in _clusters(deployed.json()).items()}

    sizes = {
        g["id"]: g["target_node_count"] for c in ids.values() for g in _api("list_node_groups", cluster_id=c)
    }
    (bucket,) = inventory()["buckets"]
    gone_groups = {g["id"] for g in _api("list_node_groups", cluster_id=ids["gone"])}
    # Behind the fleet's back: one cluster deleted, the other's CPU node group grown from 1 to 3 nodes,
    # the project's bucket deleted.
    _api("delete_cluster", cluster_id=ids["gone"])
    _api("delete_bucket", bucket_id=bucket["id"])
    groups = _api("list_node_groups", cluster_id=ids["resized"])
    group = next(g for g in groups if g["name"].endswith("-ng-cpu"))
    assert group["target_node_count"] == 1
    _api("resize_node_group", node_group_id=group["id"], node_count=3)

    status = npa("status", "--spec", str(spec), "--output", "json")
    clusters = _clusters(status.json())
    assert clusters["gone"]["status"] == "destroyed"
    assert "run up to recreate it" in clusters["gone"]["error"]
    gone = {d["address"]: d for d in clusters["gone"]["drift"]}
    # Its node groups went with it.
    assert {"nebius_mk8s_v1_cluster.k8s-cluster", "nebius_mk8s_v1_node_group.cpu-only"} <= set(gone)
    assert {d["id"] for d in gone.values()} == {ids["gone"], *gone_groups}
    assert gone["nebius_mk8s_v1_cluster.k8s-cluster"]["id"] == ids["gone"]
    assert {d["reason"] for d in gone.values()} == {"deleted outside the fleet"}
    assert clusters["resized"]["status"] == "drifted"
    (drift,) = clusters["resized"]["drift"]
    assert drift["id"] == group["id"] and drift["address"] == "nebius_mk8s_v1_node_group.cpu-only"
    assert "resized outside the fleet: 3 nodes, the spec says 1" in drift["reason"]
    assert "run up" in clusters["resized"]["error"]

    # `--no-live` shows what the stacks recorded, and says that it did not look at the cloud.
    records = npa("status", "--spec", str(spec), "--no-live", "--output", "json").json()
    assert records["live"] is False and any("--no-live" in w for w in records["warnings"])
    recorded = _clusters(records)
    assert {recorded[name]["status"] for name in ("gone", "resized")} == {"deployed"}
    assert recorded["gone"]["cluster_id"] == ids["gone"] and not recorded["gone"]["drift"]
    assert "live" not in status.json()

    refreshed = npa("refresh", "--spec", str(spec), "--output", "json")
    by_name = {s["cluster_name"]: s for s in refreshed.json()["stacks"] if s["kind"] == "cluster"}
    assert by_name["resized"]["status"] == "drifted"
    assert [d["id"] for d in by_name["resized"]["drift"]] == [group["id"]]
    assert by_name["gone"]["status"] == "drifted"
    assert "nebius_mk8s_v1_cluster.k8s-cluster" in [d["address"] for d in by_name["gone"]["drift"]]

    repaired = npa("up", "--spec", str(spec), "--yes", "-j", "2", "--output", "json")
    assert repaired.code == 0, repaired.stderr[-3000:]
    clusters = _clusters(repaired.json())
    assert clusters["gone"]["status"] == clusters["resized"]["status"] == "deployed"
    assert [p["status"] for p in repaired.json()["projects"]] == ["deployed"]
    assert [b["name"] for b in inventory()["buckets"]] == [bucket["name"]]
    # The same IDs come back (the same stack repeating its own create), at the spec's size.
    live = {c["id"]: c for c in inventory()["mk8s_clusters"]}
    assert set(live) == set(ids.values())
    after_repair = {
        g["id"]: g["target_node_count"] for c in ids.values() for g in _api("list_node_groups", cluster_id=c)
    }
    assert after_repair == sizes

    after = npa("status", "--spec", str(spec), "--output", "json")
    assert {c["status"] for c in after.json()["clusters"]} == {"deployed"}

    again = npa("up", "--spec", str(spec), "--yes", "-j", "2", "--output", "json")
    assert again.code == 0, again.stderr[-3000:]
    assert {s["status"] for s in again.json()["stacks"]} == {"unchanged"}
