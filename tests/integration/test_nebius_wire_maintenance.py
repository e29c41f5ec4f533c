"""The port's `list_active_maintenance` on every adapter: the project's unfinished maintenance events of
the compute MaintenanceService (`ListActive`, paged), each joined to the instance whose
`maintenance_event_id` names it; a finished event is gone; another project's events are not listed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from wire.backends import REGION, Backend, backend_kinds, open_backend
from wire.coverage import covers, declared

pytestmark = pytest.mark.integration


@pytest.fixture(params=backend_kinds())
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    with open_backend(request.param, tmp_path, monkeypatch) as b:
        yield b
        missing = declared(request.function) - b.cloud.called
        assert not missing, f"{request.function.__name__} declares {sorted(missing)} but never calls them"


def _seed(backend: Backend, project_id: str) -> tuple[list[str], Callable[[], object]]:
    """Three nodes' instances, two with an active event; returns their names and how to finish one."""
    if backend.kind == "nebius":
        fake = backend.world.fake  # type: ignore[attr-defined]
        with fake.lock:
            ids = [fake.add_instance(project_id, f"computeinstance-n{i}", "gpu-h100-sxm") for i in range(3)]
            first = fake.add_maintenance(ids[0], "HW_GPU_XID_79")
            fake.add_maintenance(ids[2], "HW_IB_LINK_DOWN", planned=True)
        names = [fake.instances[i].metadata.name for i in ids]

        def finish() -> None:
            with fake.lock:
                fake.finish_maintenance(first)

        return names, finish
    simulator = backend.inner.simulator  # type: ignore[attr-defined]
    simulator.set_setting("provisioning_seconds", 0)
    cloud = backend.inner  # type: ignore[attr-defined]
    network = cloud.create_network(project_id, "net")
    subnet = cloud.create_subnet(project_id, network.id, "subnet")
    cluster = cloud.create_cluster(project_id, "train", subnet.id, k8s_version="1.31")
    cloud.create_node_group(cluster.id, "gpu", 3, "cpu-d3", "4vcpu-16gb")
    snapshot = simulator.cluster_snapshot(cluster.id)
    from npa_pulumi.simulator.kube.shapes import desired_nodes

    names = sorted(desired_nodes(*snapshot))
    simulator.add_maintenance(cluster.id, names[0], "HW_GPU_XID_79")
    simulator.add_maintenance(cluster.id, names[2], "HW_IB_LINK_DOWN", planned=True)
    return names, lambda: simulator.finish_maintenance(cluster.id, names[0])


@covers("list_active_maintenance")
def test_active_maintenance_events_are_listed_per_project_with_their_instances(backend: Backend) -> None:
    cloud = backend.cloud
    pid = cloud.create_project(backend.tenant_id, "mx-a", REGION).id
    other = cloud.create_project(backend.tenant_id, "mx-b", REGION).id
    assert cloud.list_active_maintenance(pid) == []
    names, finish = _seed(backend, pid)

    events = sorted(cloud.list_active_maintenance(pid), key=lambda e: e.instance_name)
    assert [(e.instance_name, e.reason, e.planned) for e in events] == [
        (names[0], "HW_GPU_XID_79", False),
        (names[2], "HW_IB_LINK_DOWN", True),
    ]
    assert all(e.project_id == pid and e.id and e.instance_id for e in events)
    assert cloud.list_active_maintenance(other) == []

    finish()
    [left] = cloud.list_active_maintenance(pid)
    assert (left.instance_name, left.reason) == (names[2], "HW_IB_LINK_DOWN")
