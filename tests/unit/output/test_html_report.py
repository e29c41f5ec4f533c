"""The fleet report page (output/html_report.py): every cluster in the grid with its lifecycle, GPUs by
model from the plan, the health gate's evidence, cost only when the status data has it, nothing secret
and nothing fetched. tests/integration/test_report_browser.py renders it in headless Chromium."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from npa_pulumi.output.html_report import Lifecycle, lifecycle_of, render_report
from npa_pulumi.plan import plan_document, resolve_targets
from npa_pulumi.spec import load_spec

REPO = Path(__file__).resolve().parents[3]
SECRETS = (
    "AKIAABCDEFGHIJKLMNOP",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl",
    "capacityblockgroup-e00secretblock",
    "s3cr3t-passphrase-value",
)


def _plan() -> dict[str, Any]:
    spec = load_spec(REPO / "examples" / "fleet1-test.yaml")
    return plan_document(spec, resolve_targets(spec, [], [], None), None)


def _status() -> dict[str, Any]:
    return {
        "command": "status",
        "fleet": "fleet1-test",
        "cloud": "local",
        "backend": "s3://state?endpoint=http://127.0.0.1:9000&region=x",
        "clusters": [
            {
                "project_key": "a",
                "cluster_name": "cluster",
                "stack": "fleet1-test.a.cluster",
                "status": "deployed",
                "cluster_id": "mk8scluster-a",
                "kube_context": "fleet-fleet1-test-a-cluster",
                "validation": "gpu-health",
                "health": {
                    "passed": True,
                    "phase": "done",
                    "stable_after_s": 2.0,
                    "nodes": {"n1": {"gpu": True, "smoke": {"passed": True}}, "n0": {}},
                },
                "node_groups": [{"name": "gpu", "state": "RUNNING", "ready": 1, "target": 1}],
                "cost": {"hourly": 4.25, "currency": "USD"},
                "drift": [],
            },
            {
                "project_key": "b",
                "cluster_name": "cluster",
                "stack": "fleet1-test.b.cluster",
                "status": "deployed-validation-failed",
                "health": {"passed": False, "phase": "smoke", "reason": "smoke failed on n7"},
                "error": f"token={SECRETS[3]} {SECRETS[0]} {SECRETS[1]} {SECRETS[2]}",
                "retry_command": "npa-pulumi up --spec f.yaml --only-projects b",
                "drift": [{"kind": "node_group", "id": "ng-1", "reason": "resized"}],
            },
        ],
    }


class _Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[str, str] = {}
        self.details: dict[str, str] = {}
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        found = dict(attrs)
        if tag == "td" and found.get("data-stack"):
            self.cells[str(found["data-stack"])] = str(found.get("data-lifecycle"))
        if tag == "section" and found.get("data-stack"):
            self.details[str(found["data-stack"])] = str(found.get("data-lifecycle"))


def test_every_cluster_is_in_the_grid_with_its_lifecycle() -> None:
    page = render_report(_status(), _plan())
    parsed = _Cells()
    parsed.feed(page)
    expected = {"fleet1-test.a.cluster": "deployed", "fleet1-test.b.cluster": "failed"}
    assert parsed.cells == expected
    assert parsed.details == expected
    assert "deployed-validation-failed" in page
    assert "1× gpu-rtx6000" in page  # GPUs by model, from the plan
    assert "CUDA smoke 1/1 passed" in page and "smoke failed on n7" in page
    assert "fleet-fleet1-test-a-cluster" in page and "node_group ng-1: resized" in page
    assert 'id="gpu-chart"' in page and "<svg" in page


def test_the_page_is_self_contained() -> None:
    page = render_report(_status(), _plan())
    parsed = _Cells()
    parsed.feed(page)
    assert not parsed.tags & {"script", "img", "iframe", "object", "embed"}  # the icon is a data: URL
    assert not re.search(r"(?i)(src|href)\s*=\s*[\"']?(https?:)?//", page)
    assert "default-src 'none'" in page
    assert "127.0.0.1:9000" not in page  # the backend's endpoint query is left out


def test_nothing_secret_reaches_the_page() -> None:
    page = render_report(_status(), _plan())
    for secret in SECRETS:
        assert secret not in page, secret
    assert "[secret]" in page


def test_cost_is_shown_only_when_the_status_data_has_it() -> None:
    page = render_report(_status(), _plan())
    assert "hourly: 4.25" in page and "cost 4.25" in page
    without = _status()
    for cluster in without["clusters"]:
        cluster.pop("cost", None)
    page = render_report(without, _plan())
    assert "cost" not in page.lower().replace("cost unknown", "")


def test_names_are_escaped() -> None:
    document = _status()
    document["clusters"][0]["cluster_name"] = "<img src=x onerror=alert(1)>"
    page = render_report(document, None)
    assert "<img" not in page and "&lt;img" in page


def test_lifecycles() -> None:
    assert lifecycle_of("validating-mig") is Lifecycle.VALIDATING
    assert lifecycle_of("destroy-incomplete") is Lifecycle.DESTROY_INCOMPLETE
    assert lifecycle_of("drifted") is Lifecycle.DRIFTED
    assert lifecycle_of("deployed-mig-not-ready") is Lifecycle.FAILED
    assert lifecycle_of("changes") is Lifecycle.PENDING
    assert lifecycle_of("something-new") is Lifecycle.ABSENT


def test_preview_renders_the_pending_change(tmp_path: Path) -> None:
    from npa_pulumi.output.documents import write_preview
    from npa_pulumi.output.results import FleetResult, StackResult

    result = FleetResult(
        command="preview",
        fleet="fleet1-test",
        cloud="local",
        backend="file:///state",
        stacks=[
            StackResult(
                stack="fleet1-test.a.cluster",
                kind="cluster",
                project_key="a",
                cluster_name="cluster",
                status="changes",
                changes={"create": 3},
            ),
            StackResult(
                stack="fleet1-test.b.cluster",
                kind="cluster",
                project_key="b",
                cluster_name="cluster",
                status="no-changes",
            ),
        ],
    )
    out = tmp_path / "preview.html"
    assert write_preview(result, "html", str(out), None, _plan()) == 0
    parsed = _Cells()
    parsed.feed(out.read_text())
    assert parsed.cells == {"fleet1-test.a.cluster": "pending", "fleet1-test.b.cluster": "unchanged"}
    assert "pending change" in out.read_text() and "create 3" in out.read_text()


def _audit_record(command: str, started: str, **extra: Any) -> dict[str, Any]:
    return {
        "command": command,
        "started_at": started,
        "outcome": "ok",
        "who": {
            "principal": "serviceaccount-ci",
            "os_user": "ci",
            "host": "runner",
            "ci_run_url": "https://ci/1",
        },
        "stacks": [{"stack": "fleet1-test.a.cluster", "status": "deployed", "lifecycle": "deployed"}],
        **extra,
    }


def test_the_last_audit_records_newest_first() -> None:
    records = [_audit_record("up", f"2026-01-{day:02d}T00:00:00+00:00") for day in range(1, 13)]
    records.append(
        _audit_record(
            "verify-mig",
            "2026-01-13T00:00:00+00:00",
            repair="reconcile",
            stacks=[{"stack": "fleet1-test.a.cluster", "status": "ready", "detail": f"token={SECRETS[3]}"}],
        )
    )
    page = render_report(_status(), _plan(), audit=records)
    shown = re.findall(r'<tr data-command="([^"]+)"', page)
    assert shown[0] == "verify-mig --reconcile" and len(shown) == 10  # the last ten, newest first
    assert "2026-01-13" in page and "2026-01-04T" in page and "2026-01-03T" not in page
    assert "3 older record(s)" in page and "serviceaccount-ci" in page and "ci@runner" in page
    assert SECRETS[3] not in page
    assert not re.search(r"(?i)(src|href)\s*=\s*[\"']?(https?:)?//", page)  # the CI URL is text, no link


def test_a_backend_without_a_trail_says_so_on_the_page() -> None:
    page = render_report(_status(), _plan(), audit=[{"unavailable": "this backend keeps no trail"}])
    assert "No audit trail readable here: this backend keeps no trail" in page
    assert "No audit records" in render_report(_status(), _plan(), audit=[])
    assert 'id="audit"' not in render_report(_status(), _plan())  # --from-json: not read


def _health() -> dict[str, Any]:
    from npa_pulumi.output.health import (
        ClusterHealth,
        FleetHealth,
        GpuTotals,
        Maintenance,
        NodeCondition,
        NodeHealth,
        ProjectHealth,
    )

    event = Maintenance(
        id="ev-1",
        reason="HW_GPU_XID_79",
        node="n2",
        cluster="fleet1-test.a.cluster",
        sla_deadline="2026-12-10T00:00:00Z",
        next_window="2026-12-12T01:00:00+00:00",
        before_window=True,
    )
    broken = NodeHealth(
        name="n1",
        gpu=True,
        state="degraded",
        ready=True,
        conditions=[NodeCondition(type="NebiusGPUError", status="True", message="Xid 79")],
        problems=[f"NebiusGPUError: Xid 79 token={SECRETS[3]}"],
    )
    serviced = NodeHealth(name="n2", gpu=True, state="maintenance", ready=True, maintenance=[event])
    serviced.problems = ["maintenance HW_GPU_XID_79 (ev-1)"]
    fine = NodeHealth(name="n3", gpu=True, state="usable", ready=True)
    a = ClusterHealth(
        stack="fleet1-test.a.cluster",
        project_key="a",
        cluster_name="cluster",
        kube_context="ctx-a",
        status="below-min-usable",
        error="1 of 3 GPUs usable, fewer than --min-usable 1",
        totals=GpuTotals(requested=3, usable=1, degraded=1, maintenance=1),
        last_gate_passed_at="2026-12-01T10:00:00+00:00",
        nodes=[broken, serviced, fine],
    )
    b = ClusterHealth(
        stack="fleet1-test.b.cluster",
        project_key="b",
        cluster_name="cluster",
        kube_context="ctx-b",
        status="failed",
        error="no registered kubeconfig for ctx-b on this machine",
    )
    projects = [ProjectHealth(project_key="a", maintenance=[event]), ProjectHealth(project_key="b")]
    report = FleetHealth(
        fleet="fleet1-test", cloud="local", min_usable=1.0, clusters=[a, b], projects=projects
    )
    report.totals = GpuTotals(requested=3, usable=1, degraded=1, maintenance=1)
    return report.to_json()


def test_the_health_section_shows_each_cluster_the_nodes_not_usable_and_maintenance() -> None:
    page = render_report(_status(), _plan(), health=_health())
    assert "<h2>GPU health now</h2>" in page
    assert "fleet: 1/3 GPUs usable, 1 degraded, 1 maintenance" in page
    row = re.search(
        r'<tr class="h-below-min-usable" data-stack="fleet1-test.a.cluster"[^>]*>(.*?)</tr>', page
    )
    assert row is not None and "2026-12-01T10:00:00+00:00" in row.group(1)
    assert 'href="#cluster-fleet1-test.a.cluster"' in row.group(1)
    assert 'data-health="failed"' in page and "no registered kubeconfig for ctx-b" in page
    assert '<li data-node="n1"><code>n1</code> [degraded] a / cluster: NebiusGPUError: Xid 79' in page
    assert 'data-node="n3"' not in page  # a usable node is not listed
    assert '<li data-reason="HW_GPU_XID_79"><b>HW_GPU_XID_79</b> on n2' in page
    assert (
        "ev-1), deadline 2026-12-10T00:00:00Z, <b>before</b> the cluster's next maintenance window "
        "(2026-12-12T01:00:00+00:00)</li>"
    ) in page
    assert 'GPU health now</dt><dd><a href="#health">below-min-usable</a>: 1/3 GPUs usable' in page
    assert SECRETS[3] not in page  # scrubbed like every other text of the page
    assert "GPU health now" not in render_report(_status(), _plan())  # no document, no section


def test_the_health_section_shows_open_breakers_repeat_offenders_and_the_incident_numbers() -> None:
    from npa_pulumi.output.health import RemediationView

    document = _health()
    document["remediation"] = RemediationView(
        breakers=[
            {
                "scope": "cluster:a/cluster",
                "open": True,
                "impaired": 2,
                "total": 4,
                "threshold_percent": 20,
                "opened_at": "2026-12-01T12:00:00+00:00",
                "opened_by": "sa",
                "percent": 50.0,
            },
            {
                "scope": "fleet",
                "open": False,
                "impaired": 2,
                "total": 40,
                "threshold_percent": 20,
                "opened_at": None,
                "opened_by": "",
                "percent": 5.0,
            },
        ],
        numbers={
            "fleet": {"incidents": 4, "open": 1, "mtbi_s": 3600.0, "mttr_s": 600.0},
            "reasons": [
                {"reason": "gpu-error", "incidents": 4, "open": 1, "mtbi_s": 5400.0, "mttr_s": 600.0}
            ],
            "nodes": [
                {
                    "cluster": "a/cluster",
                    "node": "n1",
                    "incidents": 3,
                    "open": 1,
                    "mtbi_s": None,
                    "mttr_s": 90.0,
                }
            ],
            "repeat_offenders": [{"cluster": "a/cluster", "node": "n1"}],
        },
    ).model_dump(mode="json")
    page = render_report(_status(), _plan(), health=document)
    assert '<li class="breaker" data-scope="cluster:a/cluster"><b>open</b> cluster:a/cluster: 2/4' in page
    assert 'data-scope="fleet"' not in page  # a closed breaker is not listed
    assert '<li class="offender" data-node="n1">a/cluster <code>n1</code></li>' in page
    assert (
        '<tr data-reason="gpu-error"><td>gpu-error</td><td class="num">4</td><td class="num">1h30m</td>'
        in page
    )
    assert '<tr data-node="n1"><td>a/cluster n1</td><td class="num">3</td><td class="num">-</td>' in page
    assert "Repair ladder" not in render_report(_status(), _plan(), health=_health())


def test_the_versions_and_what_waits_for_a_window() -> None:
    status = _status()
    status["clusters"][0]["versions"] = {"control_plane": "1.32", "node_groups": {"gpu": "1.31"}}
    status["clusters"][0]["pending"] = {
        "reason": "1 disruptive change(s) pending (outside its maintenance windows)",
        "next_window": "2026-12-12T02:00:00+00:00",
    }
    page = render_report(status, _plan())
    assert "control plane 1.32<br>gpu 1.31" in page
    assert "waiting for a window" in page and "next window 2026-12-12T02:00:00+00:00" in page
