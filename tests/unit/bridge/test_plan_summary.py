"""Terraform's plan JSON summarized for previews (npa_pulumi/bridge/plan_summary.py)."""

from __future__ import annotations

from npa_pulumi.bridge.plan_summary import (
    UNKNOWN,
    replaced_node_group_addresses,
    replaced_node_groups,
    summarize,
)
from npa_pulumi.cloud.redaction import SENSITIVE
from npa_pulumi.cloud.redaction import mask_secrets as mask

PLAN = {
    "resource_changes": [
        {
            "address": "terraform_data.gpu_node_group[0]",
            "mode": "managed",
            "type": "terraform_data",
            "change": {
                "actions": ["delete", "create"],
                "before": {"id": "a", "triggers_replace": {"preset": "8gpu-128vcpu-1600gb", "node_count": 1}},
                "after": {"triggers_replace": {"preset": "1gpu-16vcpu-200gb", "node_count": 1}},
                "after_unknown": {"id": True},
                "before_sensitive": {},
                "after_sensitive": {},
            },
        },
        {
            "address": "nebius_mk8s_v1_cluster.k8s",
            "mode": "managed",
            "type": "nebius_mk8s_v1_cluster",
            "change": {
                "actions": ["update"],
                "before": {"labels": {"a": "1"}, "token": "s3cr3t"},
                "after": {"labels": {"a": "2"}, "token": "n3w-s3cr3t"},
                "before_sensitive": {"token": True},
                "after_sensitive": {"token": True},
            },
        },
        {"address": "terraform_data.cluster", "type": "terraform_data", "change": {"actions": ["no-op"]}},
        {"address": "data.x.y", "mode": "data", "type": "x", "change": {"actions": ["read"]}},
        {
            "address": "terraform_data.filesystem[0]",
            "type": "terraform_data",
            "change": {"actions": ["delete"]},
        },
        {
            "address": "terraform_data.extra",
            "type": "terraform_data",
            "change": {"actions": ["create"], "after": {}},
        },
    ]
}


def test_counts_actions_and_flags_destructive_replacements() -> None:
    summary = summarize(PLAN)
    assert (summary["add"], summary["change"], summary["destroy"], summary["replace"]) == (1, 1, 1, 1)
    by_address = {r["address"]: r for r in summary["resources"]}
    assert set(by_address) == {
        "terraform_data.gpu_node_group[0]",
        "nebius_mk8s_v1_cluster.k8s",
        "terraform_data.filesystem[0]",
        "terraform_data.extra",
    }
    group = by_address["terraform_data.gpu_node_group[0]"]
    assert group["action"] == "replace" and group["destructive"] and group["kind"] == "node_group"
    assert {
        "name": "triggers_replace.preset",
        "before": "8gpu-128vcpu-1600gb",
        "after": "1gpu-16vcpu-200gb",
    } in (group["attributes"])
    assert {"name": "id", "before": "a", "after": UNKNOWN} in group["attributes"]
    assert by_address["terraform_data.filesystem[0]"]["destructive"]
    assert not by_address["nebius_mk8s_v1_cluster.k8s"]["destructive"]  # an in-place update
    assert not by_address["terraform_data.extra"]["destructive"]
    assert replaced_node_groups(summary) == 1


def test_sensitive_values_are_masked() -> None:
    summary = summarize(PLAN)
    cluster = next(r for r in summary["resources"] if r["address"] == "nebius_mk8s_v1_cluster.k8s")
    assert "s3cr3t" not in str(summary)
    assert {"name": "labels.a", "before": "1", "after": "2"} in cluster["attributes"]
    assert all(a["name"] != "token" or a["after"] == SENSITIVE for a in cluster["attributes"])


def test_run_time_secrets_are_masked_even_when_the_recipe_does_not_mark_them() -> None:
    plan = {
        "resource_changes": [
            {
                "address": "terraform_data.gpu_node_group[0]",
                "type": "terraform_data",
                "change": {
                    "actions": ["update"],
                    "before": {"triggers_replace": {"reservation_ids": ["capacityblockgroup-e00secret"]}},
                    "after": {"triggers_replace": {"reservation_ids": ["capacityblockgroup-e00other"]}},
                },
            }
        ]
    }
    masked = mask(summarize(plan), ("capacityblockgroup-e00secret", "capacityblockgroup-e00other"))
    assert "capacityblockgroup" not in str(masked)
    (attribute,) = masked["resources"][0]["attributes"]
    assert attribute == {
        "name": "triggers_replace.reservation_ids",
        "before": [SENSITIVE],
        "after": [SENSITIVE],
    }


def _node_group_change(index: int, actions: list[str], before: int | None, after: int) -> dict[str, object]:
    """A `resource_changes` entry of upstream's `nebius_mk8s_v1_node_group.gpu` (Terraform's plan JSON)."""
    return {
        "address": f"nebius_mk8s_v1_node_group.gpu[{index}]",
        "mode": "managed",
        "type": "nebius_mk8s_v1_node_group",
        "index": index,
        "change": {
            "actions": actions,
            "before": None if before is None else {"id": f"ng-{index}", "fixed_node_count": before},
            "after": {"fixed_node_count": after},
            "after_unknown": {"id": True} if before is None else {},
            "before_sensitive": {},
            "after_sensitive": {},
        },
    }


def test_a_pool_reshaped_from_one_group_of_n_to_n_groups_is_a_destructive_node_group_change() -> None:
    """After `adopt` of a reserved pool the original applied as one group of 2: `gpu_node_groups` 1 -> 2,
    `gpu_nodes_fixed_count_per_group` 2 -> 1. Terraform updates gpu[0] (2 -> 1 nodes) and creates gpu[1]:
    the node it takes from gpu[0] is drained and re-provisioned in gpu[1], which the summary flags as the
    replacement it is (and the gpu-node-group-replacement policy is given)."""
    plan = {
        "resource_changes": [
            _node_group_change(0, ["update"], 2, 1),
            _node_group_change(1, ["create"], None, 1),
        ]
    }
    summary = summarize(plan)
    assert (summary["change"], summary["add"], summary["replace"]) == (1, 1, 0)  # Terraform's own actions
    shrunk, created = summary["resources"]
    assert shrunk["action"] == "update" and shrunk["destructive"] is True and shrunk["reshape"] is True
    assert {"name": "fixed_node_count", "before": 2, "after": 1} in shrunk["attributes"]
    assert created["action"] == "create" and not created["destructive"] and "reshape" not in created
    assert replaced_node_group_addresses(summary) == ["nebius_mk8s_v1_node_group.gpu[0]"]


def test_a_plain_resize_is_no_reshape() -> None:
    """The spec asking for fewer or more nodes in its groups is an ordinary update, not flagged."""
    down = summarize({"resource_changes": [_node_group_change(0, ["update"], 3, 2)]})
    up = summarize(
        {
            "resource_changes": [
                _node_group_change(0, ["update"], 1, 2),
                _node_group_change(1, ["create"], None, 2),
            ]
        }
    )
    for summary in (down, up):
        assert not any(r["destructive"] for r in summary["resources"])
        assert replaced_node_group_addresses(summary) == []
