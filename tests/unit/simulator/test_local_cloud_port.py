"""LocalCloud implements the cloud port exactly, and hands back well-formed port records."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from npa_pulumi.cloud.port import (
    AccessKeySecret,
    CapacityBlockGroup,
    CloudPort,
    NodeGroup,
    Project,
    QuotaAllowance,
)
from npa_pulumi.simulator import LocalCloud, ids

PORT_METHODS = [
    name
    for name, member in inspect.getmembers(CloudPort, predicate=inspect.isfunction)
    if not name.startswith("_")
]


@pytest.fixture
def cloud(tmp_path: Path) -> LocalCloud:
    return LocalCloud(tmp_path / "cloud")


def test_local_cloud_is_a_cloud_port(cloud: LocalCloud) -> None:
    assert isinstance(cloud, CloudPort)
    assert cloud.name == "local"


@pytest.mark.parametrize("method", PORT_METHODS)
def test_every_port_method_keeps_the_port_signature(method: str) -> None:
    """Same parameters, in the same order, with the same defaults; extras only after them, defaulted."""
    port = inspect.signature(getattr(CloudPort, method))
    local = inspect.signature(getattr(LocalCloud, method))
    port_params = list(port.parameters.values())
    local_params = list(local.parameters.values())[: len(port_params)]
    assert [p.name for p in local_params] == [p.name for p in port_params]
    assert [p.default for p in local_params] == [p.default for p in port_params]
    extras = list(local.parameters.values())[len(port_params) :]
    assert all(p.default is not inspect.Parameter.empty for p in extras)


def test_ids_are_nebius_style() -> None:
    assert re.fullmatch(r"project-e00[0-9a-z]{15}", ids.new_id(ids.PROJECT))
    assert ids.new_id(ids.PROJECT) != ids.new_id(ids.PROJECT)
    keyed = ids.keyed_id(ids.CLUSTER, "0b4c6b6e-key")
    assert re.fullmatch(r"mk8scluster-e00[0-9a-f]{15}", keyed)
    assert keyed == ids.keyed_id(ids.CLUSTER, "0b4c6b6e-key")
    assert keyed != ids.keyed_id(ids.NODE_GROUP, "0b4c6b6e-key").replace("mk8snodegroup", "mk8scluster")


def test_keyed_id_matches_the_recipes_hcl_formula() -> None:
    # "<prefix>-e00${substr(sha256("<prefix>/<key>"), 0, 15)}" for key "abc": sha256("mk8scluster/abc")
    import hashlib

    expected = "mk8scluster-e00" + hashlib.sha256(b"mk8scluster/abc").hexdigest()[:15]
    assert ids.keyed_id("mk8scluster", "abc") == expected


def test_records_are_port_models(cloud: LocalCloud) -> None:
    tenant = cloud.principal().tenant_id
    project = cloud.create_project(tenant, "team", "us-central1", labels={"team": "a"})
    assert isinstance(project, Project)
    assert project.labels == {"team": "a"} and project.state == "ACTIVE"
    quotas = cloud.list_quota_allowances(tenant)
    assert quotas and all(isinstance(q, QuotaAllowance) for q in quotas)
    blocks = cloud.list_capacity_block_groups(tenant)
    assert blocks and all(isinstance(b, CapacityBlockGroup) for b in blocks)
    network = cloud.create_network(project.id, "net")
    subnet = cloud.create_subnet(project.id, network.id, "subnet")
    cluster = cloud.create_cluster(project.id, "c", subnet.id)
    group = cloud.create_node_group(cluster.id, "g", 1, "cpu-d3", "4vcpu-16gb")
    assert isinstance(group, NodeGroup)
    assert group.reservation_ids == () and group.conditions == ()


def test_access_key_secret_is_a_secret(cloud: LocalCloud) -> None:
    tenant = cloud.principal().tenant_id
    project = cloud.create_project(tenant, "team", "us-central1")
    account = cloud.create_service_account(project.id, "sa")
    created = cloud.create_access_key(project.id, account.id)
    assert isinstance(created, AccessKeySecret)
    assert created.secret.get_secret_value() not in repr(created)
    assert created.key.service_account_id == account.id


def test_access_token_is_secret_and_names_the_tenant(cloud: LocalCloud) -> None:
    token = cloud.access_token()
    assert "tenant-local" in token.get_secret_value()
    assert "tenant-local" not in repr(token)
