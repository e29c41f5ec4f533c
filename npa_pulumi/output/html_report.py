"""The fleet report page: one self-contained HTML file (inline CSS and SVG; no script, no network) built from
the documents `status --output json` (or `preview --output json`) and `plan --output json` print.

* a grid of projects × clusters, each cell coloured by lifecycle (deployed, validating, failed, drifted,
  destroy-incomplete, ...) and linked to the cluster's detail section;
* per cluster: GPUs by model, node groups, the health gate's outcome and evidence summary, kube context,
  drift, and cost when the status document carries a `cost` field;
* an SVG bar chart of GPUs (and cost, when known) per project;
* with a `health --output json` document: the GPU health now — per cluster the GPUs usable, degraded,
  under maintenance, unqualified and missing, when its gate last passed, each node that is not usable with
  its problems, and each project's active maintenance events with their reason codes and deadlines.

Nothing secret: every text goes through the pull-request comment's scrubbing (`cloud/redaction.scrub`:
capacity block ids masked, credential-looking values blanked) before it is HTML-escaped, and the fields
that can hold state (stack outputs, Terraform state, kubeconfig contents) are never read. A
Content-Security-Policy forbids the page any request.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from npa_pulumi.cloud.redaction import scrub
from npa_pulumi.runtime.presets import gpus_per_node

MAX_TEXT = 400


class Lifecycle(StrEnum):
    DEPLOYED = "deployed"
    VALIDATING = "validating"
    FAILED = "failed"
    DRIFTED = "drifted"
    DESTROY_INCOMPLETE = "destroy-incomplete"
    PENDING = "pending"  # preview: changes to apply
    UNCHANGED = "unchanged"  # preview: nothing to do
    ABSENT = "absent"  # not deployed, destroyed, unknown


_LIFECYCLE_OF: dict[str, Lifecycle] = {
    "deployed": Lifecycle.DEPLOYED,
    "ready": Lifecycle.DEPLOYED,
    "in-sync": Lifecycle.DEPLOYED,
    "provisioning": Lifecycle.VALIDATING,
    "validating-gpu-health": Lifecycle.VALIDATING,
    "validating-mig": Lifecycle.VALIDATING,
    "validating-cluster-basics": Lifecycle.VALIDATING,
    "failed": Lifecycle.FAILED,
    "status-error": Lifecycle.FAILED,
    "deployed-validation-failed": Lifecycle.FAILED,
    "deployed-mig-not-ready": Lifecycle.FAILED,
    "deployed-credentials-failed": Lifecycle.FAILED,
    "policy-violation": Lifecycle.FAILED,
    "drifted": Lifecycle.DRIFTED,
    "destroyed": Lifecycle.DRIFTED,  # deleted outside the fleet
    "destroy-incomplete": Lifecycle.DESTROY_INCOMPLETE,
    "changes": Lifecycle.PENDING,
    "no-changes": Lifecycle.UNCHANGED,
    "unchanged": Lifecycle.UNCHANGED,
}

_COLOURS: dict[Lifecycle, tuple[str, str]] = {  # background, text
    Lifecycle.DEPLOYED: ("#d7f5dd", "#0b5d1e"),
    Lifecycle.VALIDATING: ("#fff3c4", "#7a5a00"),
    Lifecycle.FAILED: ("#ffd6d6", "#8a0c0c"),
    Lifecycle.DRIFTED: ("#ffe3c2", "#8a4500"),
    Lifecycle.DESTROY_INCOMPLETE: ("#ead9ff", "#4b1d8a"),
    Lifecycle.PENDING: ("#d9ecff", "#0b3d7a"),
    Lifecycle.UNCHANGED: ("#eeeeee", "#555555"),
    Lifecycle.ABSENT: ("#f4f4f4", "#777777"),
}


def lifecycle_of(status: str) -> Lifecycle:
    return _LIFECYCLE_OF.get(status, Lifecycle.ABSENT)


def text(value: object, limit: int = MAX_TEXT) -> str:
    """Scrubbed (as in the PR comment), bounded and HTML-escaped: the only way a value reaches the page."""
    raw = scrub(str(value)).strip()
    if len(raw) > limit:
        raw = raw[: limit - 1].rstrip() + "…"
    return html.escape(raw, quote=True)


def anchor(stack: str) -> str:
    return "cluster-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in stack)


@dataclass(frozen=True)
class GpuModel:
    platform: str
    preset: str
    nodes: int
    gpus: int


@dataclass
class ClusterView:
    project: str
    name: str
    stack: str
    status: str
    lifecycle: Lifecycle
    cluster_id: str | None = None
    kube_context: str | None = None
    gpus: list[GpuModel] = field(default_factory=list)
    node_groups: list[dict[str, Any]] = field(default_factory=list)
    health: dict[str, Any] | None = None
    validation: str | None = None
    drift: list[dict[str, Any]] = field(default_factory=list)
    cost: Any = None
    changes: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    retry_command: str | None = None
    versions: dict[str, Any] | None = None  # status: {control_plane, node_groups: {name: version}}
    waiting: dict[str, Any] | None = None  # changes an `up` left pending for a window: {reason, next_window}

    @property
    def gpu_count(self) -> int:
        return sum(g.gpus for g in self.gpus)


def _plan_clusters(plan: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for project in (plan or {}).get("projects") or []:
        for cluster in project.get("clusters") or []:
            if isinstance(cluster, dict) and cluster.get("stack"):
                found[str(cluster["stack"])] = cluster
    return found


def _gpus(planned: Mapping[str, Any] | None) -> list[GpuModel]:
    if not planned:
        return []
    models = []
    pool = planned.get("gpu_nodes") or {}
    count = int(pool.get("count") or 0)
    per_node = int(pool.get("gpus_per_node") or 0)
    if count and per_node:
        models.append(
            GpuModel(str(pool.get("platform") or "?"), str(pool.get("preset") or ""), count, count * per_node)
        )
    for worker in (planned.get("soperator") or {}).get("workers") or []:
        gpus = gpus_per_node(str(worker.get("preset") or ""))
        size = int(worker.get("size") or 0)
        if gpus and size:
            models.append(GpuModel(str(worker.get("platform")), str(worker.get("preset")), size, size * gpus))
    return models


def cluster_views(document: Mapping[str, Any], plan: Mapping[str, Any] | None = None) -> list[ClusterView]:
    planned = _plan_clusters(plan)
    views = []
    for cluster in document.get("clusters") or []:
        stack = str(cluster.get("stack") or "")
        status = str(cluster.get("status") or "unknown")
        views.append(
            ClusterView(
                project=str(cluster.get("project_key") or "?"),
                name=str(cluster.get("cluster_name") or stack),
                stack=stack,
                status=status,
                lifecycle=lifecycle_of(status),
                cluster_id=cluster.get("cluster_id"),
                kube_context=cluster.get("kube_context"),
                gpus=_gpus(planned.get(stack)),
                node_groups=[g for g in cluster.get("node_groups") or [] if isinstance(g, dict)],
                health=cluster.get("health") if isinstance(cluster.get("health"), dict) else None,
                validation=cluster.get("validation"),
                drift=[d for d in cluster.get("drift") or [] if isinstance(d, dict)],
                cost=cluster.get("cost"),
                changes={k: int(v) for k, v in (cluster.get("changes") or {}).items() if isinstance(v, int)},
                error=cluster.get("error"),
                retry_command=cluster.get("retry_command"),
                versions=cluster.get("versions") if isinstance(cluster.get("versions"), dict) else None,
                waiting=cluster.get("pending") if isinstance(cluster.get("pending"), dict) else None,
            )
        )
    return views


# ------------------------------------------------------------------------------------------ rendering

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d1d1f}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}h3{font-size:15px;margin:0 0 6px}
.meta{color:#555;margin-bottom:16px}.meta code{background:#f3f3f3;padding:1px 4px;border-radius:3px}
table{border-collapse:collapse}th,td{border:1px solid #ddd;padding:6px 8px;text-align:left;vertical-align:top}
th{background:#fafafa}.grid td.cell a{color:inherit;text-decoration:none;display:block}
.grid td.empty{background:#fbfbfb}.state{font-weight:600}.small{font-size:12px;color:inherit;opacity:.85}
.legend span{display:inline-block;margin:0 8px 4px 0;padding:2px 8px;border-radius:10px;font-size:12px}
.detail{border:1px solid #ddd;border-left-width:6px;border-radius:4px;padding:10px 14px;margin:12px 0}
.detail dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0}
.detail dt{color:#555}.detail dd{margin:0}
pre{white-space:pre-wrap;background:#f6f6f6;padding:6px;margin:4px 0}
.totals span{margin-right:14px}
.timeline-legend span{margin-right:14px;white-space:nowrap}.timeline-chart{overflow-x:auto}
.longest-path code{background:#fff0e6}.audit td,.timeline-table td{font-size:13px}
.health td.num{text-align:right}.health tr.h-failed td,.health tr.h-below-min-usable td{background:#fff1f1}
"""
MAX_HEALTH_ITEMS = 200  # nodes and maintenance events listed; the rest are counted


def _style(lifecycle: Lifecycle) -> str:
    background, colour = _COLOURS[lifecycle]
    return f"background:{background};color:{colour}"


def _legend(lifecycles: Iterable[Lifecycle]) -> str:
    present = set(lifecycles)
    chips = [
        f'<span class="lc-{lc.value}" style="{_style(lc)}">{lc.value}</span>'
        for lc in Lifecycle
        if lc in present
    ]
    return f'<p class="legend">{"".join(chips)}</p>'


def _gpu_summary(view: ClusterView) -> str:
    if not view.gpus:
        return "no GPUs"
    return ", ".join(f"{g.gpus}× {text(g.platform)}" for g in view.gpus)


def _grid(views: list[ClusterView]) -> str:
    projects = list(dict.fromkeys(v.project for v in views))
    names = list(dict.fromkeys(v.name for v in views))
    by_cell = {(v.project, v.name): v for v in views}
    head = "".join(f"<th>{text(n)}</th>" for n in names)
    rows = []
    for project in projects:
        cells = []
        for name in names:
            view = by_cell.get((project, name))
            if view is None:
                cells.append('<td class="empty"></td>')
                continue
            cells.append(
                f'<td class="cell lc-{view.lifecycle.value}" style="{_style(view.lifecycle)}" '
                f'data-stack="{text(view.stack)}" data-status="{text(view.status)}" '
                f'data-lifecycle="{view.lifecycle.value}"><a href="#{anchor(view.stack)}">'
                f'<span class="state">{text(view.status)}</span><br>'
                f'<span class="small">{_gpu_summary(view)}</span></a></td>'
            )
        rows.append(f"<tr><th>{text(project)}</th>{''.join(cells)}</tr>")
    return (
        f'<table class="grid" id="grid"><thead><tr><th>project \\ cluster</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _cost_value(cost: Any) -> float | None:
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        return float(cost)
    if isinstance(cost, Mapping):
        for key in ("hourly", "per_hour", "hourly_usd", "usd_per_hour", "monthly", "total", "amount"):
            value = cost.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
    return None


def _cost_text(cost: Any) -> str:
    if isinstance(cost, Mapping):
        return ", ".join(f"{text(k)}: {text(v)}" for k, v in cost.items() if not isinstance(v, (dict, list)))
    return text(cost)


def _chart(views: list[ClusterView]) -> str:
    """GPUs (and cost, when every cluster of a project has one) per project, as horizontal bars."""
    projects = list(dict.fromkeys(v.project for v in views))
    gpus = {p: sum(v.gpu_count for v in views if v.project == p) for p in projects}
    costs: dict[str, float] = {}
    for project in projects:
        values = [_cost_value(v.cost) for v in views if v.project == project and v.cost is not None]
        if values and all(value is not None for value in values):
            costs[project] = sum(value for value in values if value is not None)
    bar_h, gap, label_w, bar_w = 18, 8, 160, 360
    top = max(gpus.values(), default=0) or 1
    top_cost = max(costs.values(), default=0.0) or 1.0
    rows_per = 2 if costs else 1
    height = len(projects) * (bar_h * rows_per + gap) + gap
    parts = [
        f'<svg id="gpu-chart" width="{label_w + bar_w + 90}" '
        f'height="{height}" role="img" aria-label="GPUs per project">'
    ]
    y = gap
    for project in projects:
        width = round(bar_w * gpus[project] / top)
        parts.append(
            f'<text x="0" y="{y + 13}" font-size="12">{text(project, 24)}</text>'
            f'<rect x="{label_w}" y="{y}" width="{max(width, 1)}" height="{bar_h}" fill="#4a7bd0">'
            f"<title>{text(project)}: {gpus[project]} GPUs</title></rect>"
            f'<text x="{label_w + max(width, 1) + 6}" y="{y + 13}" font-size="12">{gpus[project]} GPUs</text>'
        )
        y += bar_h
        if costs:
            value = costs.get(project)
            width = round(bar_w * (value or 0) / top_cost)
            label = f"cost {value:g}" if value is not None else "cost unknown"
            parts.append(
                f'<rect x="{label_w}" y="{y}" width="{max(width, 1)}" height="{bar_h - 4}" fill="#d08a4a"/>'
                f'<text x="{label_w + max(width, 1) + 6}" y="{y + 11}" font-size="11">{label}</text>'
            )
            y += bar_h
        y += gap
    parts.append("</svg>")
    return "".join(parts)


def _health_summary(view: ClusterView) -> str:
    health = view.health
    if not health:
        return text(view.validation or "no gate recorded")
    passed = health.get("passed")
    outcome = "passed" if passed else ("failed" if passed is False else "not finished")
    raw_nodes = health.get("nodes")
    nodes: dict[str, Any] = raw_nodes if isinstance(raw_nodes, dict) else {}
    gpu_nodes = [n for n in nodes.values() if isinstance(n, dict) and n.get("gpu")]
    smokes = [n.get("smoke") for n in gpu_nodes if isinstance(n.get("smoke"), dict)]
    smoke_ok = sum(1 for s in smokes if s and s.get("passed"))
    bits = [f"{outcome} ({text(view.validation or 'gpu-health')}, phase {text(health.get('phase', '?'))})"]
    bits.append(f"{len(nodes)} node(s) checked, {len(gpu_nodes)} with GPUs")
    if smokes:
        bits.append(f"CUDA smoke {smoke_ok}/{len(smokes)} passed")
    if health.get("stable_after_s") is not None:
        bits.append(f"stable after {text(health['stable_after_s'])} s")
    if health.get("reason"):
        bits.append(f"reason: {text(health['reason'])}")
    return "; ".join(bits)


_BUCKETS = ("usable", "degraded", "maintenance", "unqualified", "missing")


def _health_totals(totals: Mapping[str, Any]) -> str:
    parts = [f"{text(totals.get('usable', 0))}/{text(totals.get('requested', 0))} GPUs usable"]
    parts += [f"{text(totals[b])} {b}" for b in _BUCKETS[1:] if totals.get(b)]
    return ", ".join(parts)


def _clusters_of(health: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for c in health.get("clusters") or [] if isinstance(c, Mapping)]


def _health_row(cluster: Mapping[str, Any]) -> str:
    totals = cluster.get("totals") or {}
    stack = str(cluster.get("stack") or "")
    status = str(cluster.get("status") or "?")
    cells = "".join(f'<td class="num">{text(totals.get(b, 0))}</td>' for b in _BUCKETS)
    gate = cluster.get("last_gate_passed_at") or cluster.get("last_gate") or "—"
    error = f'<br><span class="small">{text(cluster["error"])}</span>' if cluster.get("error") else ""
    return (
        f'<tr class="h-{text(status)}" data-stack="{text(stack)}" data-health="{text(status)}">'
        f'<td><a href="#{anchor(stack)}">{text(cluster.get("project_key", "?"))} / '
        f"{text(cluster.get('cluster_name', stack))}</a></td><td>{text(status)}{error}</td>"
        f'<td class="num">{text(totals.get("requested", 0))}</td>{cells}<td>{text(gate)}</td></tr>'
    )


def _bounded_items(items: list[str]) -> str:
    shown = "".join(items[:MAX_HEALTH_ITEMS])
    more = f"<li>… and {len(items) - MAX_HEALTH_ITEMS} more</li>" if len(items) > MAX_HEALTH_ITEMS else ""
    return f"<ul>{shown}{more}</ul>"


def _node_item(cluster: Mapping[str, Any], node: Mapping[str, Any]) -> str:
    where = f"{text(cluster.get('project_key', '?'))} / {text(cluster.get('cluster_name', '?'))}"
    problems = "; ".join(str(p) for p in node.get("problems") or []) or str(node.get("state", ""))
    return (
        f'<li data-node="{text(node.get("name", ""))}"><code>{text(node.get("name", "?"))}</code> '
        f"[{text(node.get('state', '?'))}] {where}: {text(problems)}</li>"
    )


def _deadline_part(event: Mapping[str, Any]) -> str:
    """`, deadline D, before the cluster's next maintenance window W` (a saved health document may lack
    these: nothing then)."""
    if not event.get("sla_deadline"):
        return ""
    part = f", deadline {text(event['sla_deadline'])}"
    if event.get("next_window"):
        order = "<b>before</b>" if event.get("before_window") else "after"
        part += f", {order} the cluster's next maintenance window ({text(event['next_window'])})"
    return part


def _health_section(health: Mapping[str, Any]) -> str:
    """The GPU health now, from a `health --output json` document (npa_pulumi/output/health.py)."""
    clusters = _clusters_of(health)
    head = "".join(f"<th>{b}</th>" for b in ("requested", *_BUCKETS))
    rows = "".join(_health_row(c) for c in clusters)
    nodes = [
        _node_item(c, n)
        for c in clusters
        for n in c.get("nodes") or []
        if isinstance(n, Mapping) and (n.get("problems") or n.get("state") not in ("usable", "cpu"))
    ]
    events = [
        f'<li data-reason="{text(m.get("reason", ""))}"><b>{text(m.get("reason") or "unknown reason")}</b> '
        f"on {text(m.get('node') or m.get('instance_name') or 'an instance')} "
        f"({text(p.get('project_key', '?'))}{', ' + text(m['cluster']) if m.get('cluster') else ''}; "
        f"{text(m.get('id', ''))}){_deadline_part(m)}</li>"
        for p in health.get("projects") or []
        if isinstance(p, Mapping)
        for m in p.get("maintenance") or []
        if isinstance(m, Mapping)
    ]
    return (
        f'<section id="health"><p class="totals">fleet: {_health_totals(health.get("totals") or {})}'
        f" (--min-usable {text(health.get('min_usable', 1))})</p>"
        f'<table class="health"><thead><tr><th>cluster</th><th>status</th>{head}<th>last gate pass</th>'
        f"</tr></thead><tbody>{rows}</tbody></table>"
        + (f"<h3>Nodes that are not usable</h3>{_bounded_items(nodes)}" if nodes else "")
        + (f"<h3>Active maintenance events</h3>{_bounded_items(events)}" if events else "")
        + _remediation_part(health.get("remediation"))
        + "</section>"
    )


def _duration(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)):
        return "-"
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def _remediation_part(view: Any) -> str:
    """The repair ladder's side: open breakers, repeat offenders, incidents with MTBI and MTTR per fault
    reason and per node (engine/health/remediation.py)."""
    if not isinstance(view, Mapping):
        return ""
    breakers = [
        f'<li class="breaker" data-scope="{text(b.get("scope", ""))}"><b>open</b> '
        f"{text(b.get('scope', ''))}: "
        f"{text(b.get('impaired', 0))}/{text(b.get('total', 0))} GPU nodes impaired "
        f"(&gt; {text(b.get('threshold_percent', ''))}%) since {text(b.get('opened_at', ''))}</li>"
        for b in view.get("breakers") or []
        if isinstance(b, Mapping) and b.get("open")
    ]
    found = view.get("numbers")
    numbers: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    offenders = [
        f'<li class="offender" data-node="{text(o.get("node", ""))}">{text(o.get("cluster", ""))} '
        f"<code>{text(o.get('node', ''))}</code></li>"
        for o in numbers.get("repeat_offenders") or []
        if isinstance(o, Mapping)
    ]
    rows = [
        f'<tr data-{kind}="{text(e.get(kind, ""))}"><td>{text(label)}</td><td class="num">'
        f'{text(e.get("incidents", 0))}</td><td class="num">{_duration(e.get("mtbi_s"))}</td>'
        f'<td class="num">{_duration(e.get("mttr_s"))}</td></tr>'
        for kind, entries in (("reason", numbers.get("reasons")), ("node", numbers.get("nodes")))
        for e in entries or []
        if isinstance(e, Mapping)
        for label in [e.get("reason") or f"{e.get('cluster', '')} {e.get('node', '')}"]
    ]
    if not (breakers or offenders or rows):
        return ""
    table = (
        '<table class="health incidents"><thead><tr><th>reason / node</th><th>incidents</th><th>MTBI</th>'
        f"<th>MTTR</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        if rows
        else ""
    )
    return (
        "<h3>Repair ladder</h3>"
        + (
            f"<p>Open circuit breakers: no repair acts in their scope</p>{_bounded_items(breakers)}"
            if breakers
            else ""
        )
        + (
            f"<p>Repeat offenders: not requalified automatically</p>{_bounded_items(offenders)}"
            if offenders
            else ""
        )
        + table
    )


def _health_now(cluster: Mapping[str, Any] | None) -> str:
    if cluster is None:
        return "not read"
    summary = _health_totals(cluster.get("totals") or {})
    status = str(cluster.get("status") or "?")
    return f'<a href="#health">{text(status)}</a>: {summary}' + (
        f"; {text(cluster['error'])}" if cluster.get("error") else ""
    )


def _node_groups(view: ClusterView) -> str:
    if not view.node_groups:
        return "none recorded"
    items = [
        f"{text(g.get('name', '?'))} {text(g.get('state', '?'))} {text(g.get('ready', '?'))}/"
        f"{text(g.get('target', '?'))} ready"
        for g in view.node_groups
    ]
    return "<br>".join(items)


def _detail(view: ClusterView, health: Mapping[str, Any] | None = None) -> str:
    background, colour = _COLOURS[view.lifecycle]
    rows = [
        ("state", f'<span class="state" style="color:{colour}">{text(view.status)}</span>'),
        ("stack", f"<code>{text(view.stack)}</code>"),
        ("cluster id", text(view.cluster_id or "—")),
        ("kube context", f"<code>{text(view.kube_context)}</code>" if view.kube_context else "—"),
        (
            "GPUs",
            "<br>".join(
                f"{g.gpus}× {text(g.platform)} ({g.nodes} node(s), {text(g.preset)})" for g in view.gpus
            )
            or "none",
        ),
        ("node groups", _node_groups(view)),
        ("health gate", _health_summary(view)),
        *([("GPU health now", _health_now(health.get(view.stack)))] if health is not None else []),
        (
            "drift",
            "<br>".join(
                f"{text(d.get('kind', '?'))} {text(d.get('id', ''))}: {text(d.get('reason', ''))}"
                for d in view.drift
            )
            or "none",
        ),
    ]
    if view.changes:
        rows.append(("pending", ", ".join(f"{text(k)} {v}" for k, v in sorted(view.changes.items()))))
    if view.versions:
        groups = view.versions.get("node_groups") or {}
        listed = "".join(f"<br>{text(name)} {text(version or '?')}" for name, version in groups.items())
        rows.append(
            ("Kubernetes", f"control plane {text(view.versions.get('control_plane') or '?')}{listed}")
        )
    if view.waiting:
        until = view.waiting.get("next_window")
        rows.append(
            (
                "waiting for a window",
                text(view.waiting.get("reason", "")) + (f"<br>next window {text(until)}" if until else ""),
            )
        )
    if view.cost is not None:
        rows.append(("cost", _cost_text(view.cost)))
    if view.error:
        rows.append(("error", f"<pre>{text(view.error, 2000)}</pre>"))
    if view.retry_command:
        rows.append(("retry", f"<code>{text(view.retry_command)}</code>"))
    body = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return (
        f'<section class="detail lc-{view.lifecycle.value}" id="{anchor(view.stack)}" '
        f'data-stack="{text(view.stack)}" data-lifecycle="{view.lifecycle.value}" '
        f'style="border-left-color:{colour};background:linear-gradient(90deg,{background} 0,#fff 40%)">'
        f"<h3>{text(view.project)} / {text(view.name)}</h3><dl>{body}</dl></section>"
    )


def _totals(views: list[ClusterView]) -> str:
    counts: dict[Lifecycle, int] = {}
    for view in views:
        counts[view.lifecycle] = counts.get(view.lifecycle, 0) + 1
    parts = [
        f"<span><b>{len(views)}</b> cluster(s)</span>",
        f"<span><b>{sum(v.gpu_count for v in views)}</b> GPUs</span>",
    ]
    parts += [f'<span class="lc-{lc.value}"><b>{n}</b> {lc.value}</span>' for lc, n in counts.items()]
    return f'<p class="totals">{"".join(parts)}</p>'


def render_report(
    document: Mapping[str, Any],
    plan: Mapping[str, Any] | None = None,
    *,
    title: str | None = None,
    sections: Sequence[tuple[str, str]] = (),
    audit: Sequence[Mapping[str, Any]] | None = None,
    health: Mapping[str, Any] | None = None,
) -> str:
    """The page for a `status` (or `preview`) JSON document, with GPU models from the `plan` document;
    given a `health --output json` document, the GPU health now; `sections` (heading, HTML already made
    safe: a run's timeline, output/timeline.py) go after the chart; `audit`, the fleet's last audit
    records (`AuditRecord.to_json()`, newest last), or the one line that says why none could be read (a
    dict with `unavailable`)."""
    views = cluster_views(document, plan)
    by_stack = {str(c.get("stack")): c for c in _clusters_of(health)} if health is not None else None
    fleet = str(document.get("fleet") or "fleet")
    command = str(document.get("command") or "status")
    heading = title or (f"Fleet {fleet}" + (": pending change" if command == "preview" else ""))
    warnings = "".join(f"<li>{text(w)}</li>" for w in document.get("warnings") or [])
    error = document.get("error")
    details = "".join(_detail(v, by_stack) for v in views) or "<p>No clusters in this selection.</p>"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{text(heading)}</title><style>{CSS}</style></head>"
        f'<body data-fleet="{text(fleet)}" data-command="{text(command)}">'
        f"<h1>{text(heading)}</h1>"
        f'<p class="meta">{text(command)} · cloud <code>{text(document.get("cloud", "?"))}</code> · backend '
        f"<code>{text(_backend_label(str(document.get('backend', ''))))}</code></p>"
        f"{_totals(views)}"
        + (f'<p class="error"><b>error:</b> {text(error)}</p>' if error else "")
        + (f'<ul class="warnings">{warnings}</ul>' if warnings else "")
        + "<h2>Projects × clusters</h2>"
        + _legend(v.lifecycle for v in views)
        + _grid(views)
        + "<h2>GPUs per project</h2>"
        + _chart(views)
        + ("<h2>GPU health now</h2>" + _health_section(health) if health is not None else "")
        + "".join(f'<h2 id="{_section_id(heading)}">{text(heading)}</h2>{body}' for heading, body in sections)
        + (_audit(audit) if audit is not None else "")
        + "<h2>Clusters</h2>"
        + details
        + "</body></html>\n"
    )


def _section_id(heading: str) -> str:
    return "section-" + "".join(c if c.isalnum() else "-" for c in heading.lower())


def _backend_label(url: str) -> str:
    """The backend without its query (an endpoint, a profile): where the state is, not how to reach it."""
    return url.split("?", 1)[0]


AUDIT_SHOWN = 10  # records on the page (`audit` lists them all)
AUDIT_STACKS_SHOWN = 12  # stacks per record


def _audit(records: Sequence[Mapping[str, Any]]) -> str:
    """The fleet's last audit records, newest first: when, what, who, outcome, each stack's status."""
    unavailable = next((r["unavailable"] for r in records if "unavailable" in r), None)
    heading = '<h2 id="audit">Audit trail</h2>'
    if unavailable is not None:
        return f'{heading}<p class="audit-unavailable">No audit trail readable here: {text(unavailable)}</p>'
    if not records:
        return f'{heading}<p class="audit-empty">No audit records: no mutating run has recorded one yet.</p>'
    shown = list(records)[-AUDIT_SHOWN:][::-1]
    rows = []
    for record in shown:
        raw_who = record.get("who")
        who: Mapping[str, Any] = raw_who if isinstance(raw_who, Mapping) else {}
        actor = [
            f"<b>{text(who.get('principal') or 'principal unknown')}</b>",
            f"profile {text(who['profile'])}" if who.get("profile") else "",
            f"{text(who['os_user'])}@{text(who.get('host') or '?')}" if who.get("os_user") else "",
            f"CI <code>{text(who['ci_run_url'])}</code>" if who.get("ci_run_url") else "",
        ]
        stacks = [s for s in record.get("stacks") or [] if isinstance(s, Mapping)]
        outcomes = "<br>".join(
            f"<code>{text(s.get('stack', '?'))}</code> {text(s.get('status', '?'))}"
            + (f" [{text(s['lifecycle'])}]" if s.get("lifecycle") else "")
            + (f" — {text(s['detail'])}" if s.get("detail") else "")
            for s in stacks[:AUDIT_STACKS_SHOWN]
        )
        if len(stacks) > AUDIT_STACKS_SHOWN:
            outcomes += f"<br>… and {len(stacks) - AUDIT_STACKS_SHOWN} more"
        command = text(record.get("command", "?")) + (
            f" --{text(record['repair'])}" if record.get("repair") else ""
        )
        rows.append(
            f'<tr data-command="{command}" data-outcome="{text(record.get("outcome", ""))}">'
            f"<td>{text(record.get('started_at', '?'))}</td><td><code>{command}</code></td>"
            f"<td>{text(record.get('outcome', '?'))}</td><td>{', '.join(a for a in actor if a)}</td>"
            f"<td>{outcomes or '—'}</td></tr>"
        )
    more = len(records) - len(shown)
    note = f"<p>{more} older record(s): <code>npa-pulumi audit</code> lists them all.</p>" if more else ""
    return (
        f'{heading}<table class="audit"><thead><tr><th>started (UTC)</th><th>command</th><th>outcome</th>'
        f"<th>who</th><th>stacks</th></tr></thead><tbody>{''.join(rows)}</tbody></table>{note}"
    )
