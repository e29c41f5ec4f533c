"""Offline spec commands: `plan`, `tfvars`, `schema`. None of them calls a cloud."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
from rich.text import Text

from npa_pulumi.cli.common import output_option, run_guarded, stderr_console
from npa_pulumi.cli.cost_commands import prices_option
from npa_pulumi.cli.fleet_options import k8s_training_dir_option, with_recipe_aliases
from npa_pulumi.cli.rollout_options import rollout_options, rollout_policy
from npa_pulumi.errors import NpaError, UserInputError
from npa_pulumi.output.streams import emit_json
from npa_pulumi.plan.document import plan_document
from npa_pulumi.plan.prices import load_catalog
from npa_pulumi.plan.recipe_surface import IDENTITY_VARIABLES, RECIPE_VARIABLES, read_recipe_variables
from npa_pulumi.plan.targets import Target, resolve_targets
from npa_pulumi.plan.text import render_plan_text
from npa_pulumi.plan.tfvars import render_tfvars
from npa_pulumi.spec.models import FleetSpec
from npa_pulumi.spec.parse import load_spec
from npa_pulumi.spec.schema import fleet_json_schema

_SPEC_HELP = "The npa.fleet/v0.0.1 spec file."


def _spec_option(func: Any) -> Any:
    return click.option("--spec", "-f", "spec_path", type=click.Path(path_type=Path), help=_SPEC_HELP)(func)


def _guarded(body: Callable[[], int], output: str = "text") -> None:
    """run_guarded, printing text-mode errors as plain text: a spec problem quotes user-written keys and
    values, and those must never be read as rich markup (`[/bold]` in a key would crash the printer)."""

    def safely() -> int:
        try:
            return body()
        except NpaError as err:
            if output == "json":
                raise  # emitted as JSON by run_guarded; no markup involved
            stderr_console.print(Text.assemble(("error: ", "bold red"), str(err)), soft_wrap=True)
            return err.exit_code

    run_guarded(safely, output)


def _load(spec_path: Path | None) -> FleetSpec:
    if spec_path is None:
        raise UserInputError("--spec is required (the fleet spec file)")
    return load_spec(spec_path)


@click.command("plan")
@_spec_option
@output_option("text", "json")
@click.option(
    "--only-projects",
    multiple=True,
    metavar="KEY[,KEY]",
    help="Only these projects (key or display name). Repeatable or comma-separated.",
)
@click.option(
    "--only-clusters",
    multiple=True,
    metavar="NAME[,NAME]",
    help="Only these clusters of the selected projects. Repeatable or comma-separated.",
)
@click.option("--project-prefix", default=None, help="Override the spec's project_prefix for display names.")
@prices_option
@rollout_options
def plan_command(
    spec_path: Path | None,
    output: str,
    only_projects: Sequence[str],
    only_clusters: Sequence[str],
    project_prefix: str | None,
    prices: str | None,
    **rollout_flags: Any,
) -> None:
    """Show what the fleet would deploy and what it costs (offline; no cloud calls)."""

    def body() -> int:
        spec = _load(spec_path)
        targets = resolve_targets(spec, only_projects, only_clusters, project_prefix, checked=True)
        document = plan_document(
            spec, targets, project_prefix, load_catalog(prices), rollout_policy(spec, rollout_flags)
        )
        if output == "json":
            emit_json(document)
        else:
            sys.stdout.write(render_plan_text(document))
        return 0

    _guarded(body, output)


def _default_recipe_variables() -> set[str]:
    """What a deployment renders for: the default recipe's variables where this machine has the recipe
    (never fetched for a print); else the renderer's whole surface, with a note, since the default recipe
    leaves some of it undeclared and a deployment would leave those out."""
    from npa_pulumi.bridge.recipe import MIRROR_ENV, default_recipe_variables
    from npa_pulumi.runtime.home import cache_dir

    declared = default_recipe_variables(cache_dir())
    if declared is not None:
        return declared
    stderr_console.print(
        f"the default recipe is not on this machine (set {MIRROR_ENV}, or run `up` once): showing every "
        "variable the renderer can emit; a deployment leaves out those the recipe does not declare",
        markup=False,
        soft_wrap=True,
    )
    return set(RECIPE_VARIABLES)


@click.command("tfvars")
@_spec_option
@click.option(
    "--project", "project", default=None, help="Project key or display name (optional with one project)."
)
@click.option("--cluster", "cluster", default=None, help="Cluster name (optional when the project has one).")
@click.option(
    "--recipe-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="A k8s-training root module (or a checkout holding k8s-training/) whose variables.tf decides "
    "which variables are emitted. Default: the default recipe's (upstream k8s-training at the pinned "
    "commit with npa-pulumi's override files), read from $NPA_K8S_TRAINING_MIRROR or the checkout an earlier "
    "run cached; without either, every variable the renderer can emit (a note on stderr says so).",
)
@k8s_training_dir_option(click.Path(path_type=Path))
@click.option("--project-prefix", default=None, help="Override the spec's project_prefix.")
@with_recipe_aliases
def tfvars_command(
    spec_path: Path | None,
    project: str | None,
    cluster: str | None,
    recipe_dir: Path | None,
    project_prefix: str | None,
) -> None:
    """Print the terraform.tfvars.json one cluster would be applied with.

    Runtime-only variables (a capacity-block reservation) are named on stderr with masked values: they are
    passed as TF_VAR_* at deploy time and never written to disk. Identity is never part of tfvars.
    """

    def body() -> int:
        spec = _load(spec_path)
        target = _single_target(spec, project, cluster, project_prefix)
        variables = (
            read_recipe_variables(recipe_dir) if recipe_dir is not None else _default_recipe_variables()
        )
        rendered = render_tfvars(target, variables, ssh_public_key=spec.ssh_public_key or None)
        sys.stdout.write(json.dumps(rendered.file_vars, indent=2) + "\n")
        sys.stdout.flush()
        for name, value in rendered.runtime_vars.items():
            stderr_console.print(
                f"runtime variable TF_VAR_{name} (passed at deploy, never written): "
                f"{json.dumps(_masked(value))}",
                markup=False,
                soft_wrap=True,
            )
        if rendered.omitted:
            stderr_console.print(
                f"not declared by the recipe, left out: {', '.join(rendered.omitted)}",
                markup=False,
                soft_wrap=True,
            )
        stderr_console.print(
            "identity is supplied at deploy as " + ", ".join(f"TF_VAR_{name}" for name in IDENTITY_VARIABLES),
            markup=False,
            soft_wrap=True,
        )
        return 0

    _guarded(body)


def _single_target(
    spec: FleetSpec, project: str | None, cluster: str | None, project_prefix: str | None
) -> Target:
    targets = resolve_targets(
        spec, [project] if project else [], [cluster] if cluster else [], project_prefix
    )
    if len(targets) != 1:
        choices = ", ".join(f"--project {t.project_key} --cluster {t.cluster_name}" for t in targets)
        raise UserInputError(f"{len(targets)} clusters match; choose one: {choices}")
    return targets[0]


def _masked(value: Any) -> Any:
    """Keep the shape, hide every id (a capacity block id must never reach a terminal or a log)."""
    if isinstance(value, dict):
        return {key: item if key == "policy" else _masked(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_masked(item) for item in value]
    return "****" if isinstance(value, str) else value


@click.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of the fleet spec (for yaml-language-server and other editors)."""
    run_guarded(lambda: emit_json(fleet_json_schema()), "json")


def register(group: click.Group) -> None:
    group.add_command(plan_command)
    group.add_command(tfvars_command)
    group.add_command(schema_command)
