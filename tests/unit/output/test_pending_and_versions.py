"""Issue 58's additions to what people read: a cluster `up` leaves pending for a maintenance window (text,
JSON, the pull-request comment) and the versions `status` reads from the cloud."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from npa_pulumi.output.markdown import code, render_preview_markdown
from npa_pulumi.output.results import FleetResult, StackResult
from npa_pulumi.output.text import print_fleet_result

PENDING = {
    "reason": "1 disruptive change(s) pending (outside its maintenance windows); next window "
    "2026-12-12T02:00:00+00:00: the cluster's stack is not updated; its in-place changes wait with them",
    "inside_window": False,
    "next_window": "2026-12-12T02:00:00+00:00",
    "exclusions": [],
    "changes": [
        {
            "resource": "terraform_data.gpu_node_group[0]",
            "reason": "node group replaced",
            "held_by": "outside-window",
        }
    ],
}


def _result(command: str, status: str = "pending", **fields: object) -> FleetResult:
    stack = StackResult(
        stack="f.p.c", kind="cluster", project_key="p", cluster_name="c", status=status, **fields
    )
    return FleetResult(command=command, fleet="f", cloud="local", backend="file://x", stacks=[stack])


def _text(result: FleetResult) -> str:
    out = StringIO()
    print_fleet_result(result, Console(file=out, width=300, color_system=None))
    return out.getvalue()


def test_a_pending_cluster_in_text_and_json() -> None:
    result = _result("up", pending=PENDING)
    text = _text(result)
    assert "f.p.c: 1 disruptive change(s) pending" in text
    assert "pending terraform_data.gpu_node_group[0] [outside-window]: node group replaced" in text
    (cluster,) = result.to_json()["clusters"]
    assert cluster["status"] == "pending" and cluster["pending"] == PENDING


def test_the_pr_comment_says_which_clusters_would_wait_and_until_when() -> None:
    document = render_preview_markdown(_result("preview", "changes", pending=PENDING))
    assert (
        "⏸️ **1 cluster would wait for a maintenance window**: `up` now leaves their disruptive changes "
        "pending (the first window opens 2026-12-12T02:00:00+00:00)" in document
    )
    assert "**Pending a maintenance window**:" in document
    address = code("terraform_data.gpu_node_group[0]")
    assert f"- {address} (outside-window): node group replaced" in document


def test_status_shows_the_versions_the_cloud_reports() -> None:
    versions = {"control_plane": "1.32", "node_groups": {"c-ng-cpu": "1.32", "c-ng-gpu-0": "1.31"}}
    result = _result("status", "deployed", versions=versions)
    assert "f.p.c: Kubernetes 1.32; node groups c-ng-cpu 1.32, c-ng-gpu-0 1.31" in _text(result)
    assert result.to_json()["clusters"][0]["versions"] == versions
