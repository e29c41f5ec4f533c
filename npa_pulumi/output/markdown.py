"""The fleet-wide pull-request preview: one markdown document for every stack of the fleet.

Peers fail reviewers here in known ways: one comment per project, comments split or cut off mid-table when
a plan is large, and summaries that bury what matters. This renderer therefore produces exactly one
document, ordered by what a reviewer of a GPU fleet needs first:

1. a hidden marker (`<!-- npa-pulumi:fleet-preview:<fleet> -->`) so CI updates one sticky comment;
2. a summary line: stacks changed / unchanged / failed, policy violations by level, preflight fit;
3. a table per project (cluster, stack, status, create/update/replace/delete, policy result);
4. the preflight tables (shortfalls and rejected capacity blocks first; GiB for byte quantities);
5. collapsible per-stack details (resource-level diff, violations, error).

The document always fits GitHub's comment limit. Details are trimmed first, most important kept (failed,
then mandatory violations, then destructive changes); then the project tables are collapsed; and the
document says exactly what was left out. The full result stays in the JSON (`--json-out`).

Everything user-controlled is escaped for the context it lands in (a table cell, an HTML block, a `<pre>`),
and everything is scrubbed for capacity-block ids and secret-looking values before it is escaped: the
inputs are already masked, but a comment is public to everyone who can read the pull request, so this
module does not rely on that alone.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from npa_pulumi.cloud.redaction import scrub
from npa_pulumi.output.results import FleetResult, PolicyViolation, StackResult
from npa_pulumi.output.rollout_markdown import rollout_section
from npa_pulumi.preflight.report import FAILING_REQUIREMENT_STATUSES, human_amount, human_unit

COMMENT_LIMIT = 65_536
# Sizes are measured in UTF-8 bytes, never fewer than the characters (or UTF-16 units) GitHub counts, and
# the budget leaves room for a footer the workflow appends (a link to the run and its JSON artifact).
DEFAULT_BUDGET = COMMENT_LIMIT - 1_024
MARKER_PREFIX = "npa-pulumi:fleet-preview:"

# Per-stack bounds, so one enormous stack cannot starve every other stack's details.
MAX_DIFF_ROWS = 40
MAX_PROPERTIES = 8
MAX_VIOLATIONS = 20
MAX_CELL_CHARS = 160
MAX_MESSAGE_CHARS = 500
MAX_ERROR_CHARS = 2_000
MAX_REQUIREMENT_ROWS = 60
MAX_CAPACITY_ROWS = 30
# Room kept for the trimming notice while the rest of the document is being fitted.
NOTICE_RESERVE = 700

COUNT_OPS = ("create", "update", "replace", "delete")

# ----------------------------------------------------------------------------------------- escaping

_WHITESPACE = re.compile(r"\s+")
# Inline markdown that a crafted name could use to break a table (`|`), open a code span (backtick),
# emphasise, link or strike through is backslash-escaped; `<`, `>` and `&` become entities.
_MD_ESCAPES = str.maketrans({**{c: "\\" + c for c in "\\`*_[]|~"}, "&": "&amp;", "<": "&lt;", ">": "&gt;"})


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _flat(value: object, limit: int) -> str:
    """Scrubbed, on one line (a newline would end a table row or an HTML block), and bounded."""
    return _clip(_WHITESPACE.sub(" ", scrub(str(value))).strip(), limit)


def md(value: object, limit: int = MAX_CELL_CHARS) -> str:
    """Text for a markdown context (table cell, list item, paragraph)."""
    return _flat(value, limit).translate(_MD_ESCAPES)


def html_text(value: object, limit: int = MAX_CELL_CHARS) -> str:
    """Text for a raw HTML context (a `<summary>` line), where markdown is not processed."""
    return html.escape(_flat(value, limit), quote=True)


def code(value: object, limit: int = MAX_CELL_CHARS) -> str:
    # `<code>` rather than backticks: a backtick span cannot hold a crafted backtick run safely, while
    # escaped text inside `<code>` is always inert.
    return f"<code>{md(value, limit)}</code>"


def html_code(value: object, limit: int = MAX_CELL_CHARS) -> str:
    return f"<code>{html_text(value, limit)}</code>"


def pre(value: object, limit: int = MAX_ERROR_CHARS) -> str:
    """A multi-line block (errors). `<pre>` contents are raw text to markdown, so HTML-escaping suffices."""
    text = scrub(str(value)).strip()
    if len(text) > limit:
        text = text[:limit].rstrip() + "\n… (cut; the full text is in the JSON and the stack log)"
    return f"<pre>{html.escape(text, quote=False)}</pre>"


def marker(fleet: str) -> str:
    """The hidden comment CI searches for. Only id characters survive, so it can never close early."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", fleet)[:100]
    return f"<!-- {MARKER_PREFIX}{safe} -->"


def backend_label(url: str) -> str:
    """The backend without credentials or query parameters (which may carry keys or endpoints)."""
    url = re.sub(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", r"\1", url.strip(), flags=re.IGNORECASE)
    return url.split("?", 1)[0]


# ----------------------------------------------------------------------------------------- facts


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _count(changes: dict[str, int], op: str) -> int:
    return int(changes.get(op, 0) or 0)


def _has_changes(stack: StackResult) -> bool:
    return stack.status == "changes" or any(_count(stack.changes, op) for op in COUNT_OPS)


def _level_counts(violations: Iterable[PolicyViolation]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for violation in violations:
        level = violation.level.lower() or "unknown"
        counts[level] = counts.get(level, 0) + 1
    return counts


def _ordered_levels(counts: dict[str, int]) -> list[tuple[str, int]]:
    rank = {"mandatory": 0, "advisory": 1, "remediate": 2}
    return sorted(counts.items(), key=lambda item: (rank.get(item[0], 3), item[0]))


_LEVEL_ICON = {"mandatory": "❌", "advisory": "⚠️", "remediate": "🛠️"}
_STATUS_LABEL = {
    "changes": "🟡 changes",
    "no-changes": "⚪ no changes",
    "failed": "🔴 failed",
    "not-supported": "⚫ not supported",
}


def _status_label(status: str) -> str:
    return _STATUS_LABEL.get(status, md(status))


def _resource_name(urn: str) -> str:
    # urn:pulumi:<stack>::<project>::<type chain>::<name> — the name is what a reviewer recognises.
    return urn.rsplit("::", 1)[-1] if "::" in urn else urn


def _short_type(type_token: str) -> str:
    # The last link of a parent chain, and dynamic resources by their own name (`npa:Bucket`), not the
    # provider plumbing (`pulumi-python:dynamic/npa:Bucket`).
    return type_token.rsplit("$", 1)[-1].removeprefix("pulumi-python:dynamic/")


# ----------------------------------------------------------------------------------------- header


def _policy_summary(stacks: list[StackResult], fleet: Iterable[PolicyViolation] = ()) -> str:
    counts = _level_counts([*(v for s in stacks for v in s.policy), *fleet])
    if not counts:
        return "policy: ✅ no violations"
    parts = [
        f"**{n} {level}**" if level == "mandatory" else f"{n} {md(level)}"
        for level, n in _ordered_levels(counts)
    ]
    return "policy: " + ", ".join(parts)


def preflight_fit(preflight: dict[str, Any] | None) -> str:
    """`fits`, `not run`, or why it does not fit (counts of shortfalls, rejected blocks, errors)."""
    if preflight is None:
        return "preflight: not run"
    if preflight.get("ok"):
        return "preflight: ✅ fits"
    requirements = preflight.get("requirements") or []
    shortfalls = sum(1 for r in requirements if r.get("status") == "shortfall")
    unproven = sum(1 for r in requirements if r.get("status") in ("missing", "error"))
    rejected = sum(1 for b in preflight.get("capacity_blocks") or [] if b.get("status") == "rejected")
    errors = len(preflight.get("errors") or [])
    reasons = [
        text
        for n, text in (
            (shortfalls, plural(shortfalls, "quota shortfall")),
            (unproven, f"{plural(unproven, 'quota')} unproven"),
            (rejected, f"{plural(rejected, 'capacity block')} rejected"),
            (errors, plural(errors, "error")),
        )
        if n
    ]
    return "preflight: ❌ **does not fit**" + (f" ({', '.join(reasons)})" if reasons else "")


# Preview statuses the summary counts by name; anything else (not-supported) is listed as "other".
_COUNTED = {"changes", "no-changes", "failed"}


def _summary_line(result: FleetResult) -> str:
    stacks = result.stacks
    changed = sum(1 for s in stacks if s.status == "changes")
    unchanged = sum(1 for s in stacks if s.status == "no-changes")
    failed = sum(1 for s in stacks if s.failed)
    other = len(stacks) - changed - unchanged - failed
    parts = [
        f"**{plural(changed, 'stack')} changed**" if changed else "0 stacks changed",
        f"{unchanged} unchanged",
        f"**{failed} failed**" if failed else "0 failed",
    ]
    if other:
        statuses = sorted({md(s.status) for s in stacks if s.status not in _COUNTED and not s.failed})
        parts.append(f"{other} other ({', '.join(statuses)})")
    policy = _policy_summary(stacks, result.policy)
    return " · ".join([", ".join(parts), policy, preflight_fit(result.preflight)])


def _verdict(result: FleetResult) -> str:
    everything = [*(v for s in result.stacks for v in s.policy), *result.policy]
    mandatory = any(v.level.lower() == "mandatory" for v in everything)
    preflight_failed = result.preflight is not None and not result.preflight.get("ok")
    if result.failed_count or mandatory or preflight_failed:
        return "❌"
    # Green only when every stack previewed and none would change; anything else deserves a look.
    return "✅" if all(s.status == "no-changes" for s in result.stacks) else "🟡"


def _header(result: FleetResult) -> str:
    clusters = sum(1 for s in result.stacks if s.kind == "cluster")
    projects = len({s.project_key for s in result.stacks})
    scope = f"{plural(clusters, 'cluster')} in {plural(projects, 'project')}"
    lines = [
        marker(result.fleet),
        f"### {_verdict(result)} npa-pulumi {md(result.command)} · fleet {code(result.fleet)}",
        "",
        _summary_line(result),
        "",
        f"cloud {code(result.cloud)} · backend {code(backend_label(result.backend))} · "
        f"{plural(len(result.stacks), 'stack')} ({scope})",
    ]
    replaced = replaced_node_groups(result.stacks)
    if replaced:
        lines += [
            "",
            f"⚠️ **{plural(replaced, 'node group')} will be replaced** (Terraform's plan; see the details)",
        ]
    disruptive = [s for s in result.stacks if (s.disruption or {}).get("class") == "disruptive"]
    in_place = [s for s in result.stacks if (s.disruption or {}).get("class") == "in-place"]
    if disruptive or in_place:
        lines += [
            "",
            f"changes: **{plural(len(disruptive), 'stack')} disruptive** (drains or replaces nodes, or loses "
            f"data), {len(in_place)} in-place only (see each stack's details)",
        ]
    pending = [s for s in result.stacks if s.pending]
    if pending:
        soonest = min((str(s.pending.get("next_window") or "") for s in pending if s.pending), default="")
        lines += [
            "",
            f"⏸️ **{plural(len(pending), 'cluster')} would wait for a maintenance window**: `up` now leaves "
            "their disruptive changes pending"
            + (f" (the first window opens {md(soonest)})" if soonest else "")
            + "; see each stack's details",
        ]
    if result.error:
        lines += ["", "**Fleet error**", "", pre(result.error)]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------- tables


def _row(cells: Iterable[str]) -> str:
    # Cells are padded with spaces so a cell ending in an escaped backslash never touches a separator.
    return "| " + " | ".join(cells) + " |"


def _table(header: list[str], rows: list[list[str]], align: list[str]) -> str:
    return "\n".join([_row(header), _row(align), *(_row(r) for r in rows)]) + "\n"


def _policy_cell(stack: StackResult) -> str:
    if stack.policy:
        return ", ".join(
            f"{_LEVEL_ICON.get(level, '•')} {n} {md(level)}"
            for level, n in _ordered_levels(_level_counts(stack.policy))
        )
    # A stack that failed or was not previewed has no policy verdict to report.
    return "✅ pass" if stack.status in ("changes", "no-changes") else "—"


def _count_cell(stack: StackResult, op: str) -> str:
    n = _count(stack.changes, op)
    if not n:
        return "·"
    return f"**{n}**" if op in ("replace", "delete") else str(n)


_STACK_COLUMNS = ["Cluster", "Stack", "Status", "Create", "Update", "Replace", "Delete", "Policy"]
_STACK_ALIGN = [":--", ":--", ":--", "--:", "--:", "--:", "--:", ":--"]


def _stack_row(stack: StackResult) -> list[str]:
    cluster = (
        code(stack.cluster_name) if stack.kind == "cluster" and stack.cluster_name else "_project resources_"
    )
    return [
        cluster,
        code(stack.stack),
        _status_label(stack.status),
        *(_count_cell(stack, op) for op in COUNT_OPS),
        _policy_cell(stack),
    ]


@dataclass
class ProjectGroup:
    key: str
    project_id: str | None
    stacks: list[StackResult] = field(default_factory=list)


def group_by_project(stacks: list[StackResult]) -> list[ProjectGroup]:
    """Projects in fleet order; within one, the project stack first, then its clusters."""
    groups: dict[str, ProjectGroup] = {}
    for stack in stacks:
        group = groups.setdefault(stack.project_key, ProjectGroup(stack.project_key, stack.project_id))
        group.project_id = group.project_id or stack.project_id
        group.stacks.append(stack)
    for group in groups.values():
        group.stacks.sort(key=lambda s: s.kind != "project")
    return list(groups.values())


def _interesting(stack: StackResult) -> bool:
    return (
        stack.failed
        or bool(stack.policy)
        or bool(stack.error)
        or _has_changes(stack)
        or stack.status not in _COUNTED
    )


def _project_heading(group: ProjectGroup) -> str:
    where = f" · {code(group.project_id)}" if group.project_id else ""
    return f"#### Project {code(group.key)}{where}"


def _project_tables(groups: list[ProjectGroup], changed_only: bool) -> tuple[str, int]:
    """One table per project; with `changed_only`, quiet rows are counted instead of listed."""
    parts: list[str] = []
    left_out = 0
    for group in groups:
        shown = [s for s in group.stacks if _interesting(s)] if changed_only else group.stacks
        quiet = len(group.stacks) - len(shown)
        left_out += quiet
        parts.append(_project_heading(group) + "\n\n")
        if shown:
            parts.append(_table(_STACK_COLUMNS, [_stack_row(s) for s in shown], _STACK_ALIGN))
        if quiet:
            parts.append(f"_{plural(quiet, 'unchanged stack')} not listed._\n")
        parts.append("\n")
    return "".join(parts), left_out


def _overview_row(group: ProjectGroup) -> list[str]:
    totals = {op: sum(_count(s.changes, op) for s in group.stacks) for op in COUNT_OPS}
    levels = _level_counts(v for s in group.stacks for v in s.policy)
    failed = sum(1 for s in group.stacks if s.failed)
    return [
        code(group.key),
        str(len(group.stacks)),
        str(sum(1 for s in group.stacks if s.status == "changes")),
        f"**{failed}**" if failed else "·",
        *(
            (f"**{totals[op]}**" if op in ("replace", "delete") else str(totals[op])) if totals[op] else "·"
            for op in COUNT_OPS
        ),
        ", ".join(f"{_LEVEL_ICON.get(lv, '•')} {n} {md(lv)}" for lv, n in _ordered_levels(levels)) or "—",
    ]


def _overview_table(groups: list[ProjectGroup], max_rows: int) -> tuple[str, int]:
    """The collapsed form: one row per project (the projects with failures or changes first)."""
    ranked = sorted(
        groups,
        key=lambda g: (
            not any(s.failed for s in g.stacks),
            not any(v.level.lower() == "mandatory" for s in g.stacks for v in s.policy),
            not any(_has_changes(s) for s in g.stacks),
        ),
    )
    shown = ranked[:max_rows]
    header = ["Project", "Stacks", "Changed", "Failed", "Create", "Update", "Replace", "Delete", "Policy"]
    align = [":--", "--:", "--:", "--:", "--:", "--:", "--:", "--:", ":--"]
    text = "#### Projects\n\n" + _table(header, [_overview_row(g) for g in shown], align)
    left_out = len(groups) - len(shown)
    if left_out:
        text += f"_{left_out} more {'project' if left_out == 1 else 'projects'} not listed._\n"
    return text + "\n", left_out


# ----------------------------------------------------------------------------------------- preflight

_REQUIREMENT_RANK = {"shortfall": 0, "missing": 1, "error": 1}


def _amount(value: Any, unit: str, none: str) -> str:
    return md(human_amount(value if isinstance(value, int) else None, unit, none=none))


def _requirement_row(line: dict[str, Any]) -> list[str]:
    unit = str(line.get("unit") or "count")
    status = str(line.get("status") or "")
    failing = status in FAILING_REQUIREMENT_STATUSES
    none = "-" if status in ("missing", "error", "unadvertised") else "unlimited"
    shortfall = line.get("shortfall") or 0
    label = f"❌ **{md(status)}**" if failing else f"✅ {md(status)}"
    if line.get("detail"):
        label += f": {md(line['detail'])}"
    return [
        code(line.get("name", "")),
        md(line.get("region", "")),
        _amount(line.get("required"), unit, "-"),
        _amount(line.get("available"), unit, none),
        _amount(line.get("limit"), unit, none),
        f"**{_amount(shortfall, unit, '-')}**" if shortfall else "·",
        md(human_unit(unit)),
        label,
    ]


def _capacity_row(block: dict[str, Any]) -> list[str]:
    status = str(block.get("status") or "")
    label = f"❌ **{md(status)}**" if status == "rejected" else f"✅ {md(status)}"
    if block.get("reason"):
        label += f": {md(block['reason'])}"
    free = block.get("free_gpus")
    return [
        code(block.get("id", "")),  # already masked by preflight; scrub() masks it again if it is not
        md(block.get("region", "")),
        md(block.get("platform", "")),
        md(block.get("fabric") or "-"),
        md(f"{block.get('required_gpus', 0):,}" if isinstance(block.get("required_gpus"), int) else "-"),
        md("unknown" if not isinstance(free, int) else f"{free:,}"),
        label,
    ]


def _bounded_rows(rows: list[list[str]], limit: int, what: str) -> tuple[list[list[str]], str]:
    if len(rows) <= limit:
        return rows, ""
    return rows[
        :limit
    ], f"_{len(rows) - limit} more {what} not listed (the failing ones are listed first)._\n"


def preflight_section(preflight: dict[str, Any] | None) -> str:
    if preflight is None:
        return "#### Preflight\n\n_Preflight did not run: quota and capacity fit were not checked._\n\n"
    parts = [
        "#### Preflight\n\n",
        (
            "✅ The tenant's quotas and capacity blocks fit this fleet.\n\n"
            if preflight.get("ok")
            else "❌ **The fleet does not fit the tenant's quotas or capacity.**\n\n"
        ),
    ]
    requirements = sorted(
        preflight.get("requirements") or [],
        key=lambda r: (
            _REQUIREMENT_RANK.get(str(r.get("status")), 2),
            str(r.get("region")),
            str(r.get("name")),
        ),
    )
    if requirements:
        rows, more = _bounded_rows(
            [_requirement_row(r) for r in requirements], MAX_REQUIREMENT_ROWS, "quotas"
        )
        parts.append(
            _table(
                ["Quota", "Region", "Needed", "Available", "Limit", "Shortfall", "Unit", "Status"],
                rows,
                [":--", ":--", "--:", "--:", "--:", "--:", ":--", ":--"],
            )
            + more
            + "\n"
        )
    blocks = sorted(
        preflight.get("capacity_blocks") or [],
        key=lambda b: (b.get("status") != "rejected", str(b.get("region")), str(b.get("id"))),
    )
    if blocks:
        rows, more = _bounded_rows([_capacity_row(b) for b in blocks], MAX_CAPACITY_ROWS, "capacity blocks")
        parts.append(
            "Capacity blocks (STRICT reservations):\n\n"
            + _table(
                ["Block", "Region", "Platform", "Fabric", "Needed GPUs", "Free GPUs", "Status"],
                rows,
                [":--", ":--", ":--", ":--", "--:", "--:", ":--"],
            )
            + more
            + "\n"
        )
    for error in (preflight.get("errors") or [])[:20]:
        parts.append(f"- ❌ {md(error, MAX_MESSAGE_CHARS)}\n")
    for note in (preflight.get("notes") or [])[:20]:
        parts.append(f"- note: {md(note, MAX_MESSAGE_CHARS)}\n")
    return "".join(parts).rstrip("\n") + "\n\n"


# ----------------------------------------------------------------------------------------- details

_OP_LABEL = {
    "delete": "➖ delete",
    "replace": "🔁 replace",
    "update": "✏️ update",
    "create": "➕ create",
    "import": "📥 import",
}
_OP_RANK = {
    "delete": 0,
    "delete-replaced": 0,
    "replace": 1,
    "create-replacement": 1,
    "update": 2,
    "create": 3,
}
# A replacement is reported as several engine steps for one resource; `replace` stands for all of them.
_REPLACEMENT_STEPS = {"create-replacement", "delete-replaced", "discard-replaced", "import-replacement"}


def _diff_rows(diff: list[dict[str, Any]]) -> list[dict[str, Any]]:
    replaced = {d.get("urn") for d in diff if d.get("op") == "replace"}
    seen: set[tuple[Any, Any]] = set()
    rows = []
    for entry in diff:
        key = (entry.get("urn"), entry.get("op"))
        if key in seen or (entry.get("op") in _REPLACEMENT_STEPS and entry.get("urn") in replaced):
            continue
        if entry.get("op") == "create" and str(entry.get("type") or "").startswith("pulumi:providers:"):
            continue  # a new stack's provider instance is plumbing, not a change a reviewer weighs
        seen.add(key)
        rows.append(entry)
    return sorted(rows, key=lambda d: _OP_RANK.get(str(d.get("op")), 4))


def _diff_table(diff: list[dict[str, Any]]) -> str:
    rows = _diff_rows(diff)
    shown = rows[:MAX_DIFF_ROWS]
    table_rows = []
    for entry in shown:
        op = str(entry.get("op") or "")
        props = [str(p) for p in entry.get("diffs") or []]
        prop_cell = ", ".join(code(p, 80) for p in props[:MAX_PROPERTIES]) or "·"
        if len(props) > MAX_PROPERTIES:
            prop_cell += f" +{len(props) - MAX_PROPERTIES} more"
        table_rows.append(
            [
                _OP_LABEL.get(op, md(op)),
                code(_resource_name(str(entry.get("urn") or ""))),
                code(_short_type(str(entry.get("type") or ""))),
                prop_cell,
            ]
        )
    text = f"**Resource changes** ({len(rows)})\n\n" + _table(
        ["Op", "Resource", "Type", "Changed properties"], table_rows, [":--", ":--", ":--", ":--"]
    )
    if len(rows) > len(shown):
        text += f"\n_… and {len(rows) - len(shown)} more resource changes (see the JSON)._\n"
    return text


def _violations(violations: list[PolicyViolation]) -> str:
    ranked = sorted(violations, key=lambda v: {"mandatory": 0, "advisory": 1}.get(v.level.lower(), 2))
    lines = ["**Policy violations**", ""]
    for v in ranked[:MAX_VIOLATIONS]:
        pack = f" ({code(v.pack)})" if v.pack else ""
        on = f" on {code(_resource_name(v.resource))}" if v.resource else ""
        level = v.level.lower()
        lines.append(
            f"- {_LEVEL_ICON.get(level, '•')} **{md(level)}** {code(v.policy)}{pack}{on}: "
            f"{md(v.message, MAX_MESSAGE_CHARS)}"
        )
    if len(ranked) > MAX_VIOLATIONS:
        lines.append(f"- … and {len(ranked) - MAX_VIOLATIONS} more (see the JSON)")
    return "\n".join(lines) + "\n"


def _detail_summary(stack: StackResult) -> str:
    counts = [f"{op} {_count(stack.changes, op)}" for op in COUNT_OPS if _count(stack.changes, op)]
    levels = [
        f"{_LEVEL_ICON.get(lv, '•')} {n} {html_text(lv)}"
        for lv, n in _ordered_levels(_level_counts(stack.policy))
    ]
    status = _STATUS_LABEL.get(stack.status, html_text(stack.status))
    disruption = (stack.disruption or {}).get("class")
    marks = (
        ["⚠️ disruptive"] if disruption == "disruptive" else ["in-place"] if disruption == "in-place" else []
    )
    bits = " · ".join([status, *([", ".join(counts)] if counts else []), *marks, *levels])
    return f"<summary>{html_code(stack.stack)} — {bits}</summary>"


def has_details(stack: StackResult) -> bool:
    return bool(
        stack.diff or stack.policy or stack.error or stack.terraform or stack.disruption or stack.pending
    )


def _pending_section(pending: dict[str, Any]) -> str:
    """What an `up` now would leave pending for a maintenance window, and when it may next go."""
    lines = [f"**Pending a maintenance window**: {md(pending.get('reason'), MAX_MESSAGE_CHARS)}", ""]
    lines += [
        f"- {code(c.get('resource'))} ({md(c.get('held_by'))}): {md(c.get('reason'), MAX_MESSAGE_CHARS)}"
        for c in (pending.get("changes") or [])[:MAX_DISRUPTION_ROWS]
    ]
    return "\n".join(lines) + "\n"


MAX_DISRUPTION_ROWS = 10


def _disruption_section(disruption: dict[str, Any]) -> str:
    """Why a stack's changes are disruptive or in-place, disruptive reasons first."""
    reasons = list(disruption.get("reasons") or [])
    label = "⚠️ **disruptive**" if disruption.get("class") == "disruptive" else "in-place"
    lines = [f"**Disruption**: {label}", ""]
    lines += [
        f"- {md(r.get('class'))}: {code(r.get('resource'))}: {md(r.get('reason'), MAX_MESSAGE_CHARS)}"
        for r in reasons[:MAX_DISRUPTION_ROWS]
    ]
    if len(reasons) > MAX_DISRUPTION_ROWS:
        lines.append(f"- … and {len(reasons) - MAX_DISRUPTION_ROWS} more (see the JSON)")
    return "\n".join(lines) + "\n"


MAX_TERRAFORM_ROWS = 20
MAX_TERRAFORM_ATTRIBUTES = 4


def _destructive(stack: StackResult) -> list[dict[str, Any]]:
    return [r for r in (stack.terraform or {}).get("resources") or [] if r.get("destructive")]


def replaced_node_groups(stacks: list[StackResult]) -> int:
    """Node groups Terraform's plans will replace or delete, fleet-wide."""
    return sum(1 for s in stacks for r in _destructive(s) if r.get("kind") == "node_group")


def _value(value: Any) -> str:
    """An attribute value as Terraform would write it (strings bare, the rest as JSON: null, not None)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _attribute_cell(attributes: list[dict[str, Any]]) -> str:
    shown = [
        f"{code(a.get('name'), 60)}: {code(_value(a.get('before')), 60)} → {code(_value(a.get('after')), 60)}"
        for a in attributes[:MAX_TERRAFORM_ATTRIBUTES]
    ]
    if len(attributes) > MAX_TERRAFORM_ATTRIBUTES:
        shown.append(f"… {len(attributes) - MAX_TERRAFORM_ATTRIBUTES} more")
    return "; ".join(shown) or "-"


def _terraform_section(plan: dict[str, Any], compact: bool) -> str:
    """Terraform's own plan: counts, then (full form) each resource, destructive ones first."""
    if plan.get("error") or plan.get("skipped"):
        return f"**Terraform plan**: {md(plan.get('error') or plan.get('skipped'), MAX_MESSAGE_CHARS)}\n"
    counts = ", ".join(f"{plan.get(k, 0)} to {k}" for k in ("add", "change", "destroy", "replace"))
    resources = sorted(plan.get("resources") or [], key=lambda r: not r.get("destructive"))
    text = f"**Terraform plan**: {counts}\n"
    if compact:
        destructive = [r for r in resources if r.get("destructive")]
        if destructive:
            text += (
                "\n"
                + "\n".join(
                    f"- ⚠️ destructive {md(r.get('action'))} {code(r.get('address'))}"
                    for r in destructive[:MAX_TERRAFORM_ROWS]
                )
                + "\n"
            )
        return text
    rows = [
        [
            md(r.get("action")) + (" ⚠️ **destructive**" if r.get("destructive") else ""),
            code(r.get("address")),
            _attribute_cell(list(r.get("attributes") or [])),
            md((r.get("disruption") or {}).get("class", "-")),
        ]
        for r in resources[:MAX_TERRAFORM_ROWS]
    ]
    if rows:
        text += "\n" + _table(
            ["Action", "Terraform address", "Changed attributes", "Class"],
            rows,
            [":--", ":--", ":--", ":--"],
        )
    if len(resources) > MAX_TERRAFORM_ROWS:
        text += f"\n_… and {len(resources) - MAX_TERRAFORM_ROWS} more Terraform resources (see the JSON)._\n"
    return text


def stack_details(stack: StackResult, with_diff: bool = True) -> str:
    """One collapsible block. Without `with_diff` it is the compact form: error and violations only."""
    body: list[str] = []
    if stack.error:
        body += ["**Error**", "", pre(stack.error), ""]
    if stack.retry_command:
        body += [f"Retry: {code(stack.retry_command, MAX_MESSAGE_CHARS)}", ""]
    if stack.policy:
        body += [_violations(stack.policy)]
    if stack.disruption and stack.disruption.get("class") in ("disruptive", "in-place"):
        body += [_disruption_section(stack.disruption)]
    if stack.pending:
        body += [_pending_section(stack.pending)]
    if stack.terraform:
        body += [_terraform_section(stack.terraform, compact=not with_diff)]
    if stack.diff and with_diff:
        body += [_diff_table(stack.diff)]
    elif stack.diff:
        changes = len(_diff_rows(stack.diff))
        body += [f"_Resource-level diff ({changes} changes) trimmed for size; see the JSON._\n"]
    inner = "\n".join(body).rstrip("\n")
    # The blank line after <summary> lets GitHub render the markdown inside the HTML block.
    return f"<details>\n{_detail_summary(stack)}\n\n{inner}\n\n</details>\n"


def _detail_priority(stack: StackResult) -> int:
    if stack.failed or stack.error:
        return 0
    if any(v.level.lower() == "mandatory" for v in stack.policy):
        return 1
    if (
        _count(stack.changes, "replace")
        or _count(stack.changes, "delete")
        or any(d.get("op") in ("replace", "delete") for d in stack.diff)
        or _destructive(stack)
    ):
        return 2
    return 3 if stack.policy else 4


# ----------------------------------------------------------------------------------------- fitting


def size(text: str) -> int:
    """What the budget counts: UTF-8 bytes, an upper bound of what GitHub counts."""
    return len(text.encode("utf-8"))


@dataclass
class Trim:
    """What was left out, so the notice can say exactly that."""

    details_total: int = 0
    details_omitted: int = 0
    diffs_omitted: int = 0
    rows_omitted: int = 0  # unchanged stacks not listed in the project tables
    collapsed: bool = False
    projects_omitted: int = 0

    @property
    def any(self) -> bool:
        return bool(self.details_omitted or self.diffs_omitted or self.rows_omitted or self.collapsed)


def trim_notice(trim: Trim) -> str:
    parts = []
    if trim.details_omitted:
        parts.append(f"details of {trim.details_omitted} of {trim.details_total} stacks omitted")
    if trim.diffs_omitted:
        more = "more " if trim.details_omitted else ""
        parts.append(
            f"resource-level diffs and Terraform plan tables of {trim.diffs_omitted} {more}stacks omitted "
            "(errors, violations and destructive Terraform changes shown)"
        )
    if trim.rows_omitted:
        parts.append(f"{trim.rows_omitted} unchanged stacks left out of the project tables")
    if trim.collapsed:
        parts.append("project tables collapsed to one row per project")
    if trim.projects_omitted:
        parts.append(f"{trim.projects_omitted} projects left out of that table")
    order = (
        "Details are kept in this order: failed stacks, mandatory policy violations, replacements and "
        "deletions, then the rest. "
        if trim.details_omitted or trim.diffs_omitted
        else ""
    )
    return (
        f"> ✂️ **Trimmed to fit GitHub's {COMMENT_LIMIT:,}-character comment limit:** {'; '.join(parts)}. "
        f"{order}The full preview is in the JSON (`--json-out`; in CI, the workflow artifact).\n"
    )


def _fit_details(stacks: list[StackResult], room: int, trim: Trim) -> list[str]:
    """Choose each stack's block (full, compact, or none) within `room` bytes, most important first.

    Two passes, because one failed stack's 40-row diff is worth less to a reviewer than the errors and
    violations of every other failed stack: first every stack with an error or a violation gets its compact
    block (no diff table), then blocks are upgraded to full, or added, in priority order while room lasts.
    """
    candidates = sorted((s for s in stacks if has_details(s)), key=_detail_priority)  # stable: fleet order
    trim.details_total = len(candidates)
    chosen: dict[int, str] = {}
    compact: set[int] = set()

    def take(index: int, block: str) -> bool:
        nonlocal room
        cost = size(block) + 1 - (size(chosen[index]) + 1 if index in chosen else 0)
        if cost > room:
            return False
        chosen[index] = block
        room -= cost
        return True

    for index, stack in enumerate(candidates):
        # Without a diff the compact block is the whole block.
        if (
            (stack.error or stack.policy or _destructive(stack))
            and take(index, stack_details(stack, with_diff=False))
            and (stack.diff or stack.terraform)
        ):
            compact.add(index)
    for index, stack in enumerate(candidates):
        if take(index, stack_details(stack)):
            compact.discard(index)
    trim.details_omitted = len(candidates) - len(chosen)
    trim.diffs_omitted = len(compact)
    return [chosen[i] for i in sorted(chosen)]


def _assemble(head: str, notice: str, tables: str, preflight: str, details: list[str]) -> str:
    sections = [head, notice, tables, preflight]
    if details:
        sections.append("#### Stack details\n\n" + "\n".join(details))
    return "\n\n".join(s.strip("\n") for s in sections if s) + "\n"


def render_preview_markdown(result: FleetResult, budget: int = DEFAULT_BUDGET, extra: str = "") -> str:
    """The fleet-wide preview document, at most `budget` UTF-8 bytes; `extra` (already escaped and bounded:
    the cost section) follows the header."""
    head = _header(result) + ("\n" + extra if extra else "")
    preflight = preflight_section(result.preflight) + rollout_section(result.rollout)
    groups = group_by_project(result.stacks)

    # Trim details first; only when the tables alone cannot fit are they collapsed, step by step.
    layouts: list[tuple[str, Trim]] = []
    full_tables, _ = _project_tables(groups, changed_only=False)
    layouts.append((full_tables, Trim()))
    changed_tables, quiet = _project_tables(groups, changed_only=True)
    if quiet:
        layouts.append((changed_tables, Trim(rows_omitted=quiet)))
    overview, _ = _overview_table(groups, max_rows=len(groups))
    layouts.append((overview, Trim(collapsed=True)))

    for tables, base in layouts:
        fixed = size(_assemble(head, "", tables, preflight, []))
        reserve = NOTICE_RESERVE
        while budget - fixed - reserve >= 0:
            trim = replace(base)
            details = _fit_details(result.stacks, budget - fixed - reserve, trim)
            document = _assemble(head, trim_notice(trim) if trim.any else "", tables, preflight, details)
            if size(document) <= budget:
                return document
            # The reserve is an estimate (notice and separators); refit with the overshoot held back too.
            reserve += size(document) - budget
    return _last_resort(head, preflight, groups, budget, result.stacks)


def _last_resort(
    head: str, preflight: str, groups: list[ProjectGroup], budget: int, stacks: list[StackResult]
) -> str:
    """Even one row per project is too long: list as many projects (worst first) as fit."""
    trim = Trim(collapsed=True, details_total=sum(1 for s in stacks if has_details(s)))
    trim.details_omitted = trim.details_total
    fixed = size(_assemble(head, "", "", preflight, []))
    room = max(budget - fixed - NOTICE_RESERVE, 0)
    low, high = 0, len(groups)
    while low < high:  # the largest row count that fits
        mid = (low + high + 1) // 2
        if size(_overview_table(groups, mid)[0]) <= room:
            low = mid
        else:
            high = mid - 1
    tables, omitted = _overview_table(groups, low)
    trim.projects_omitted = omitted
    document = _assemble(head, trim_notice(trim), tables, preflight, [])
    if size(document) > budget:
        # Unreachable with the per-section bounds above; kept so the limit holds whatever the input.
        document = document.encode("utf-8")[: budget - 200].decode("utf-8", "ignore").rsplit("\n", 1)[0]
        document += "\n\n_… cut at the comment limit; the full preview is in the JSON._\n"
    return document
