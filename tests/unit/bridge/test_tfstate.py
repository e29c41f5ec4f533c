"""Node-group ids from a Terraform state: the layout of Terraform's state format version 4 (`resources[]`
with `mode`, `type`, `name`, optional `module`, and `instances[]` with `index_key` and `attributes`)."""

from __future__ import annotations

import json

from npa_pulumi.bridge import tfstate

STATE = {
    "version": 4,
    "terraform_version": "1.11.4",
    "serial": 7,
    "lineage": "8d3b0e6c-2f41-4b7e-9d0a-1c2b3d4e5f60",
    "outputs": {},
    "resources": [
        {
            "mode": "managed",
            "type": "nebius_mk8s_v1_cluster",
            "name": "k8s-cluster",
            "provider": 'provider["registry.terraform.io/nebius/nebius"]',
            "instances": [{"schema_version": 0, "attributes": {"id": "mk8scluster-e00aaa"}}],
        },
        {
            "mode": "managed",
            "type": "nebius_mk8s_v1_node_group",
            "name": "cpu-only",
            "provider": 'provider["registry.terraform.io/nebius/nebius"]',
            "instances": [{"schema_version": 0, "attributes": {"id": "mk8snodegroup-e00cpu"}}],
        },
        {
            "mode": "managed",
            "type": "nebius_mk8s_v1_node_group",
            "name": "gpu",
            "provider": 'provider["registry.terraform.io/nebius/nebius"]',
            "instances": [
                {"index_key": 0, "schema_version": 0, "attributes": {"id": "mk8snodegroup-e00gpu0"}},
                {"index_key": 1, "schema_version": 0, "attributes": {"id": "mk8snodegroup-e00gpu1"}},
            ],
        },
        {
            "mode": "data",
            "type": "nebius_mk8s_v1_node_group",
            "name": "looked_up",
            "provider": 'provider["registry.terraform.io/nebius/nebius"]',
            "instances": [{"schema_version": 0, "attributes": {"id": "mk8snodegroup-e00other"}}],
        },
        {
            "module": "module.cilium-egress-gateway[0]",
            "mode": "managed",
            "type": "nebius_mk8s_v1_node_group",
            "name": "egress-gateway",
            "provider": 'provider["registry.terraform.io/nebius/nebius"]',
            "instances": [
                {"index_key": "a", "schema_version": 0, "attributes": {"id": "mk8snodegroup-e00egw"}}
            ],
        },
    ],
}


def test_managed_node_groups_are_read_in_state_order_and_data_sources_are_not() -> None:
    assert tfstate.node_group_ids(STATE) == [
        "mk8snodegroup-e00cpu",
        "mk8snodegroup-e00gpu0",
        "mk8snodegroup-e00gpu1",
        "mk8snodegroup-e00egw",
    ]
    assert tfstate.node_group_ids(json.dumps(STATE)) == tfstate.node_group_ids(STATE)


def test_addresses_carry_module_and_index() -> None:
    addresses = [i.address for i in tfstate.instances(STATE, tfstate.NODE_GROUP_TYPE)]
    assert addresses == [
        "nebius_mk8s_v1_node_group.cpu-only",
        "nebius_mk8s_v1_node_group.gpu[0]",
        "nebius_mk8s_v1_node_group.gpu[1]",
        'module.cilium-egress-gateway[0].nebius_mk8s_v1_node_group.egress-gateway["a"]',
    ]


def test_no_state_or_a_corrupt_one_holds_no_node_groups() -> None:
    assert tfstate.node_group_ids(None) == []
    assert tfstate.node_group_ids("") == []
    assert tfstate.node_group_ids("{not json") == []
    assert tfstate.node_group_ids({"version": 4, "resources": [{"type": "nebius_mk8s_v1_node_group"}]}) == []


def test_the_live_objects_a_state_holds_are_drift_s_declaration() -> None:
    """What drift checks on upstream, which declares no `npa_live_objects` output: every cluster, node
    group, filesystem and GPU cluster of the state, with a fixed-size group's node count."""
    state = json.loads(json.dumps(STATE))
    state["resources"][1]["instances"][0]["attributes"].update({"fixed_node_count": 2, "autoscaling": None})
    gpu = state["resources"][2]["instances"]
    gpu[0]["attributes"].update({"fixed_node_count": None, "autoscaling": {"min_node_count": 1}})
    state["resources"].append(
        {
            "mode": "managed",
            "type": "nebius_compute_v1_filesystem",
            "name": "shared-filesystem",
            "instances": [{"index_key": 0, "attributes": {"id": "computefilesystem-e00fs"}}],
        }
    )
    found = tfstate.live_objects(json.dumps(state))
    assert found == {
        "nebius_mk8s_v1_cluster.k8s-cluster": {"kind": "cluster", "id": "mk8scluster-e00aaa"},
        "nebius_mk8s_v1_node_group.cpu-only": {
            "kind": "node_group",
            "id": "mk8snodegroup-e00cpu",
            "node_count": 2,
        },
        "nebius_mk8s_v1_node_group.gpu[0]": {"kind": "node_group", "id": "mk8snodegroup-e00gpu0"},
        "nebius_mk8s_v1_node_group.gpu[1]": {"kind": "node_group", "id": "mk8snodegroup-e00gpu1"},
        'module.cilium-egress-gateway[0].nebius_mk8s_v1_node_group.egress-gateway["a"]': {
            "kind": "node_group",
            "id": "mk8snodegroup-e00egw",
        },
        "nebius_compute_v1_filesystem.shared-filesystem[0]": {
            "kind": "filesystem",
            "id": "computefilesystem-e00fs",
        },
    }
    assert tfstate.live_objects(None) == {} and tfstate.live_objects("{not json") == {}
