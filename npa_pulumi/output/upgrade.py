"""`upgrade plan` for people: the text a terminal shows, and the hop table of the pull-request comment
(in the style of output/markdown.py: every user-written value escaped, the table bounded, the rest left to
the JSON)."""

from __future__ import annotations

from typing import Any

from npa_pulumi.output.markdown import code, md, plural

MAX_TABLE_ROWS = 200
MAX_REFUSALS = 50


def _phases(hop: dict[str, Any]) -> str:
    parts = []
    for phase in hop["phases"]:
        if phase["component"] == "control-plane":
            parts.append("control plane")
        elif phase["held"]:
            parts.append(f"{phase['name']} held at {phase['to']} (pinned)")
        else:
            gpus = f", {phase['gpus']} GPUs, {phase['gpu_hours']:g} GPU-h" if phase["gpus"] else ""
            parts.append(f"{phase['name']} ({plural(phase['nodes'], 'node')}{gpus})")
    return "; ".join(parts)


def _window(cluster: dict[str, Any]) -> str:
    maintenance = cluster["maintenance"]
    if not maintenance["windows"]:
        held = "".join(
            f"; held by {e['scope']} until {e['until']}" for e in maintenance["held_by_exclusions"]
        )
        return "any time (no windows)" + held
    now = "inside a window now" if maintenance["inside_window"] else "outside its windows now"
    held = "".join(f"; held by {e['scope']} until {e['until']}" for e in maintenance["held_by_exclusions"])
    return f"{now}; next opens {maintenance['next_window']}{held}"


def render_upgrade_text(document: dict[str, Any]) -> str:
    summary = document["summary"]
    lines = [
        f"Upgrade plan ({document['versions_from']}"
        + (f" {document['target']}" if document["target"] else "")
        + f", at {document['at']}): {plural(summary['clusters'], 'cluster')}, "
        f"{plural(summary['hops'], 'hop')}, {summary['gpu_hours_drained']:g} GPU-hours drained, "
        f"{summary['invariant_checks']} skew checks, {summary['skew_violations']} violations",
    ]
    for cluster in document["clusters"]:
        head = (
            f"{cluster['cluster']}: {cluster['from'] or '?'} -> {cluster['to'] or '?'}  [{cluster['status']}]"
        )
        lines += ["", head]
        if cluster["reason"]:
            lines.append(f"  {cluster['reason']}")
        for refusal in cluster["refusals"]:
            lines.append(f"  refused: {refusal['object']} at {refusal['version']}: {refusal['reason']}")
        for hop in cluster["hops"]:
            lines.append(f"  {hop['from']} -> {hop['to']}: {_phases(hop)}")
        if cluster["hops"]:
            assumed = " (assumed; set maintenance.drain_time)" if cluster["drain_time_assumed"] else ""
            lines.append(
                f"  drains {cluster['gpu_hours_drained']:g} GPU-hours at "
                f"{cluster['drain_hours_per_node']:g}h per node{assumed}"
            )
        if cluster["status"] in ("planned", "refused"):
            lines.append(f"  window: {_window(cluster)}")
        for held in cluster["maintenance"]["held_by_exclusions"]:
            if held["reason"]:
                lines.append(f"  exclusion {held['scope']}: {held['reason']}")
        for note in cluster["unchecked"]:
            lines.append(f"  not checked: {note}")
    return "\n".join(lines) + "\n"


def upgrade_markdown(document: dict[str, Any]) -> str:
    """The hop table for the pull-request comment: one row per cluster that moves or is refused."""
    summary = document["summary"]
    rows = [c for c in document["clusters"] if c["status"] in ("planned", "refused")]
    lines = [
        "#### Kubernetes upgrade",
        "",
        f"{plural(len(rows), 'cluster')} to upgrade in {plural(summary['hops'], 'hop')} "
        "(one minor at a time: the control plane, then each node group; pinned groups held); "
        f"**{summary['gpu_hours_drained']:g} GPU-hours drained**; "
        f"{summary['invariant_checks']} skew checks, {summary['skew_violations']} violations.",
        "",
        "| Cluster | From | To | Hops | GPU-hours drained | Window | Status |",
        "|:--|:--|:--|:--|--:|:--|:--|",
    ]
    for cluster in rows[:MAX_TABLE_ROWS]:
        hops = (
            " → ".join([cluster["hops"][0]["from"], *(h["to"] for h in cluster["hops"])])
            if cluster["hops"]
            else "—"
        )
        lines.append(
            f"| {code(cluster['cluster'])} | {md(cluster['from'] or '?')} | {md(cluster['to'] or '?')} | "
            f"{md(hops)} | {cluster['gpu_hours_drained']:g} | {md(_window(cluster))} | "
            f"{'❌ refused' if cluster['status'] == 'refused' else '🟡 planned'} |"
        )
    if len(rows) > MAX_TABLE_ROWS:
        lines.append(f"\n_… and {len(rows) - MAX_TABLE_ROWS} more clusters (see the JSON)._")
    refusals = [(c["cluster"], r) for c in rows for r in c["refusals"]]
    if refusals:
        lines += ["", "**Refused:**", ""]
        lines += [
            f"- {code(key)}: {md(r['object'])} at {md(r['version'])}: {md(r['reason'], 400)}"
            for key, r in refusals[:MAX_REFUSALS]
        ]
        if len(refusals) > MAX_REFUSALS:
            lines.append(f"- … and {len(refusals) - MAX_REFUSALS} more (see the JSON).")
    return "\n".join(lines) + "\n"


def render_run_text(document: dict[str, Any]) -> str:
    """`upgrade run`'s outcome: the refusals or the hops run (what each moved, the skew checks), where it
    halted, and where each cluster's train ended."""
    summary = document["summary"]
    lines = [
        f"Upgrade run to {document['target'] or 'the spec'}: {plural(summary['clusters'], 'cluster')}, "
        f"{plural(summary['hops_run'], 'hop')} run, {summary['invariant_checks']} skew checks, "
        f"{summary['skew_violations']} violations"
    ]
    if document["refused"]:
        lines += ["refused (nothing was changed):", *(f"  {r}" for r in document["refused"][:MAX_REFUSALS])]
    for hop in document["hops"]:
        moved = ", ".join(f"{key} -> {version}" for key, version in hop["moved"].items())
        lines.append(f"hop {hop['hop']}: {moved}")
        for step in hop.get("steps", []):  # the control plane, then the node groups
            outcomes = ", ".join(f"{key} {status}" for key, status in step["outcomes"].items())
            lines.append(f"  {step['step']}: {outcomes}; {step['invariant_checks']} skew checks")
            lines += [f"  skew violation: {v}" for v in step["skew_violations"]]
    if document["halted"]:
        lines.append(f"halted at {document['halted']}; run the same command to resume")
    for cluster in document["clusters"]:
        reason = f": {cluster['reason']}" if cluster["reason"] and cluster["state"] != "halted" else ""
        lines.append(f"{cluster['cluster']}: {cluster['state']} at {cluster['at'] or '?'}{reason}")
    lines += [f"warning: {w}" for w in document["warnings"]]
    return "\n".join(lines) + "\n"
