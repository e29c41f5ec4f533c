"""`up` (alias `deploy`), `preview` and `preview-merge`: each builds its typed request and calls the SDK."""

from __future__ import annotations

from typing import Any

import click

from npa_pulumi.cli.common import output_option, run_guarded
from npa_pulumi.cli.cost_commands import prices_option
from npa_pulumi.cli.fleet_options import (
    break_lock_option,
    fleet_fields,
    fleet_options,
    policy_options,
    rollout,
    selection,
    shard_option,
    stage_option,
)
from npa_pulumi.cli.fleet_output import approver, finish, nothing_to_do
from npa_pulumi.cli.retry_commands import render_retry
from npa_pulumi.cli.rollout_options import ignore_maintenance_option, rollout_options
from npa_pulumi.cli.timeline_option import timeline_option, timeline_sections
from npa_pulumi.cli.upgrade_commands import force_option
from npa_pulumi.errors import UserInputError


def _preview_fields(kw: dict[str, Any]) -> dict[str, Any]:
    """What `up` and `preview` both take (PreviewRequest's own fields; UpRequest extends it)."""
    from npa_pulumi.sdk.requests import Policies

    return {
        "preflight": kw["preflight"],
        "policies": Policies(packs=tuple(kw["policy_packs"]), config=kw["policy_config"]),
        "refresh": kw["refresh"],
        "prices": kw["prices"],
        "rollout": rollout(kw),
    }


@click.command("up")
@fleet_options
@output_option()
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--continue-on-error/--fail-fast",
    default=True,
    show_default=True,
    help="Keep deploying other targets after one fails, or stop scheduling new ones.",
)
@click.option(
    "--preflight/--no-preflight",
    default=True,
    show_default=True,
    help="Check quota and reserved capacity for the whole selection before any change.",
)
@click.option(
    "--create-projects/--no-create-projects",
    default=True,
    show_default=True,
    help="Create missing named projects (prefix + name); with --no-create-projects a missing one stops the "
    "whole run before any change.",
)
@click.option(
    "--refresh",
    is_flag=True,
    help="Run every stack, even those deployed from the same spec whose live objects match, refreshing "
    "each from the cloud first (Pulumi's refresh; the Terraform bridge runs terraform refresh and plan).",
)
@click.option(
    "--health-gate/--no-health-gate",
    default=True,
    show_default=True,
    help="Deployed only once the GPU health gate passes; --no-health-gate records validation 'skipped'.",
)
@force_option
@policy_options
@shard_option
@stage_option
@break_lock_option
@prices_option
@rollout_options
@ignore_maintenance_option
def up_command(**kw: Any) -> None:
    """Deploy the fleet: project stacks first, then cluster stacks in parallel."""

    def body() -> int:
        from npa_pulumi.sdk import operations as sdk
        from npa_pulumi.sdk.requests import UpRequest

        chosen = selection(kw)
        request = UpRequest(
            **fleet_fields(kw, chosen),
            **_preview_fields(kw),
            fail_fast=not kw["continue_on_error"],
            create_projects=kw["create_projects"],
            health_gate=kw["health_gate"],
            break_lock=kw["break_lock"],
            force=kw["force"],
        )
        selected = sdk.select(kw["spec_path"], chosen)
        if not selected.targets:
            return nothing_to_do("up", selected, request, kw["output"])
        return finish(sdk.deploy(selected, request, approver(kw["yes"]), render_retry), kw["output"])

    run_guarded(body, kw["output"])


@click.command("preview")
@fleet_options
@output_option("text", "json", "markdown", "html")
@click.option(
    "--out",
    "out_file",
    default=None,
    type=click.Path(dir_okay=False),
    help="Write the text/markdown/json document to this file instead of stdout.",
)
@click.option(
    "--json-out",
    default=None,
    type=click.Path(dir_okay=False),
    help="Also write the full JSON result to this file.",
)
@click.option(
    "--preflight/--no-preflight",
    default=True,
    show_default=True,
    help="Also report whether quota and reserved capacity fit (read-only).",
)
@policy_options
@shard_option
@stage_option
@click.option(
    "--refresh",
    is_flag=True,
    help="Run Terraform's own plan for every cluster stack, not only those whose bridge inputs changed.",
)
@prices_option
@rollout_options
@timeline_option
@ignore_maintenance_option
def preview_command(**kw: Any) -> None:
    """Show what `up` would change, per stack, with policy results."""

    def body() -> int:
        from npa_pulumi.output.documents import write_preview
        from npa_pulumi.plan import plan_document
        from npa_pulumi.sdk import operations as sdk
        from npa_pulumi.sdk.requests import PreviewRequest

        chosen = selection(kw)
        if kw["timeline"] and kw["output"] != "html":
            raise UserInputError("--timeline draws on the page: it goes with --output html")
        sections = timeline_sections(kw["timeline"])  # bad input before any engine runs
        request = PreviewRequest(**fleet_fields(kw, chosen), **_preview_fields(kw))
        selected = sdk.select(kw["spec_path"], chosen)
        if not selected.targets and kw["output"] != "markdown" and not kw["out_file"]:
            return nothing_to_do("preview", selected, request, kw["output"])
        result = sdk.preview(selected, request)
        plan = (
            plan_document(selected.spec, selected.targets, chosen.prefix) if kw["output"] == "html" else None
        )
        return write_preview(result, kw["output"], kw["out_file"], kw["json_out"], plan, sections)

    run_guarded(body, kw["output"])


@click.command("preview-merge")
@click.argument("documents", nargs=-1, type=click.Path(dir_okay=False))
@output_option("json", "markdown", default="json")
@click.option(
    "--spec",
    "-f",
    "spec_path",
    default=None,
    type=click.Path(dir_okay=False),
    help="The fleet spec: stacks are listed in its order, as an unsharded preview lists them.",
)
@click.option(
    "--preflight",
    "preflight_file",
    default=None,
    type=click.Path(dir_okay=False),
    help="A whole-fleet report (`npa-pulumi preflight --output json`) to show instead of none.",
)
@click.option(
    "--out",
    "out_file",
    default=None,
    type=click.Path(dir_okay=False),
    help="Write the markdown/json document to this file instead of stdout.",
)
@click.option(
    "--json-out",
    default=None,
    type=click.Path(dir_okay=False),
    help="Also write the merged JSON result to this file.",
)
def preview_merge_command(**kw: Any) -> None:
    """Combine the JSON documents of `preview --shard K/N --output json` (every shard once) into one
    preview: the JSON an unsharded preview prints, or its markdown PR comment (within the comment limit).
    Exit 1 when a merged stack failed, as preview."""

    def body() -> int:
        from npa_pulumi.output.documents import write_preview
        from npa_pulumi.output.merge import merge_previews
        from npa_pulumi.sdk.operations import select

        documents = [_read_document(path) for path in kw["documents"]]
        preflight = _read_document(kw["preflight_file"]).body if kw["preflight_file"] else None
        if preflight is not None and not (isinstance(preflight, dict) and "requirements" in preflight):
            raise UserInputError(
                f"--preflight {kw['preflight_file']}: not a `npa-pulumi preflight --output json` report"
            )
        order = None
        if kw["spec_path"]:
            targets = select(kw["spec_path"]).targets
            order = list(dict.fromkeys(s for t in targets for s in (t.project_stack, t.cluster_stack)))
        merged = merge_previews(documents, order, preflight)
        return write_preview(merged, kw["output"], kw["out_file"], kw["json_out"])

    run_guarded(body, kw["output"])


def _read_document(path: str) -> Any:
    """A JSON file as a merge input; unreadable or not JSON is bad input (exit 2), named."""
    import json
    from pathlib import Path

    from npa_pulumi.output.merge import PreviewDocument

    try:
        return PreviewDocument(path, json.loads(Path(path).read_text()))
    except OSError as err:
        raise UserInputError(f"{path}: cannot be read: {err.strerror or err}") from None
    except ValueError as err:
        raise UserInputError(f"{path}: not JSON ({err})") from None


def register(group: click.Group) -> None:
    group.add_command(up_command)
    group.add_command(up_command, name="deploy")
    group.add_command(preview_command)
    group.add_command(preview_merge_command)
