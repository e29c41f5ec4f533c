"""Preview's text shows each stack's disruption class with its reasons, and each Terraform resource's."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from npa_pulumi.bridge.plan_summary import stack_disruption, summarize
from npa_pulumi.output.results import FleetResult, StackResult
from npa_pulumi.output.text import print_fleet_result


def test_classes_and_reasons_in_the_text() -> None:
    group = {"name": "c-ng-cpu", "version": "1.31", "fixed_node_count": 4, "template": {}}
    plan = summarize(
        {
            "resource_changes": [
                {
                    "address": "nebius_mk8s_v1_node_group.cpu-only",
                    "mode": "managed",
                    "type": "nebius_mk8s_v1_node_group",
                    "name": "cpu-only",
                    "change": {
                        "actions": ["update"],
                        "before": group,
                        "after": {**group, "fixed_node_count": 2},
                    },
                }
            ]
        }
    )
    diff = [
        {"urn": "urn:x::c-terraform", "type": "pulumi-python:dynamic/npa:TerraformModule", "op": "update"}
    ]
    stack = StackResult(
        stack="f.p.c",
        kind="cluster",
        project_key="p",
        cluster_name="c",
        status="changes",
        terraform=plan,
        disruption=stack_disruption(diff, plan),
    )
    result = FleetResult(command="preview", fleet="f", cloud="local", backend="file://x", stacks=[stack])
    out = StringIO()
    print_fleet_result(result, Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    assert (
        "update nebius_mk8s_v1_node_group.cpu-only [disruptive: scale down by 2: those nodes are drained]"
        in text
    )
    assert "disruptive f.p.c" in text
    assert (
        "  disruptive: nebius_mk8s_v1_node_group.cpu-only: scale down by 2: those nodes are drained" in text
    )
