"""The local cloud's side of the repair ladder's cloud calls (simulator/node_health.py): a recovery boots
the node again under its name without its host's faults, unless its host is defective; a removal puts a new
node (a new name) in its place; a name no instance has is NotFound; Slurm jobs on a node are recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from npa_pulumi.cloud.errors import InvalidArgument, NotFound
from npa_pulumi.simulator.cloud import LocalCloud
from npa_pulumi.simulator.kube.shapes import GPU_ERROR_LABEL, NOT_READY_LABEL, desired_nodes
from npa_pulumi.simulator.simulator import LocalSimulator


@pytest.fixture
def seeded(tmp_path: Path) -> tuple[LocalSimulator, LocalCloud, str, str]:
    simulator = LocalSimulator(tmp_path / "cloud")
    simulator.initialise()
    simulator.set_setting("provisioning_seconds", 0)
    simulator.set_setting("kubernetes_api", 0)
    cloud = LocalCloud(simulator.directory)
    project = cloud.create_project(cloud.principal().tenant_id, "repair", "us-central1").id
    network = cloud.create_network(project, "net")
    subnet = cloud.create_subnet(project, network.id, "subnet")
    cluster = cloud.create_cluster(project, "train", subnet.id, k8s_version="1.31")
    cloud.create_node_group(cluster.id, "workers", 2, "cpu-d3", "4vcpu-16gb")
    return simulator, cloud, project, cluster.id


def _nodes(simulator: LocalSimulator, cluster_id: str) -> dict[str, Any]:
    snapshot = simulator.cluster_snapshot(cluster_id)
    assert snapshot is not None
    return desired_nodes(*snapshot)


def _boot(node: Any) -> str:
    return str(node["status"]["nodeInfo"]["bootID"])


def test_a_recovery_boots_the_node_again_without_its_hosts_faults(seeded: Any) -> None:
    simulator, cloud, project, cluster_id = seeded
    first, second = sorted(_nodes(simulator, cluster_id))
    for fault in ("gpu_error", "not_ready", "maintenance_scheduled"):
        simulator.set_node_fault(cluster_id, first, fault)
    before = _nodes(simulator, cluster_id)

    repair = cloud.recover_node(project, first)

    after = _nodes(simulator, cluster_id)
    assert (repair.instance_name, repair.action, repair.state) == (first, "RECOVERED", "RUNNING")
    assert set(after) == {first, second} and _boot(after[first]) != _boot(before[first])
    labels = after[first]["metadata"]["labels"]
    assert GPU_ERROR_LABEL not in labels and NOT_READY_LABEL not in labels
    assert "npa.local-cloud/maintenance-scheduled" in labels  # Nebius' schedule, not the host's fault
    assert after[second] == before[second]


def test_a_defective_host_keeps_its_faults_through_a_recovery(seeded: Any) -> None:
    simulator, cloud, project, cluster_id = seeded
    first = sorted(_nodes(simulator, cluster_id))[0]
    simulator.set_node_fault(cluster_id, first, "defective_host")
    simulator.set_node_fault(cluster_id, first, "gpu_error")
    cloud.recover_node(project, first)
    assert GPU_ERROR_LABEL in _nodes(simulator, cluster_id)[first]["metadata"]["labels"]


def test_a_removed_node_is_replaced_by_a_new_one_without_its_faults(seeded: Any) -> None:
    simulator, cloud, project, cluster_id = seeded
    first, second = sorted(_nodes(simulator, cluster_id))
    simulator.set_node_fault(cluster_id, first, "defective_host")
    simulator.set_node_fault(cluster_id, first, "gpu_error")
    repair = cloud.remove_node(project, first)
    after = _nodes(simulator, cluster_id)
    assert (repair.action, set(after)) == ("DELETED", {f"{first}-r1", second})
    assert GPU_ERROR_LABEL not in after[f"{first}-r1"]["metadata"]["labels"]


def test_a_name_no_instance_of_the_project_has_is_not_found(seeded: Any) -> None:
    simulator, cloud, project, cluster_id = seeded
    before = _nodes(simulator, cluster_id)
    with pytest.raises(NotFound):
        cloud.recover_node(project, "no-such-node")
    with pytest.raises(NotFound):
        cloud.remove_node(project, "no-such-node")
    assert _nodes(simulator, cluster_id) == before


def test_slurm_jobs_on_a_node_are_recorded_and_cleared(seeded: Any) -> None:
    simulator, _, _, cluster_id = seeded
    first = sorted(_nodes(simulator, cluster_id))[0]
    assert simulator.set_slurm_jobs(cluster_id, first, 2) == {first: 2}
    # what the cluster's agent reads (its simulated soperator keeps a drain NodeDraining meanwhile)
    snapshot = simulator.cluster_snapshot(cluster_id)
    assert snapshot is not None and snapshot[0]["slurm_jobs"] == {first: 2}
    assert simulator.set_slurm_jobs(cluster_id, first, 0) == {}
    cleared = simulator.cluster_snapshot(cluster_id)
    assert cleared is not None and "slurm_jobs" not in cleared[0]
    with pytest.raises(InvalidArgument):
        simulator.set_slurm_jobs(cluster_id, first, -1)


def test_a_maintenance_event_lists_its_sla_deadline_in_utc_and_refuses_one_without_a_zone(
    seeded: Any,
) -> None:
    simulator, cloud, project, cluster_id = seeded
    first, second = sorted(_nodes(simulator, cluster_id))
    simulator.add_maintenance(
        cluster_id, first, "HW_GPU_XID_79", planned=True, sla_deadline="2026-12-12T04:00+01:00"
    )
    simulator.add_maintenance(cluster_id, second, "HW_IB_LINK_DOWN")
    listed = {e.instance_name: e for e in cloud.list_active_maintenance(project)}
    assert (listed[first].sla_deadline, listed[first].planned) == ("2026-12-12T03:00:00Z", True)
    assert listed[second].sla_deadline == ""  # none given: none listed
    for bad in ("2026-12-12T03:00", "next tuesday"):
        with pytest.raises(InvalidArgument, match=r"RFC 3339|time zone"):
            simulator.add_maintenance(cluster_id, first, "HW_GPU_XID_79", sla_deadline=bad)
