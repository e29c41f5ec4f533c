"""The port's two repair-ladder calls on every adapter, by the node's name in its project (mk8s names a
node after its instance):

* `recover_node`: Nebius' recovery: the host under the instance marked unhealthy (NodeService.SetUnhealthy,
  with the ladder's check id), then the instance stopped and started again; a principal refused
  SetUnhealthy still gets the stop and start. The local cloud: the node keeps its name, comes back with a
  new boot id and without its host's faults, unless its host is defective (the fault follows it);
* `remove_node`: the instance deleted (mk8s has no per-node call); the local cloud's node group puts a new
  node, a new name, in its place;
* a name no instance of the project has: NotFound, nothing changed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from wire.backends import REGION, Backend, backend_kinds, open_backend
from wire.coverage import covers, declared

from npa_pulumi.cloud.errors import NotFound

pytestmark = pytest.mark.integration


@pytest.fixture(params=backend_kinds())
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    with open_backend(request.param, tmp_path, monkeypatch) as b:
        yield b
        missing = declared(request.function) - b.cloud.called
        assert not missing, f"{request.function.__name__} declares {sorted(missing)} but never calls them"


class Seeded:
    """Two nodes of a cluster in a project, the first with a GPU error; how to read a node as the cloud
    keeps it (nebius: its instance's state; local: its node object's boot id and faults)."""

    def __init__(self, backend: Backend, project_id: str) -> None:
        self.backend, self.project_id = backend, project_id
        if backend.kind == "nebius":
            fake = backend.world.fake  # type: ignore[attr-defined]
            with fake.lock:
                self.ids = [fake.add_instance(project_id, f"node-{i}", "gpu-h100-sxm") for i in range(2)]
            self.names = [fake.instances[i].metadata.name for i in self.ids]
            return
        simulator = backend.inner.simulator  # type: ignore[attr-defined]
        simulator.set_setting("provisioning_seconds", 0)
        cloud = backend.inner  # type: ignore[attr-defined]
        network = cloud.create_network(project_id, "net")
        subnet = cloud.create_subnet(project_id, network.id, "subnet")
        self.cluster = cloud.create_cluster(project_id, "train", subnet.id, k8s_version="1.31")
        cloud.create_node_group(self.cluster.id, "workers", 2, "cpu-d3", "4vcpu-16gb")
        self.names = sorted(self.nodes())
        simulator.set_node_fault(self.cluster.id, self.names[0], "gpu_error")

    def nodes(self) -> dict[str, Any]:
        from npa_pulumi.simulator.kube.shapes import GPU_ERROR_LABEL, desired_nodes

        simulator = self.backend.inner.simulator  # type: ignore[attr-defined]
        found = desired_nodes(*simulator.cluster_snapshot(self.cluster.id))
        return {
            name: (node["status"]["nodeInfo"]["bootID"], GPU_ERROR_LABEL in node["metadata"]["labels"])
            for name, node in found.items()
        }


@covers("recover_node")
def test_recovery_marks_the_host_then_stops_and_starts_the_nodes_instance(backend: Backend) -> None:
    pid = backend.cloud.create_project(backend.tenant_id, "rp-a", REGION).id
    seeded = Seeded(backend, pid)
    first = seeded.names[0]
    before = None if backend.kind == "nebius" else seeded.nodes()

    repair = backend.cloud.recover_node(pid, first)

    assert (repair.instance_name, repair.action) == (first, "RECOVERED")
    assert repair.state.startswith("RUNNING")
    if backend.kind == "nebius":
        fake = backend.world.fake  # type: ignore[attr-defined]
        assert [c.code for c in fake.calls_to("InstanceService/Stop")] == ["OK"]
        assert [c.code for c in fake.calls_to("InstanceService/Start")] == ["OK"]
        [check] = fake.unhealthy_hosts[seeded.ids[0]]
        assert check.check_id == "npa-remediation" and first in check.description
        assert fake.instances[seeded.ids[0]].status.state.name == "RUNNING"
        assert seeded.ids[1] not in fake.unhealthy_hosts
        return
    assert before is not None
    after = seeded.nodes()
    assert after[first][0] != before[first][0], "a recovered node boots again"
    assert after[first][1] is False, "its host's fault is gone"
    assert after[seeded.names[1]] == before[seeded.names[1]], "the other node is untouched"


@covers("recover_node")
def test_recovery_without_the_right_to_mark_the_host_still_stops_and_starts(backend: Backend) -> None:
    pid = backend.cloud.create_project(backend.tenant_id, "rp-b", REGION).id
    seeded = Seeded(backend, pid)
    first = seeded.names[0]
    if backend.kind == "nebius":
        backend.world.fake.set_unhealthy_denied = True  # type: ignore[attr-defined]
        repair = backend.cloud.recover_node(pid, first)
        fake = backend.world.fake  # type: ignore[attr-defined]
        assert "not marked unhealthy" in repair.state
        assert [c.code for c in fake.calls_to("NodeService/SetUnhealthy")] == ["PERMISSION_DENIED"]
        assert [c.code for c in fake.calls_to("InstanceService/Start")] == ["OK"]
        return
    # The local cloud: a defective host keeps the node's fault through a recovery.
    simulator = backend.inner.simulator  # type: ignore[attr-defined]
    simulator.set_node_fault(seeded.cluster.id, first, "defective_host")
    before = seeded.nodes()
    backend.cloud.recover_node(pid, first)
    after = seeded.nodes()
    assert after[first][0] != before[first][0] and after[first][1] is True


@covers("remove_node")
def test_removal_deletes_the_nodes_instance_and_its_group_replaces_it(backend: Backend) -> None:
    pid = backend.cloud.create_project(backend.tenant_id, "rp-c", REGION).id
    seeded = Seeded(backend, pid)
    first = seeded.names[0]

    repair = backend.cloud.remove_node(pid, first)

    assert (repair.instance_name, repair.action) == (first, "DELETED")
    if backend.kind == "nebius":
        fake = backend.world.fake  # type: ignore[attr-defined]
        assert seeded.ids[0] not in fake.instances and seeded.ids[1] in fake.instances
        return
    after = seeded.nodes()
    assert first not in after and f"{first}-r1" in after
    assert after[f"{first}-r1"][1] is False, "the new node has no fault"


@covers("recover_node", "remove_node")
def test_a_name_no_instance_has_is_not_found(backend: Backend) -> None:
    pid = backend.cloud.create_project(backend.tenant_id, "rp-d", REGION).id
    seeded = Seeded(backend, pid)
    before = None if backend.kind == "nebius" else seeded.nodes()
    with pytest.raises(NotFound):
        backend.cloud.recover_node(pid, "no-such-node")
    with pytest.raises(NotFound):
        backend.cloud.remove_node(pid, "no-such-node")
    if before is not None:
        assert seeded.nodes() == before
