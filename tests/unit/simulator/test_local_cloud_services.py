"""The simulator as services over one store: the façade names every operation once, each resolves to the
service that answers it (with that service's signature, which the machine-facing API checks arguments
against), every service shares the façade's one store, and the kinds a project can hold are rows of one
table whose operations behave like any other."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from npa_pulumi.cloud.errors import InvalidArgument, NotFound
from npa_pulumi.simulator import LocalSimulator
from npa_pulumi.simulator.api import UsageError, call
from npa_pulumi.simulator.faults import OPERATIONS
from npa_pulumi.simulator.holdings import HELD_KINDS
from npa_pulumi.simulator.services import HeldOperation, Served
from npa_pulumi.simulator.store import Store

TIGHT = Path(__file__).resolve().parents[2] / "fixtures" / "local_cloud" / "tight-tenant.yaml"


@pytest.fixture
def sim(tmp_path: Path) -> LocalSimulator:
    simulator = LocalSimulator(tmp_path / "cloud")
    simulator.initialise(TIGHT)
    return simulator


def test_every_fault_injectable_operation_is_answered_by_a_service(sim: LocalSimulator) -> None:
    for name in OPERATIONS:
        operation = getattr(sim, name)
        kinds = {p.kind for p in inspect.signature(operation).parameters.values()}
        # its own named parameters, never a bare (*args, **kwargs) that would take any argument
        assert inspect.Parameter.VAR_POSITIONAL not in kinds, name
        assert "self" not in inspect.signature(operation).parameters, name


def test_every_served_operation_names_a_service_over_the_one_store(sim: LocalSimulator) -> None:
    served = {name: attr for name, attr in vars(LocalSimulator).items() if isinstance(attr, Served)}
    assert {"create_project", "provision", "set_node_fault", "inventory"} <= set(served)
    for name, attr in served.items():
        service = getattr(sim, attr.service)
        assert getattr(sim, name).__self__ is service, name
        assert service is sim.store or service.store is sim.store, name
    assert isinstance(sim.store, Store)


def test_the_held_kinds_are_one_table(sim: LocalSimulator) -> None:
    held = {name for name, attr in vars(LocalSimulator).items() if isinstance(attr, HeldOperation)}
    expected = {f"{verb}_{k.noun}" for k in HELD_KINDS for verb in ("create", "delete")}
    assert held == expected | {f"list_{k.plural}" for k in HELD_KINDS}
    assert held <= set(OPERATIONS)


def test_a_held_kind_is_created_listed_and_deleted_through_its_table_row(sim: LocalSimulator) -> None:
    project = "project-existing1"
    vm = sim.create_instance(project, "vm", "cpu-e2", labels={"team": "a"})
    assert (vm["platform"], vm["preset"], vm["labels"]) == ("cpu-e2", "4vcpu-16gb", {"team": "a"})
    again = sim.create_instance(project, "vm2", idempotency_key="k")
    assert sim.create_instance(project, "vm2", idempotency_key="k")["id"] == again["id"]  # a replay
    assert [i["name"] for i in sim.list_instances(project)] == ["vm", "vm2"]
    disk = call(sim, "create_disk", {"project_id": project, "name": "d", "size_bytes": 1024})
    assert disk["size_bytes"] == 1024
    with pytest.raises(InvalidArgument, match="a disk needs a positive integer size_bytes"):
        sim.create_disk(project, "d0", size_bytes=0)
    with pytest.raises(UsageError, match="unexpected keyword argument 'platform'"):
        call(sim, "create_disk", {"project_id": project, "name": "d2", "platform": "cpu-e2"})
    sim.delete_disk(disk_id=disk["id"])
    assert sim.list_disks(project) == []
    with pytest.raises(NotFound) as err:
        sim.delete_group("group-none")
    assert err.value.request is not None and err.value.request.params == {"iam_group_id": "group-none"}
