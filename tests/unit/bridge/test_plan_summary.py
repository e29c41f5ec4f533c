"""Terraform's plan JSON summarized for previews (npa_pulumi/bridge/plan_summary.py)."""

from __future__ import annotations

from npa_pulumi.bridge.plan_summary import UNKNOWN, replaced_node_groups, summarize
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
