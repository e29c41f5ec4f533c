"""The cost of a change as people read it: the pull-request comment's cost section (Infracost's shape:
a headline, a Project | Previous | New | Diff table, the changed lines per stack collapsed) and text lines
for `preview` and `status`.

Reads only the `cost` document a preview or status result carries (plan/cost_delta.py), so a merged preview
renders exactly as an unsharded one. Everything from the spec is escaped with the comment's own helpers.
"""

from __future__ import annotations

from typing import Any

from npa_pulumi.output.markdown import code, html_text, md, plural, size
from npa_pulumi.output.results import FleetResult, PolicyViolation
from npa_pulumi.plan.cost import money

MAX_PROJECT_ROWS = 40
MAX_BREAKDOWN_BYTES = 8_000
MAX_LINES_PER_STACK = 8
_SIGN = {"added": "+", "removed": "-", "changed": "~", "unchanged": " "}


def _diff(value: float | None) -> str:
    if value is None:
        return "unknown"
    return money(value, signed=True) if value else "$0"


def _span(cost: dict[str, Any]) -> str:
    return f"{money(cost['past_monthly_usd'])} → {money(cost['monthly_usd'])}"


def _project_rows(cost: dict[str, Any]) -> list[str]:
    projects = sorted(cost.get("projects") or [], key=lambda p: -abs(float(p["diff_monthly_usd"])))
    rows = [
        f"| {code(p['project_key'])} | {money(p['past_monthly_usd'])} | {money(p['monthly_usd'])} | "
        f"{_diff(p['diff_monthly_usd'])} |"
        for p in projects[:MAX_PROJECT_ROWS]
    ]
    if len(projects) > MAX_PROJECT_ROWS:
        rows.append(f"| _{len(projects) - MAX_PROJECT_ROWS} more projects_ | | | |")
    rows.append(
        f"| **All projects** | **{money(cost['past_monthly_usd'])}** | **{money(cost['monthly_usd'])}** | "
        f"**{_diff(cost['diff_monthly_usd'])}** |"
    )
    return rows


def _side(value: float | None, absent: bool) -> str:
    if absent:
        return "none"
    return "not priced" if value is None else money(value)


def _line(line: dict[str, Any]) -> str:
    change = str(line.get("change"))
    past, new = line.get("past_monthly_usd"), line.get("monthly_usd")
    reserved = " (reserved, not in the totals)" if line.get("pricing") == "reserved" else ""
    figures = f"{_side(past, change == 'added')} → {_side(new, change == 'removed')}"
    if line.get("diff_monthly_usd") is not None:
        figures += f" ({_diff(line.get('diff_monthly_usd'))})"
    sign = _SIGN.get(change, "~")
    return f"  - **{sign}** {code(line['item'])} {md(line['description'])}: {figures}{reserved}"


def _breakdown(cost: dict[str, Any]) -> str:
    changed = [s for s in cost.get("stacks") or [] if s.get("change") != "unchanged"]
    if not changed:
        return ""
    changed.sort(key=lambda s: -abs(float(s["diff_monthly_usd"])))
    parts: list[str] = []
    used, left_out = 0, 0
    for stack in changed:
        recorded = "" if stack.get("past_recorded", True) else " (before not recorded: counted as $0)"
        if stack.get("change") == "removed":
            recorded += " (no longer in the spec: saved once its stack is destroyed)"
        block = [
            f"- **{_SIGN.get(str(stack['change']), '~')}** {code(stack['stack'])} "
            f"{_diff(stack['diff_monthly_usd'])}/month{recorded}"
        ]
        lines = stack.get("lines") or []
        block += [_line(line) for line in lines[:MAX_LINES_PER_STACK]]
        if len(lines) > MAX_LINES_PER_STACK:
            block.append(f"  - … {len(lines) - MAX_LINES_PER_STACK} more lines (see the JSON)")
        text = "\n".join(block) + "\n"
        if used + size(text) > MAX_BREAKDOWN_BYTES:
            left_out += 1
            continue
        used += size(text)
        parts.append(text)
    more = f"\n_{plural(left_out, 'more stack')} not listed (see the JSON)._\n" if left_out else ""
    summary = html_text(f"Cost changes by stack ({len(changed)})")
    return (
        f"<details>\n<summary>{summary}</summary>\n\n"
        + "".join(parts)
        + more
        + "\nKey: ~ changed, + added, - removed.\n\n</details>\n"
    )


def _notes(cost: dict[str, Any]) -> list[str]:
    notes = []
    reserved = cost.get("reserved") or {}
    if reserved.get("past_monthly_usd") or reserved.get("monthly_usd"):
        notes.append(
            f"Reserved capacity (capacity blocks), apart from the totals: {_span(reserved)} a month "
            f"({_diff(reserved.get('diff_monthly_usd'))})."
        )
    unknown = int(cost.get("unknown_count") or 0)
    if unknown:
        notes.append(
            f"{plural(unknown, 'item')} not priced (no public or supplied price; reserved pools without a "
            "contract price) and not counted: see the JSON's `cost.stacks[].unknown`."
        )
    unrecorded = cost.get("unrecorded") or []
    if unrecorded:
        notes.append(
            f"Before is unknown for {plural(len(unrecorded), 'stack')} deployed before npa-pulumi recorded "
            "costs (counted as $0; the next `up` records it)."
        )
    return notes


def _violations(policy: list[PolicyViolation]) -> list[str]:
    icons = {"mandatory": "❌", "advisory": "⚠️"}
    return [
        f"- {icons.get(v.level.lower(), '•')} **{md(v.level.lower())}** {code(v.policy)} ({code(v.pack)}): "
        f"{md(v.message, 500)}"
        for v in policy
    ]


def cost_markdown(result: FleetResult) -> str:
    """The comment's cost section ("" when the result carries no cost)."""
    cost = result.cost
    if not cost or "headline" not in cost:
        return ""
    layers = ", ".join(f"{layer['origin']} {layer['version']}" for layer in cost["prices"]["layers"])
    lines = [
        "#### 💰 Cost",
        "",
        f"**{md(cost['headline'])}** · {_span(cost)} a month · prices: {md(layers)} (730 h a month)",
        "",
        "| Project | Previous | New | Diff |",
        "| :-- | --: | --: | --: |",
        *_project_rows(cost),
        "",
    ]
    lines += [f"_{md(note, 400)}_\n" for note in _notes(cost)]
    if result.policy:
        lines += ["**Fleet policy**", "", *_violations(result.policy), ""]
    return "\n".join(lines) + "\n" + _breakdown(cost)


def cost_text(cost: dict[str, Any] | None) -> list[str]:
    """Lines for the text output of a preview (the delta) or of status (what is deployed costs)."""
    if not cost:
        return []
    if "headline" in cost:
        lines = [f"cost: {cost['headline']} ({_span(cost)} a month)"]
        for project in cost.get("projects") or []:
            lines.append(
                f"  project {project['project_key']}: {money(project['past_monthly_usd'])} → "
                f"{money(project['monthly_usd'])} ({_diff(project['diff_monthly_usd'])})"
            )
        for stack in cost.get("stacks") or []:
            if stack.get("change") != "unchanged":
                lines.append(
                    f"  {stack['change']} {stack['stack']}: {_diff(stack['diff_monthly_usd'])}/month"
                )
        return lines + [f"  {note}" for note in _notes(cost)]
    lines = [f"cost now: {money(cost['monthly_usd'])} a month ({money(cost['hourly_usd'])}/h)"]
    for project in cost.get("projects") or []:
        lines.append(f"  project {project['project_key']}: {money(project['cost']['monthly_usd'])} a month")
        for stack in project.get("stacks") or []:
            if stack.get("cluster_name"):
                lines.append(f"    {stack['cluster_name']}: {money(stack['cost']['monthly_usd'])} a month")
    if cost.get("unknown"):
        lines.append(f"  {plural(len(cost['unknown']), 'item')} not priced (see --output json)")
    if cost.get("unrecorded"):
        lines.append(f"  not recorded (deployed before costs were recorded): {', '.join(cost['unrecorded'])}")
    return lines
