"""Drift: what a recipe declared it made, compared with the local cloud (npa_pulumi/bridge/drift.py)."""

from __future__ import annotations

from pathlib import Path

from npa_pulumi.bridge.drift import declared_objects, live_drift
from npa_pulumi.simulator import LocalCloud, LocalSimulator

TIGHT = Path(__file__).resolve().parents[2] / "fixtures" / "local_cloud" / "tight-tenant.yaml"
PROJECT = "project-existing1"


def test_deleted_and_resized_objects_are_drift_and_matching_ones_are_not(tmp_path: Path) -> None:
    sim = LocalSimulator(tmp_path / "cloud")
    sim.initialise(TIGHT)
    subnet = sim.list_subnets(PROJECT)[0]["id"]
    cluster = sim.create_cluster(PROJECT, "c1", subnet)
    cpu = sim.create_node_group(cluster["id"], "cpu", 2, "cpu-d3", "16vcpu-64gb", disk_size_gib=100)
    other = sim.create_node_group(cluster["id"], "cpu2", 1, "cpu-d3", "16vcpu-64gb", disk_size_gib=100)
    declared = declared_objects(
        {
            "npa_live_objects": {
                "terraform_data.cluster": {"kind": "cluster", "id": cluster["id"], "node_count": None},
                "terraform_data.cpu": {"kind": "node_group", "id": cpu["id"], "node_count": 2},
                "terraform_data.other": {"kind": "node_group", "id": other["id"], "node_count": 1},
                "terraform_data.fs[0]": {
                    "kind": "filesystem",
                    "id": "computefilesystem-e00nothere",
                    "node_count": None,
                },
            }
        }
    )
    assert declared is not None
    cloud = LocalCloud(sim.directory)
    assert [d.address for d in live_drift(cloud, PROJECT, declared)] == ["terraform_data.fs[0]"]

    sim.resize_node_group(cpu["id"], 3)
    sim.delete_node_group(other["id"])
    found = {d.address: d.reason for d in live_drift(cloud, PROJECT, declared)}
    assert found == {
        "terraform_data.cpu": "resized outside the fleet: 3 nodes, the spec says 2",
        "terraform_data.other": "deleted outside the fleet",
        "terraform_data.fs[0]": "deleted outside the fleet",
    }


def test_a_recipe_without_the_output_declares_nothing() -> None:
    assert declared_objects({"cluster_id": "x"}) is None
    assert declared_objects(None) is None
