"""Human-readable (text) renderings of fleet results, printed to stdout."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from npa_pulumi.output.results import FleetResult, drain_lines
from npa_pulumi.output.streams import stdout_console
from npa_pulumi.spec.durations import describe

_STYLE = {
    "deployed": "green",
    "unchanged": "dim",
    "destroyed": "green",
    "absent": "dim",
    "no-changes": "dim",
    "changes": "yellow",
    "provisioning": "yellow",
    "validating-gpu-health": "yellow",
    "validating-mig": "yellow",
    "validating-fabric": "yellow",
    "validating-cluster-basics": "yellow",
    "validating-kuberay": "yellow",
    "ready": "green",
    "not-ready": "red",
    "drifted": "yellow",
    "in-sync": "green",
    "failed": "red",
    "destroy-incomplete": "red",
    "status-error": "red",
    "skipped": "yellow",
    "held": "yellow",
    "pending": "yellow",
    "not-supported": "yellow",
    "not-deployable": "red",
}


def _stdout() -> Console:
    return stdout_console()


def _changes(changes: dict[str, int]) -> str:
    shown = [f"{op} {n}" for op, n in sorted(changes.items()) if n and op != "same"]
    return ", ".join(shown) or "-"


def ray_readiness(ray: dict[str, Any]) -> str:
    """`ray: ready, 2/2 workers, head ready` (or what is missing)."""
    state = "ready" if ray.get("ready") else "not ready"
    head = "head ready" if ray.get("head_ready") else "head not ready"
    return f"ray: {state}, {ray.get('ready_workers', 0)}/{ray.get('desired_workers', 0)} workers, {head}"


def print_fleet_result(result: FleetResult, console: Console | None = None) -> None:
    console = console or _stdout()
    table = Table(title=f"{result.command}: fleet {result.fleet} ({result.cloud})", title_justify="left")
    for column in ("stack", "status", "changes", "cluster id", "kube context"):
        table.add_column(column)
    for stack in result.stacks:
        style = _STYLE.get(stack.status, "")
        status = f"[{style}]{stack.status}[/]" if style else stack.status
        if stack.validation:
            status += f" (validation: {stack.validation})"
        if stack.kuberay:
            status += f"\n{ray_readiness(stack.kuberay)}"
        table.add_row(
            stack.stack, status, _changes(stack.changes), stack.cluster_id or "-", stack.kube_context or "-"
        )
    if result.stacks or not result.phases:  # a dry run's teardown has phases only
        console.print(table)
    for stack in result.stacks:
        for violation in stack.policy:
            console.print(
                f"[yellow]policy[/] {stack.stack}: {escape(f'[{violation.level}]')} "
                f"{escape(violation.policy)}: {escape(violation.message)}",
                soft_wrap=True,
            )
        if stack.terraform:
            _print_terraform(console, stack.stack, stack.terraform)
        if stack.disruption and stack.disruption.get("class") in ("disruptive", "in-place"):
            print_disruption(console, stack.stack, stack.disruption)
        if stack.versions:
            groups = ", ".join(
                f"{n} {v or '?'}" for n, v in (stack.versions.get("node_groups") or {}).items()
            )
            console.print(
                f"{escape(stack.stack)}: Kubernetes {escape(str(stack.versions.get('control_plane') or '?'))}"
                + (f"; node groups {escape(groups)}" if groups else ""),
                soft_wrap=True,
            )
        if stack.pending:
            print_pending(console, stack.stack, stack.pending)
        if stack.error:
            console.print(f"[red]{stack.stack}[/]: {escape(stack.error)}", soft_wrap=True, markup=True)
        if stack.retry_command:
            console.print(f"  retry: {stack.retry_command}", soft_wrap=True, markup=False)
    if result.phases:
        print_teardown_phases(result, console)
    if result.rollout:
        print_rollout(result.rollout, console)
    if result.error:
        console.print(f"[red]error:[/] {escape(result.error)}", soft_wrap=True)
    for violation in result.policy:
        console.print(
            f"[yellow]policy[/] fleet {escape(result.fleet)}: {escape(f'[{violation.level}]')} "
            f"{escape(violation.policy)}: {escape(violation.message)}",
            soft_wrap=True,
        )
    if result.cost:
        # Only a priced result loads the cost renderer (and the markdown and preflight report it shares).
        from npa_pulumi.output.cost_render import cost_text

        for line in cost_text(result.cost):
            console.print(line, soft_wrap=True, markup=False, highlight=False)
    totals = result.totals()
    summary = ", ".join(f"{k} {v}" for k, v in totals.items() if k not in ("stacks", "clusters", "failed"))
    console.print(f"{totals['stacks']} stack(s): {summary or 'nothing'}; failed {totals['failed']}")


def print_pending(console: Console, stack: str, pending: dict[str, Any]) -> None:
    """A deferred cluster: why, when its changes may next start, and each held change."""
    console.print(f"[yellow]{escape(stack)}[/]: {escape(str(pending.get('reason', '')))}", soft_wrap=True)
    for change in (pending.get("changes") or [])[:20]:
        console.print(
            f"  pending {escape(str(change.get('resource')))} \\[{escape(str(change.get('held_by')))}]: "
            f"{escape(str(change.get('reason')))}",
            soft_wrap=True,
        )


def print_rollout(rollout: dict[str, Any], console: Console) -> None:
    """A staged rollout's waves in order (each wave's clusters in the order they start), each wave's state
    when there is one, where it halted and the command that resumes it."""
    console.print(f"[bold]rollout[/] (halt on {escape(str(rollout.get('halt_on', '')))}):", soft_wrap=True)
    for wave in rollout.get("waves") or []:
        state = f" [{wave['state']}]" if wave.get("state") else ""
        reservations = wave.get("reservations") or {}
        names = ", ".join(
            f"{key} ({reservations[key]})" if key in reservations else key
            for key in wave.get("clusters") or []
        )
        rule = str(wave["rule"]) + (f", then soak {describe(wave['soak_s'])}" if wave.get("soak_s") else "")
        console.print(
            f"  wave {wave['wave']} ({escape(rule)}){escape(state)}: {escape(names or '-')}",
            soft_wrap=True,
        )
        for key, why in (wave.get("held") or {}).items():
            console.print(f"    [yellow]held[/] {escape(key)}: {escape(str(why))}", soft_wrap=True)
        for key, why in (wave.get("taken_under_maintenance") or {}).items():
            console.print(f"    taken under maintenance {escape(key)}: {escape(str(why))}", soft_wrap=True)
        soak = wave.get("soak")
        if soak:
            console.print(f"    soak: {escape(_soak_text(soak))}", soft_wrap=True)
    if rollout.get("health_error"):
        console.print(f"  {escape(str(rollout['health_error']))}", soft_wrap=True)
    halted = rollout.get("halted")
    if halted:
        console.print(
            f"[red]rollout halted at wave {halted['wave']}[/]: {escape(str(halted['reason']))}; later waves "
            "were not started",
            soft_wrap=True,
        )
    waiting = rollout.get("waiting")
    if waiting and not halted:
        console.print(
            f"[yellow]rollout waiting at wave {waiting['wave']}[/]: every cluster of it held; later waves "
            "were not started",
            soft_wrap=True,
        )
    if rollout.get("resume_command"):
        resume = rollout["resume_command"]
        console.print(f"resume it after a fix with: {resume}", soft_wrap=True, markup=False)


def _soak_text(soak: dict[str, Any]) -> str:
    if soak.get("skipped"):
        return f"skipped ({soak['skipped']})"
    reads = f"{soak.get('reads', 0)} health read(s) over {soak.get('elapsed_s', 0)}s"
    if soak.get("clean"):
        return f"clean ({reads})"
    problems = "; ".join(f"{k}: {v}" for k, v in (soak.get("problems") or {}).items())
    return f"not clean ({reads}): {problems}"


def print_teardown_phases(result: FleetResult, console: Console) -> None:
    """The teardown's phases in order: what each deletes (or deleted) and what it retains, and why."""
    title = "teardown plan (dry run: nothing changed)" if result.dry_run else "teardown"
    table = Table(title=title, title_justify="left")
    for column in ("phase", "outcome", "deletes", "retains", "why"):
        table.add_column(column)
    for phase in result.phases:
        reason = phase.reason or ""
        if phase.blocked_by:
            reason = f"blocked by {', '.join(phase.blocked_by)}: {reason}"
        table.add_row(
            escape(phase.name),
            escape(phase.status),
            escape(_ids(phase.deletes)),
            escape(_ids(phase.retains)),
            escape(reason),
        )
    console.print(table)
    for phase in result.phases:
        for line in drain_lines(phase.name, phase.drain) if phase.drain else []:
            console.print(line, soft_wrap=True, markup=False)
    for phase in result.phases:
        if phase.retry_command:
            console.print(f"  retry {phase.name}: {phase.retry_command}", soft_wrap=True, markup=False)
    if result.receipt:
        console.print(f"receipt {result.receipt_id}: {result.receipt}", soft_wrap=True, markup=False)
    if result.partial_cleanup:
        console.print(
            "PARTIAL CLEANUP: something this teardown was asked to delete is still there (exit 2)",
            style="bold red",
            soft_wrap=True,
            markup=False,
        )
    if result.resume_command:
        console.print(f"continue it with: {result.resume_command}", soft_wrap=True, markup=False)


def _ids(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items() if v not in ("", [], None)) or "-"


def _print_terraform(console: Console, stack: str, plan: dict[str, Any]) -> None:
    """Terraform's own plan for a cluster stack: counts, then each resource with its changed attributes."""
    if plan.get("error") or plan.get("skipped"):
        console.print(f"[yellow]terraform[/] {stack}: {escape(str(plan.get('error') or plan['skipped']))}")
        return
    counts = ", ".join(f"{plan.get(k, 0)} to {k}" for k in ("add", "change", "destroy", "replace"))
    console.print(f"[bold]terraform plan[/] {stack}: {counts}", soft_wrap=True)
    for resource in plan.get("resources") or []:
        flag = " [red]DESTRUCTIVE[/]" if resource.get("destructive") else ""
        if resource.get("reshape"):  # an update Terraform makes, that moves nodes to new groups
            flag += " (reshape: its nodes move to new node groups)"
        disruption = resource.get("disruption") or {}
        if disruption:
            flag += f" \\[{escape(str(disruption.get('class')))}: {escape(str(disruption.get('reason')))}]"
        console.print(f"  {resource['action']} {escape(resource['address'])}{flag}", soft_wrap=True)
        for attribute in resource.get("attributes") or []:
            before, after = json.dumps(attribute.get("before")), json.dumps(attribute.get("after"))
            console.print(
                f"      {escape(attribute['name'])}: {escape(before)} -> {escape(after)}", soft_wrap=True
            )


def print_disruption(console: Console, stack: str, disruption: dict[str, Any]) -> None:
    """A previewed stack's disruption class, disruptive reasons first (bridge/plan_summary.py)."""
    kind = str(disruption.get("class"))
    style = "bold red" if kind == "disruptive" else "green"
    console.print(f"[{style}]{kind}[/] {escape(stack)}", soft_wrap=True)
    for reason in (disruption.get("reasons") or [])[:20]:
        console.print(
            f"  {reason.get('class')}: {reason.get('resource')}: {reason.get('reason')}",
            soft_wrap=True,
            markup=False,
        )


def print_stack_list(stacks: list[dict[str, Any]], console: Console | None = None) -> None:
    console = console or _stdout()
    table = Table(title="npa-fleet stacks", title_justify="left")
    for column in ("name", "last update", "resources"):
        table.add_column(column)
    for stack in stacks:
        table.add_row(
            stack["name"] or "",
            str(stack.get("last_update") or "-"),
            str(stack.get("resource_count") if stack.get("resource_count") is not None else "-"),
        )
    console.print(table)
