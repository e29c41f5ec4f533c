"""`up` (alias `deploy`), `preview`, `destroy`, `status`, `refresh` and `stacks`: the fleet engine's CLI."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from npa_pulumi.cli.common import output_option, run_guarded, stderr_console
from npa_pulumi.cli.completion import complete_clusters, complete_projects
from npa_pulumi.cli.cost_commands import prices_option
from npa_pulumi.cli.rollout_options import rollout_kw, rollout_options
from npa_pulumi.errors import EXIT_FAILED, EXIT_PARTIAL_CLEANUP, NpaError, UserInputError
from npa_pulumi.output.streams import emit_json

if TYPE_CHECKING:
    from npa_pulumi.engine.orchestrator import Fleet

F = TypeVar("F", bound=Callable[..., Any])


def _split(values: tuple[str, ...]) -> list[str]:
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def fleet_options(func: F) -> F:
    """Options every fleet command shares: the spec, the cloud, the backend and target selection."""
    return _fleet_options(func, spec_required=True)


def _fleet_options(func: F, spec_required: bool) -> F:
    decorators = [
        click.option(
            "--spec",
            "-f",
            "spec_path",
            required=spec_required,
            type=click.Path(dir_okay=False),
            help="The npa.fleet/v0.0.1 spec file."
            + ("" if spec_required else " Optional with --receipt (then only the guarded phases run)."),
        ),
        click.option(
            "--cloud",
            type=click.Choice(["local", "nebius"]),
            default="local",
            show_default=True,
            help="local: the embedded simulated cloud; nebius: the real API.",
        ),
        click.option(
            "--backend",
            default=None,
            metavar="URL",
            help="Pulumi backend (default: $PULUMI_BACKEND_URL, else file://~/.npa-pulumi/state).",
        ),
        click.option(
            "--passphrase-file",
            default=None,
            type=click.Path(dir_okay=False),
            help="Secrets passphrase file (default: generated once into ~/.npa-pulumi/passphrase).",
        ),
        click.option("--profile", default=None, help="~/.nebius profile; wins over the spec's profile."),
        click.option(
            "--only-projects",
            multiple=True,
            metavar="KEYS",
            help="Only these projects (key or display name; comma-separated or repeated).",
            shell_complete=complete_projects,
        ),
        click.option(
            "--only-clusters",
            multiple=True,
            metavar="NAMES",
            help="Only these clusters (comma-separated or repeated).",
            shell_complete=complete_clusters,
        ),
        click.option("--project-prefix", default=None, help="Override the spec's project_prefix."),
        click.option(
            "--recipe-dir",
            default=None,
            type=click.Path(file_okay=False),
            help="A local k8s-training checkout (library root or k8s-training/).",
        ),
        click.option(
            "--recipe-ref",
            default=None,
            metavar="REF",
            help="The upstream library at REF: a branch (resolved on every run), a tag or a full commit SHA.",
        ),
        click.option(
            "--soperator-recipe-dir",
            default=None,
            type=click.Path(file_okay=False),
            help="For soperator clusters: a local checkout of the library, its soperator/, or the "
            "installation directory (soperator/installations/example).",
        ),
        click.option(
            "--soperator-recipe-ref",
            default=None,
            metavar="REF",
            help="For soperator clusters: the upstream library at REF (branch, tag or full commit SHA).",
        ),
        click.option(
            "-j",
            "--concurrency",
            default=4,
            show_default=True,
            type=click.IntRange(1, 64),
            help="Cluster stacks processed at once.",
        ),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


shard_option = click.option(
    "--shard",
    default=None,
    metavar="K/N",
    help="Only the clusters shard K of N owns (rendezvous hashing of the cluster stack name: stable when "
    "clusters are added). Project stacks are shared, single-flight through their lock.",
)
stage_option = click.option(
    "--stage",
    type=click.Choice(["projects", "clusters"]),
    default=None,
    help="Only the project stacks (run once), or only the cluster stacks (shardable; their project stacks "
    "must be deployed). destroy: clusters stage first, then projects. Default: both, in order.",
)
break_lock_option = click.option(
    "--break-lock",
    is_flag=True,
    help="Take over stack locks held by a run on another machine that is known to be gone. Without it only "
    "a lock whose process is provably gone (on this machine) is recovered; a live local run's never is.",
)


def _load(
    spec_path: str,
    only_projects: tuple[str, ...],
    only_clusters: tuple[str, ...],
    project_prefix: str | None,
    shard: str | None = None,
    stage: str | None = None,
) -> tuple[Any, list[Any]]:
    from npa_pulumi.engine.options import check_stage
    from npa_pulumi.plan import resolve_targets
    from npa_pulumi.plan.shards import parse_shard, select_shard
    from npa_pulumi.spec import load_spec

    chosen = parse_shard(shard) if shard is not None else None  # bad input fails before the spec is read
    check_stage(stage, shard)
    spec = load_spec(spec_path)
    targets = resolve_targets(spec, _split(only_projects), _split(only_clusters), project_prefix)
    return spec, select_shard(targets, chosen)


def _shard_kw(kw: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """Engine options of a shardable command; --shard with --break-lock is refused: breaking a lock is a
    person's decision about one run, and in a matrix the holder is most likely a sibling shard."""
    if kw.get("shard") and kw.get("break_lock"):
        raise UserInputError(
            "--break-lock cannot be combined with --shard: recover a lock in an unsharded run"
        )
    from npa_pulumi.engine.options import check_stage

    check_stage(kw.get("stage"), kw.get("shard"))
    return _engine_options(
        kw,
        shard=kw.get("shard"),
        stage=kw.get("stage"),
        break_lock=kw.get("break_lock", False),
        **extra,
    )


def _nothing_to_do(command: str, spec: Any, kw: dict[str, Any]) -> int:
    """An empty selection (a shard that owns no cluster): still one JSON document with --output json."""
    stderr_console.print(
        "nothing to do" + (f" (shard {kw['shard']} owns no cluster)" if kw.get("shard") else "")
    )
    if kw["output"] == "json":
        from npa_pulumi.engine.automation.workspace import resolve_backend_url
        from npa_pulumi.output.results import FleetResult

        result = FleetResult(
            command=command,
            fleet=spec.name,
            cloud=kw["cloud"],
            backend=resolve_backend_url(kw["backend"]),
            shard=kw.get("shard"),
        )
        result.dry_run = bool(kw.get("dry_run", False))
        emit_json(result.to_json())
    return 0


def _fleet(spec: Any, targets: list[Any], options: dict[str, Any]) -> Fleet:
    from npa_pulumi.cli.cost_commands import check_cost_inputs
    from npa_pulumi.engine.orchestrator import Fleet, FleetOptions

    check_cost_inputs(options.get("prices"), options.get("policy_config"))  # bad input before any engine run
    return Fleet(spec, targets, FleetOptions(**options))


def _engine_options(kw: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "cloud": kw["cloud"],
        "profile": kw["profile"],
        "backend": kw["backend"],
        "passphrase_file": kw["passphrase_file"],
        "recipe_dir": kw["recipe_dir"],
        "recipe_ref": kw["recipe_ref"],
        "soperator_recipe_dir": kw.get("soperator_recipe_dir"),
        "soperator_recipe_ref": kw.get("soperator_recipe_ref"),
        "concurrency": kw["concurrency"],
        "spec_path": kw["spec_path"],
        **extra,
    }


class NotConfirmed(NpaError):
    """A mutating command that was not confirmed: nothing was done (exit 1, not 2: the input was valid)."""

    kind = "not-confirmed"


def confirm(banner: list[str], yes: bool, action: str) -> None:
    """Destructive or mutating commands ask first; without a terminal they refuse unless --yes."""
    for line in banner:
        stderr_console.print(line, markup=False, soft_wrap=True)
    if yes:
        return
    if not sys.stdin.isatty():
        raise NotConfirmed(
            f"refusing to {action} without --yes: this session is not interactive; nothing was changed"
        )
    if not click.confirm(f"Proceed to {action}?", default=False, err=True):
        raise NotConfirmed(f"aborted: did not {action}; nothing was changed")


def _banner(verb: str, spec: Any, targets: list[Any]) -> list[str]:
    projects = sorted({t.project_key for t in targets})
    lines = [
        f"About to {verb} fleet '{spec.name}': {len(targets)} cluster(s) across {len(projects)} project(s)."
    ]
    for target in targets:
        where = target.project_id or f"{target.display_name} (created if missing)"
        lines.append(
            f"  - {target.cluster_stack}  [{target.backend}] project {where}, "
            f"region {target.region or '(from the profile)'}"
        )
    return lines


def _finish(result: Any, output: str) -> int:
    from npa_pulumi.output.text import print_fleet_result

    if output == "json":
        emit_json(result.to_json())
    else:
        print_fleet_result(result)
    if getattr(result, "partial_cleanup", False):
        return EXIT_PARTIAL_CLEANUP  # not success, and not "the command failed": something is left
    return EXIT_FAILED if result.failed_count else 0


# ------------------------------------------------------------------------------------------ commands


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
@click.option(
    "--policy-pack",
    "policy_packs",
    multiple=True,
    type=click.Path(file_okay=False),
    help="An extra CrossGuard policy pack (repeatable); fleet-guardrails always runs.",
)
@click.option(
    "--policy-config",
    default=None,
    type=click.Path(dir_okay=False),
    help="Policy config JSON (enforcement levels and settings).",
)
@shard_option
@stage_option
@break_lock_option
@prices_option
@rollout_options
def up_command(**kw: Any) -> None:
    """Deploy the fleet: project stacks first, then cluster stacks in parallel."""

    def body() -> int:
        spec, targets = _load(
            kw["spec_path"],
            kw["only_projects"],
            kw["only_clusters"],
            kw["project_prefix"],
            kw["shard"],
            kw["stage"],
        )
        if not targets:
            return _nothing_to_do("up", spec, kw)
        fleet = _fleet(
            spec,
            targets,
            _shard_kw(
                kw,
                fail_fast=not kw["continue_on_error"],
                policy_packs=list(kw["policy_packs"]),
                policy_config=kw["policy_config"],
                create_projects=kw["create_projects"],
                refresh=kw["refresh"],
                health_gate=kw["health_gate"],
                prices=kw["prices"],
                **rollout_kw(kw),
            ),
        )
        fleet.plans()  # every offline check (recipe, tfvars) before asking
        confirm(_banner("create/update", spec, targets), kw["yes"], "deploy")
        from npa_pulumi.engine.preflight_gate import preflight_gate

        with fleet.progress:
            result = fleet.up(preflight=preflight_gate(fleet) if kw["preflight"] else None)
        return _finish(result, kw["output"])

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
@click.option(
    "--policy-pack",
    "policy_packs",
    multiple=True,
    type=click.Path(file_okay=False),
    help="An extra CrossGuard policy pack (repeatable); fleet-guardrails always runs.",
)
@click.option(
    "--policy-config",
    default=None,
    type=click.Path(dir_okay=False),
    help="Policy config JSON (enforcement levels and settings).",
)
@shard_option
@stage_option
@click.option(
    "--refresh",
    is_flag=True,
    help="Run Terraform's own plan for every cluster stack, not only those whose bridge inputs changed.",
)
@prices_option
@rollout_options
def preview_command(**kw: Any) -> None:
    """Show what `up` would change, per stack, with policy results."""

    def body() -> int:
        spec, targets = _load(
            kw["spec_path"],
            kw["only_projects"],
            kw["only_clusters"],
            kw["project_prefix"],
            kw["shard"],
            kw["stage"],
        )
        if not targets and kw["output"] != "markdown" and not kw["out_file"]:
            return _nothing_to_do("preview", spec, kw)
        fleet = _fleet(
            spec,
            targets,
            _shard_kw(
                kw,
                policy_packs=list(kw["policy_packs"]),
                policy_config=kw["policy_config"],
                refresh=kw["refresh"],
                prices=kw["prices"],
                **rollout_kw(kw),
            ),
        )
        from npa_pulumi.engine.preflight_gate import preflight_gate

        with fleet.progress:
            result = fleet.preview(preflight=preflight_gate(fleet) if kw["preflight"] else None)
        from npa_pulumi.output.documents import write_preview
        from npa_pulumi.plan import plan_document

        plan = plan_document(spec, targets, kw["project_prefix"]) if kw["output"] == "html" else None
        return write_preview(result, kw["output"], kw["out_file"], kw["json_out"], plan)

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

        documents = [_read_document(path) for path in kw["documents"]]
        preflight = _read_document(kw["preflight_file"]).body if kw["preflight_file"] else None
        if preflight is not None and not (isinstance(preflight, dict) and "requirements" in preflight):
            raise UserInputError(
                f"--preflight {kw['preflight_file']}: not a `npa-pulumi preflight --output json` report"
            )
        order = None
        if kw["spec_path"]:
            _spec, targets = _load(kw["spec_path"], (), (), None)
            order = _unique([s for t in targets for s in (t.project_stack, t.cluster_stack)])
        merged = merge_previews(documents, order, preflight)
        return write_preview(merged, kw["output"], kw["out_file"], kw["json_out"])

    run_guarded(body, kw["output"])


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


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


def deletion_options(func: F) -> F:
    """The opt-in deletions `destroy` and `cleanup` share; each is ownership-gated."""
    decorators = [
        click.option(
            "--dry-run",
            is_flag=True,
            help="Print the ordered phases (what each deletes or retains, and why) and change nothing.",
        ),
        click.option(
            "--delete-buckets",
            is_flag=True,
            help="Also delete buckets the fleet provably created, when empty.",
        ),
        click.option(
            "--delete-nonempty-buckets",
            is_flag=True,
            help="With --delete-buckets: delete such a bucket even when it still holds objects.",
        ),
        click.option(
            "--delete-storage-identity",
            is_flag=True,
            help="Also delete the storage service account and its access keys the fleet created.",
        ),
        click.option(
            "--delete-projects",
            is_flag=True,
            help="Also delete projects the fleet created, once they hold nothing else.",
        ),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def _teardown_options(kw: dict[str, Any]) -> Any:
    from npa_pulumi.engine.teardown.model import TeardownOptions

    if kw["delete_nonempty_buckets"] and not kw["delete_buckets"]:
        raise UserInputError("--delete-nonempty-buckets only applies together with --delete-buckets")
    return TeardownOptions(
        delete_buckets=kw["delete_buckets"],
        delete_nonempty_buckets=kw["delete_nonempty_buckets"],
        delete_storage_identity=kw["delete_storage_identity"],
        delete_projects=kw["delete_projects"],
    )


def destroy_options(func: F) -> F:
    """`destroy` takes the fleet options with the spec optional: `--receipt ID` can stand in for it."""
    return _fleet_options(func, spec_required=False)


@click.command("destroy")
@destroy_options
@output_option()
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--force", is_flag=True, help="Same as --yes.")
@click.option(
    "--receipt",
    "receipt_ref",
    default=None,
    metavar="ID",
    help="Continue the teardown this receipt records (its id, or its path): its selection, flags and "
    "identity; completed phases stay completed. Without --spec only the guarded phases (bucket, storage "
    "identity, project) run.",
)
@deletion_options
@shard_option
@stage_option
@break_lock_option
def destroy_command(**kw: Any) -> None:
    """Destroy the selected clusters, then (once no cluster of a project remains) the project stack and
    its owned network; with --shard project stacks are kept for a final unsharded destroy. Buckets,
    storage identities and projects are retained unless asked for, and then deleted only with proof that
    the fleet created them. Every run leaves a receipt; a partial cleanup exits 2 and names the
    `destroy --receipt ID` that continues it."""

    def body() -> int:
        teardown = _teardown_options(kw)
        if kw["receipt_ref"]:
            return _destroy_from_receipt(kw, teardown)
        if not kw["spec_path"]:
            from npa_pulumi.errors import UserInputError

            raise UserInputError("destroy needs --spec (or --receipt ID to continue a recorded teardown)")
        spec, targets = _load(
            kw["spec_path"],
            kw["only_projects"],
            kw["only_clusters"],
            kw["project_prefix"],
            kw["shard"],
            kw["stage"],
        )
        if not targets:
            return _nothing_to_do("destroy", spec, kw)
        fleet = _fleet(spec, targets, _shard_kw(kw))
        with fleet.progress:
            plan = fleet.teardown_plan(teardown)  # read-only
        if kw["dry_run"]:
            return _finish(plan, kw["output"])
        confirm(
            [*_banner("DESTROY", spec, targets), *_phase_lines(plan.phases)],
            kw["yes"] or kw["force"],
            "destroy",
        )
        with fleet.progress:
            result = fleet.destroy(teardown)
        return _finish(result, kw["output"])

    run_guarded(body, kw["output"])


def _given(kw: dict[str, Any], name: str) -> Any:
    """A flag's value only when the caller typed it (a default is not an identity to check)."""
    from click.core import ParameterSource

    source = click.get_current_context().get_parameter_source(name)
    return kw[name] if source not in (ParameterSource.DEFAULT, None) else None


def _destroy_from_receipt(kw: dict[str, Any], asked: Any) -> int:
    """`destroy --receipt ID`: identity from the exact flags, then the receipt, then the spec; any clash
    stops before a mutation. The receipt's flags stay asked for; flags given here add to them."""
    from dataclasses import fields

    from npa_pulumi.engine.automation.workspace import resolve_backend_url
    from npa_pulumi.engine.teardown.model import TeardownOptions
    from npa_pulumi.engine.teardown.resume import ReceiptMismatch, check_identity, find_receipt

    receipt = find_receipt(kw["receipt_ref"])
    if kw["shard"] or kw["only_clusters"]:
        raise ReceiptMismatch(
            "--receipt continues exactly the receipt's selection: drop --shard/--only-clusters"
        )
    if kw["only_projects"] and sorted(_split(kw["only_projects"])) != sorted(receipt.projects):
        raise ReceiptMismatch(
            f"--only-projects {','.join(_split(kw['only_projects']))} given, receipt {receipt.id} covers "
            f"{','.join(receipt.projects)}. Nothing was changed."
        )
    backend = _given(kw, "backend")
    check_identity(
        receipt,
        {
            "cloud": _given(kw, "cloud"),
            "backend": resolve_backend_url(backend) if backend else None,
            "profile": _given(kw, "profile"),
        },
    )
    recorded = receipt.options()
    teardown = TeardownOptions(
        **{f.name: getattr(recorded, f.name) or getattr(asked, f.name) for f in fields(TeardownOptions)}
    )
    kw = {
        **kw,
        "cloud": receipt.text("cloud") or kw["cloud"],
        "backend": backend or receipt.text("backend"),
        "profile": kw["profile"] or receipt.text("profile"),
        "passphrase_file": kw["passphrase_file"] or receipt.text("passphrase_file"),
    }
    if kw["spec_path"]:
        return _destroy_receipt_with_spec(kw, receipt, teardown)
    return _destroy_receipt_guarded(kw, receipt, teardown)


def _destroy_receipt_with_spec(kw: dict[str, Any], receipt: Any, teardown: Any) -> int:
    from npa_pulumi.engine.teardown.resume import ReceiptMismatch, check_identity

    spec, targets = _load(kw["spec_path"], tuple(receipt.projects), (), kw["project_prefix"])
    check_identity(receipt, {"fleet": spec.name, "tenant_id": spec.tenant_id or None})
    clusters = set(receipt.clusters)
    missing = clusters - {t.cluster_stack for t in targets}
    if missing:
        raise ReceiptMismatch(
            f"receipt {receipt.id} destroys {', '.join(sorted(missing))}, which this spec no longer has. "
            "Nothing was changed."
        )
    targets = [t for t in targets if t.cluster_stack in clusters]
    fleet = _fleet(spec, targets, _engine_options(kw))
    with fleet.progress:
        plan = fleet.teardown_plan(teardown)  # read-only
    if kw["dry_run"]:
        return _finish(plan, kw["output"])
    lines = [f"Continuing the teardown of receipt {receipt.id}.", *_phase_lines(plan.phases)]
    confirm([*_banner("DESTROY", spec, targets), *lines], kw["yes"] or kw["force"], "destroy")
    with fleet.progress:
        result = fleet.destroy(teardown, resumed=receipt)
    return _finish(result, kw["output"])


def _destroy_receipt_guarded(kw: dict[str, Any], receipt: Any, teardown: Any) -> int:
    """No spec: the receipt's guarded phases only, with the cloud and the teardown records."""
    from npa_pulumi.cloud.factory import make_cloud
    from npa_pulumi.engine.teardown.resume import Resume, run_resume
    from npa_pulumi.output.results import FleetResult

    pinned = (
        {"tenant_id": receipt.text("tenant_id")}
        if kw["cloud"] == "nebius" and receipt.text("tenant_id")
        else {}
    )
    cloud = make_cloud(kw["cloud"], profile=kw["profile"] or None, region=receipt.text("region"), **pinned)

    def say(message: str) -> None:
        stderr_console.print(message, markup=False, soft_wrap=True)

    resume = Resume(receipt, teardown, cloud, say)
    result = FleetResult(
        command="destroy", fleet=receipt.fleet, cloud=kw["cloud"], backend=receipt.text("backend") or ""
    )
    plan = resume.plan()  # read-only
    if not kw["dry_run"]:
        confirm(
            [
                f"About to CONTINUE the teardown of fleet '{receipt.fleet}' from receipt {receipt.id}.",
                *_phase_lines(plan),
            ],
            kw["yes"] or kw["force"],
            "destroy",
        )
    run_resume(resume, result, plan, kw["dry_run"])
    return _finish(result, kw["output"])


@click.command("cleanup")
@destroy_options
@output_option()
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@deletion_options
@click.option("--list-receipts", is_flag=True, help="Local: list every teardown receipt.")
@click.option(
    "--prune-receipts",
    is_flag=True,
    help="Local: with --receipt-retention-days N and --yes, delete receipts older than N days whose "
    "teardown is fully terminal.",
)
@click.option("--receipt-retention-days", type=click.FloatRange(min=0), default=None)
def cleanup_command(**kw: Any) -> None:
    """Without --spec, local only: report what the npa home holds (work dirs, kubeconfigs, logs, caches,
    receipts, stale run records) and what still costs money; --yes removes the residue of stacks that no
    longer exist. With --spec, the cloud sweep: find what the fleet created (by its labels) that no stack
    references any more, and delete it through the same guarded phases as destroy (orphan networks
    always, buckets, storage identities and projects only with the opt-in flags). --dry-run only reports."""

    def body() -> int:
        if not kw["spec_path"]:
            return _local_cleanup(kw)
        if kw["list_receipts"] or kw["prune_receipts"] or kw["receipt_retention_days"] is not None:
            raise UserInputError(
                "--list-receipts, --prune-receipts and --receipt-retention-days belong to the local "
                "cleanup: run `npa-pulumi cleanup` without --spec"
            )
        teardown = _teardown_options(kw)
        spec, targets = _load(kw["spec_path"], kw["only_projects"], kw["only_clusters"], kw["project_prefix"])
        fleet = _fleet(spec, targets, _engine_options(kw))
        with fleet.progress:
            plan = fleet.cleanup_plan(teardown)  # read-only
        if kw["dry_run"] or not any(p.status == "planned" for p in plan.phases):
            return _finish(plan, kw["output"])
        confirm(
            [
                f"About to CLEAN UP fleet '{spec.name}': delete what no stack references.",
                *_phase_lines(plan.phases),
            ],
            kw["yes"],
            "clean up",
        )
        with fleet.progress:
            result = fleet.cleanup(teardown)
        return _finish(result, kw["output"])

    run_guarded(body, kw["output"])


def _local_cleanup(kw: dict[str, Any]) -> int:
    """`cleanup` without a spec: the npa home only (engine/teardown/local_cleanup.py), no cloud."""
    from npa_pulumi.engine.automation.workspace import resolve_backend_url
    from npa_pulumi.engine.teardown import local_cleanup

    cloud_flags = [
        f"--{name.replace('_', '-')}"
        for name in (
            "delete_buckets",
            "delete_nonempty_buckets",
            "delete_storage_identity",
            "delete_projects",
        )
        if kw[name]
    ]
    if cloud_flags:
        raise UserInputError(
            f"{', '.join(cloud_flags)} delete in the cloud: give the fleet's --spec for the cloud sweep "
            "(`npa-pulumi cleanup --spec fleet.yaml ...`); without it cleanup is local only"
        )
    if kw["prune_receipts"] and kw["receipt_retention_days"] is None:
        raise UserInputError(
            "--prune-receipts needs --receipt-retention-days N (receipts younger than N days are kept)"
        )
    report = local_cleanup.survey(resolve_backend_url(kw["backend"]))
    residue = [i for i in report.items if i.removable]
    prune = kw["prune_receipts"] and not kw["dry_run"]
    if (residue or prune) and not kw["dry_run"] and kw["yes"]:
        local_cleanup.remove_residue(report)
        if prune:
            local_cleanup.prune_receipts(report, float(kw["receipt_retention_days"]))
    elif prune:
        raise NotConfirmed("refusing to prune receipts without --yes; nothing was changed")
    if kw["output"] == "json":
        emit_json(report.to_json())
    else:
        _print_local_cleanup(report, kw["list_receipts"], applied=bool(kw["yes"]) and not kw["dry_run"])
    return EXIT_FAILED if report.errors else 0


def _print_local_cleanup(report: Any, list_receipts: bool, applied: bool) -> None:
    echo = click.echo
    echo(f"npa home {report.npa_home} (backend {report.backend})")
    for item in report.items:
        mark = "removed" if item.removed else ("residue" if item.removable else item.stack_state)
        echo(f"  {item.kind:<11} {mark:<11} {item.path}  ({item.bytes:,} bytes) — {item.reason}")
    sizes = ", ".join(f"{name} {size:,} bytes" for name, size in report.sizes.items())
    echo(f"  kept: {sizes} (logs, caches and teardown records are audit evidence)")
    for costing in report.still_costing:
        echo(f"  still costing money: {costing['stack']} holds {costing['holds']}: {costing['command']}")
    terminal = sum(1 for r in report.receipts if r.terminal)
    echo(f"  receipts: {len(report.receipts)} ({terminal} fully terminal), {len(report.pruned)} pruned")
    if list_receipts:
        for r in report.receipts:
            state = "pruned" if r.pruned else ("terminal" if r.terminal else "open")
            echo(f"    {r.id}  {r.fleet}  {r.outcome:<16} {state:<8} {r.age_days:g} days  {r.path}")
    if report.verification_unresolved:
        echo(f"  {len(report.verification_unresolved)} item(s) could not be verified (not a file:// backend)")
    left = [i for i in report.items if i.removable and not i.removed]
    if left and not applied:
        echo(f"  {len(left)} item(s) of residue: `npa-pulumi cleanup --yes` removes them")
    for error in report.errors:
        echo(f"  error: {error}", err=True)


def _phase_lines(phases: list[Any]) -> list[str]:
    lines = ["Phases, in order:"]
    for phase in phases:
        what = phase.deletes if phase.status == "planned" else phase.retains
        detail = f" {what}" if what else ""
        reason = f" ({phase.reason})" if phase.reason else ""
        verb = "delete" if phase.status == "planned" else phase.status
        lines.append(f"  {phase.name}: {verb}{detail}{reason}")
    return lines


def _selection_command(
    name: str, method: str, summary: str, staged: bool = False, costed: bool = False
) -> click.Command:
    """A command over the selection that asks nothing (status reads; refresh records drift in the stacks'
    state): load, select (a shard too), run `Fleet.<method>()`, report."""

    @click.command(name, help=summary)
    @fleet_options
    @output_option()
    @shard_option
    def command(**kw: Any) -> None:
        def body() -> int:
            spec, targets = _load(
                kw["spec_path"],
                kw["only_projects"],
                kw["only_clusters"],
                kw["project_prefix"],
                kw["shard"],
                kw.get("stage"),
            )
            if not targets:
                return _nothing_to_do(name, spec, kw)
            fleet = _fleet(spec, targets, _shard_kw(kw, **({"prices": kw["prices"]} if costed else {})))
            with fleet.progress:
                result = getattr(fleet, method)()
            return _finish(result, kw["output"])

        run_guarded(body, kw["output"])

    command = prices_option(command) if costed else command
    return stage_option(command) if staged else command


status_command = _selection_command(
    "status", "status", "Stack outputs plus live cloud state per cluster, and what it costs.", costed=True
)
refresh_command = _selection_command(
    "refresh",
    "refresh",
    "Compare every stack with the live cloud and record drift. With --shard only the shard's cluster "
    "stacks (project stacks are shared: refresh them once with --stage projects).",
    staged=True,
)


@click.command("stacks")
@click.option("--backend", default=None, metavar="URL")
@click.option("--fleet", "fleet_name", default=None, help="Only this fleet's stacks (by the npa:fleet tag).")
@output_option()
def stacks_command(backend: str | None, fleet_name: str | None, output: str) -> None:
    """List the fleet stacks in the backend (what `pulumi stack ls` shows in this repository)."""

    def body() -> int:
        from npa_pulumi.engine.automation.stacks import list_fleet_stacks

        stacks = list_fleet_stacks(backend, fleet_name)
        if output == "json":
            emit_json({"stacks": stacks})
        else:
            from npa_pulumi.output.text import print_stack_list

            print_stack_list(stacks)
        return 0

    run_guarded(body, output)


class NothingDeployed(NpaError):
    kind = "not-deployed"


@click.command("kubeconfig")
@fleet_options
@output_option()
@click.option(
    "--merge-into",
    default=None,
    type=click.Path(dir_okay=False),
    metavar="PATH",
    help="Merge the clusters' contexts into this kubeconfig (e.g. ~/.kube/config) instead of printing them.",
)
def kubeconfig_command(**kw: Any) -> None:
    """Print (or merge) kubeconfigs for the selected, deployed clusters: one context per cluster,
    `fleet-<fleet>-<project>-<cluster>`, with fresh credentials (Nebius: the nebius CLI as an exec plugin
    pinned to the profile; local cloud: a client certificate)."""

    def body() -> int:
        from pathlib import Path

        from npa_pulumi.engine.kubeconfigs import StaleRegistration
        from npa_pulumi.kube import kubeconfig as kc

        spec, targets = _load(kw["spec_path"], kw["only_projects"], kw["only_clusters"], kw["project_prefix"])
        entries = _fleet(spec, targets, _engine_options(kw)).kubeconfigs()
        stale = [e["error"] for e in entries if e.get("error")]
        if stale:
            raise StaleRegistration("\n".join(stale))
        deployed = [e for e in entries if e.get("kubeconfig")]
        for entry in entries:
            if not entry.get("kubeconfig"):
                stderr_console.print(f"{entry['stack']}: not deployed, no kubeconfig", markup=False)
        if not deployed:
            raise NothingDeployed("none of the selected clusters is deployed: run `npa-pulumi up` first")
        merged: dict[str, Any] = {}
        for entry in deployed:
            merged = kc.merge(merged, kc.load(entry["kubeconfig"]))
        listing = [{k: v for k, v in e.items() if k != "kubeconfig"} for e in entries]
        if kw["merge_into"]:
            path = Path(kw["merge_into"]).expanduser()
            existing = kc.load(path.read_text()) if path.exists() else {}
            kc.write_private(path, kc.dump(kc.merge(existing, merged)))
            stderr_console.print(f"merged {len(deployed)} context(s) into {path}", markup=False)
            if kw["output"] == "json":
                emit_json({"clusters": listing, "merged_into": str(path)})
            return 0
        if kw["output"] == "json":
            emit_json({"clusters": listing, "kubeconfig": merged})
        else:
            sys.stdout.write(kc.dump(merged))
        return 0

    run_guarded(body, kw["output"])


def _run_verifier(kw: dict[str, Any], runner: str, **options: Any) -> None:
    """The verifiers' one body: load and select, then `engine.verify.<runner>` with the common options
    (timeout, evidence dir, concurrency) and the verifier's own."""

    def body() -> int:
        from pathlib import Path

        from npa_pulumi.engine import verify, verify_fabric

        spec, targets = _load(kw["spec_path"], kw["only_projects"], kw["only_clusters"], kw["project_prefix"])
        fleet = _fleet(spec, targets, _engine_options(kw))
        settings = verify.VerifyOptions(
            timeout_s=kw["timeout_minutes"] * 60,
            evidence_dir=Path(kw["evidence_dir"]) if kw["evidence_dir"] else None,
            concurrency=kw["concurrency"],
            **options,
        )
        run = getattr(verify, runner, None) or getattr(verify_fabric, runner)
        return _finish(run(fleet, settings), kw["output"])

    run_guarded(body, kw["output"])


@click.command("verify-mig")
@fleet_options
@output_option()
@click.option("--wait/--no-wait", default=False, show_default=True, help="Poll until ready or the timeout.")
@click.option(
    "--reconcile/--no-reconcile",
    default=False,
    show_default=True,
    help="Remove only the stale nvidia.com/gpu=mig-not-ready:NoSchedule taint from otherwise good nodes "
    "(refused while a GPU workload runs).",
)
@click.option("--timeout-minutes", default=10.0, show_default=True, type=click.FloatRange(min=0.1))
@click.option(
    "--evidence-dir",
    default=None,
    type=click.Path(file_okay=False),
    help="Keep each cluster's evidence here (0700 dir, 0600 files; refused inside a git work tree).",
)
def verify_mig_command(**kw: Any) -> None:
    """Check MIG readiness of the selected MIG clusters through their registered kubeconfigs (read-only
    unless --reconcile): the exact mixed / all-balanced layout on every GPU node, twice in a row."""

    _run_verifier(kw, "verify_mig", wait=kw["wait"], reconcile=kw["reconcile"])


@click.command("verify-graphics")
@fleet_options
@output_option()
@click.option("--timeout-minutes", default=10.0, show_default=True, type=click.FloatRange(min=0.1))
@click.option(
    "--evidence-dir",
    default=None,
    type=click.Path(file_okay=False),
    help="Keep each cluster's evidence here (0700 dir, 0600 files; refused inside a git work tree).",
)
def verify_graphics_command(**kw: Any) -> None:
    """Run CUDA and GLX/EGL/Vulkan readiness on every GPU worker of the selected RTX rendering clusters,
    through their registered kubeconfigs (probe pods are removed after); a partial result fails."""

    _run_verifier(kw, "verify_graphics")


@click.command("verify-storage")
@fleet_options
@output_option()
@click.option("--timeout-minutes", default=10.0, show_default=True, type=click.FloatRange(min=0.1))
@click.option(
    "--evidence-dir",
    default=None,
    type=click.Path(file_okay=False),
    help="Keep each cluster's evidence here (0700 dir, 0600 files; refused inside a git work tree).",
)
def verify_storage_command(**kw: Any) -> None:
    """Check the shared filesystem of the selected clusters through their registered kubeconfigs: the
    virtiofs mount (read-write, nofail, capacity) on every worker and one RWX claim that every worker
    writes to and reads every other's payload from. Probe objects are removed after; clusters whose spec
    disables the filesystem are skipped."""

    _run_verifier(kw, "verify_storage")


@click.command("verify-fabric")
@fleet_options
@output_option()
@click.option("--timeout-minutes", default=15.0, show_default=True, type=click.FloatRange(min=0.1))
@click.option(
    "--evidence-dir",
    default=None,
    type=click.Path(file_okay=False),
    help="Keep each cluster's evidence here (0700 dir, 0600 files; refused inside a git work tree).",
)
def verify_fabric_command(**kw: Any) -> None:
    """Measure NCCL all-reduce bus bandwidth on every GPU node (NVLink/NVSwitch) and across the
    InfiniBand fabric of the selected clusters, against their thresholds; on a slow fabric, name the node
    or link. Refused while pods hold the GPUs; probe pods are removed after."""

    _run_verifier(kw, "verify_fabric")


def register(group: click.Group) -> None:
    group.add_command(up_command)
    group.add_command(up_command, name="deploy")
    group.add_command(preview_command)
    group.add_command(preview_merge_command)
    group.add_command(destroy_command)
    group.add_command(cleanup_command)
    group.add_command(status_command)
    group.add_command(refresh_command)
    group.add_command(stacks_command)
    group.add_command(kubeconfig_command)
    group.add_command(verify_mig_command)
    group.add_command(verify_graphics_command)
    group.add_command(verify_storage_command)
    group.add_command(verify_fabric_command)
