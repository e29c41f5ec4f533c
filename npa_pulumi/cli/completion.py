"""Shell completion through click's own mechanism (`_NPA_PULUMI_COMPLETE=bash_source npa-pulumi`, or the
`completion` command): `--only-projects` and `--only-clusters` complete from the `--spec` already on the
command line (its project keys, and the clusters of the projects already chosen)."""

from __future__ import annotations

from typing import Any

import click
from click.shell_completion import CompletionItem

PROG = "npa-pulumi"
COMPLETE_VAR = "_NPA_PULUMI_COMPLETE"
SHELLS = ("bash", "zsh", "fish")


def _targets(ctx: click.Context) -> list[Any]:
    """The spec's targets, or none when it is not given yet or does not load (completion never fails)."""
    spec_path = ctx.params.get("spec_path")
    if not spec_path:
        return []
    try:
        from npa_pulumi.plan import resolve_targets
        from npa_pulumi.spec import load_spec

        return list(resolve_targets(load_spec(spec_path), [], [], None))
    except Exception:
        return []


def _items(incomplete: str, choices: list[str], help_of: dict[str, str]) -> list[CompletionItem]:
    """Completion of the last comma-separated item; the ones before it are kept as typed."""
    head, sep, last = incomplete.rpartition(",")
    taken = set(head.split(",")) if sep else set()
    prefix = head + sep
    return [
        CompletionItem(prefix + choice, help=help_of.get(choice))
        for choice in dict.fromkeys(choices)
        if choice.startswith(last) and choice not in taken
    ]


def _given(ctx: click.Context, name: str) -> list[str]:
    values = ctx.params.get(name) or ()
    return [item.strip() for value in values for item in str(value).split(",") if item.strip()]


def complete_projects(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    targets = _targets(ctx)
    keys = [t.project_key for t in targets]
    count: dict[str, int] = {}
    for key in keys:
        count[key] = count.get(key, 0) + 1
    return _items(incomplete, keys, {k: f"{n} cluster(s)" for k, n in count.items()})


def complete_clusters(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    projects = set(_given(ctx, "only_projects"))
    targets = [t for t in _targets(ctx) if not projects or t.project_key in projects]
    names = [t.cluster_name for t in targets]
    where: dict[str, list[str]] = {}
    for target in targets:
        where.setdefault(target.cluster_name, []).append(target.project_key)
    return _items(incomplete, names, {n: "in " + ", ".join(p) for n, p in where.items()})


def completion_source(shell: str, root: click.Command) -> str:
    """The script a shell sources to complete `npa-pulumi` (what `_NPA_PULUMI_COMPLETE=<shell>_source`
    prints)."""
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    if cls is None:
        raise click.BadParameter(f"unsupported shell {shell!r}; expected one of {', '.join(SHELLS)}")
    return cls(root, {}, PROG, COMPLETE_VAR).source()
