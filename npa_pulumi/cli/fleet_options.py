"""The flags the fleet commands share, and the typed pieces of an SDK request they become.

A command reads its click options once, into a `Selection` (checked as it is made: the shard, the stage)
and the `FleetFields` every request carries, then builds its operation's request (npa_pulumi/sdk/
requests.py) and calls the SDK.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, cast

import click

from npa_pulumi.cli.completion import complete_clusters, complete_projects
from npa_pulumi.cli.observability import observability_options, observed

if TYPE_CHECKING:
    from npa_pulumi.sdk.requests import Recipes, Rollout, Selection, TeardownOptions, Where

F = TypeVar("F", bound=Callable[..., Any])


def split(values: tuple[str, ...]) -> tuple[str, ...]:
    """`--only-projects a,b --only-projects c`: a, b, c."""
    return tuple(item.strip() for value in values for item in value.split(",") if item.strip())


# ------------------------------------------------------------------------ the original's recipe flags

# The original `npa fleet`'s spellings of the mk8s recipe flags: alias parameter -> (the parameter it stands
# for, its own flag, the flag it aliases). Both spellings of one flag at once is a usage error (exit 2).
RECIPE_ALIASES: dict[str, tuple[str, str, str]] = {
    "k8s_training_dir": ("recipe_dir", "--k8s-training-dir", "--recipe-dir"),
    "k8s_training_ref": ("recipe_ref", "--k8s-training-ref", "--recipe-ref"),
}


def k8s_training_dir_option(path_type: click.ParamType[Any]) -> Callable[[F], F]:
    """`--k8s-training-dir DIR`: the original's name for `--recipe-dir`, of the same type."""
    return click.option(
        "--k8s-training-dir",
        "k8s_training_dir",
        default=None,
        type=path_type,
        metavar="DIR",
        help="Same as --recipe-dir (the original npa fleet's name for it).",
    )


k8s_training_ref_option = click.option(
    "--k8s-training-ref",
    "k8s_training_ref",
    default=None,
    metavar="REF",
    help="Same as --recipe-ref (the original npa fleet's name for it).",
)


def merge_recipe_aliases(kw: dict[str, Any]) -> dict[str, Any]:
    """The command's parameters with each alias's value under the parameter it stands for (the aliases
    themselves removed); a click.UsageError (exit 2) when both spellings of one flag were given."""
    merged = dict(kw)
    for alias, (target, spelled, canonical) in RECIPE_ALIASES.items():
        if alias not in merged:
            continue
        value = merged.pop(alias)
        if value is None:
            continue
        if merged.get(target) is not None:
            raise click.UsageError(
                f"{spelled} is the original npa fleet's name for {canonical}: give one of them, not both"
            )
        merged[target] = value
    return merged


def with_recipe_aliases(func: F) -> F:
    """A command callback that takes `--k8s-training-dir`/`--k8s-training-ref` (as options declared on it)
    as its `recipe_dir`/`recipe_ref`: apply it before the options are attached."""

    @functools.wraps(func)
    def command(*args: Any, **kw: Any) -> Any:
        return func(*args, **merge_recipe_aliases(kw))

    return cast(F, command)


auth_option = click.option(
    "--auth",
    type=click.Choice(["auto", "federated"]),
    default=None,
    help="--cloud nebius: federated exchanges the CI job's OIDC token (GitHub Actions, or "
    "$NPA_NEBIUS_FEDERATED_TOKEN_FILE) for the IAM token of $NPA_NEBIUS_SERVICE_ACCOUNT_ID, renewed as it "
    "expires: no key in CI (docs/ci-previews.md). Default: $NPA_NEBIUS_AUTH, else auto (the profile).",
)


def fleet_options(func: F) -> F:
    """Options every fleet command shares: the spec, the cloud, the backend and target selection."""
    return _fleet_options(func, spec_required=True)


def destroy_options(func: F) -> F:
    """`destroy` takes the fleet options with the spec optional: `--receipt ID` can stand in for it."""
    return _fleet_options(func, spec_required=False)


def _fleet_options(func: F, spec_required: bool) -> F:
    func = observability_options(observed(with_recipe_aliases(func)))  # --trace, --trace-file, --notify
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
        click.option(
            "--secrets-provider",
            default=None,
            metavar="URL",
            help="Secrets provider of stacks this run creates: passphrase (default), or a key service "
            "such as awskms://KEY_ID?region=R (default: $NPA_SECRETS_PROVIDER). Existing stacks keep theirs.",
        ),
        click.option("--profile", default=None, help="~/.nebius profile; wins over the spec's profile."),
        auth_option,
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
        k8s_training_dir_option(click.Path(file_okay=False)),
        click.option(
            "--recipe-ref",
            default=None,
            metavar="REF",
            help="The upstream library at REF: a branch (resolved on every run), a tag or a full commit SHA.",
        ),
        k8s_training_ref_option,
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


def policy_options(func: F) -> F:
    """`--policy-pack` (repeatable) and `--policy-config`, as `up` and `preview` take them."""
    func = click.option(
        "--policy-config",
        default=None,
        type=click.Path(dir_okay=False),
        help="Policy config JSON (enforcement levels and settings).",
    )(func)
    return click.option(
        "--policy-pack",
        "policy_packs",
        multiple=True,
        type=click.Path(file_okay=False),
        help="An extra CrossGuard policy pack (repeatable); fleet-guardrails always runs.",
    )(func)


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


# ------------------------------------------------------------------------ click options -> typed request


class FleetFields(TypedDict):
    """The fields every SDK request (`FleetRequest`) takes, read from the shared flags."""

    selection: Selection
    where: Where
    recipes: Recipes
    concurrency: int
    show_progress: bool


def selection(kw: dict[str, Any]) -> Selection:
    """The command's selection, checked once: a bad `--shard`, or `--stage projects` with a shard, is a
    UserInputError before the spec is read. Commands without --shard/--stage select without them."""
    from npa_pulumi.sdk.requests import Selection

    return Selection(
        projects=split(kw["only_projects"]),
        clusters=split(kw["only_clusters"]),
        prefix=kw["project_prefix"],
        shard=kw.get("shard"),
        stage=kw.get("stage"),
    )


def fleet_fields(kw: dict[str, Any], chosen: Selection, show_progress: bool = True) -> FleetFields:
    """The shared flags as an SDK request's fields (the CLI shows progress on stderr)."""
    from npa_pulumi.sdk.requests import Where

    return FleetFields(
        selection=chosen,
        where=Where(
            cloud=kw["cloud"],
            profile=kw["profile"],
            auth=kw["auth"],
            backend=kw["backend"],
            passphrase_file=kw["passphrase_file"],
            secrets_provider=kw["secrets_provider"],
        ),
        recipes=recipes(kw),
        concurrency=kw["concurrency"],
        show_progress=show_progress,
    )


def recipes(kw: dict[str, Any]) -> Recipes:
    """`--recipe-dir`/`--recipe-ref` (or the original's spellings) and the soperator recipe's."""
    from npa_pulumi.sdk.requests import BackendKind, RecipeChoice, Recipes

    return Recipes(
        {
            BackendKind.MK8S: RecipeChoice(dir=kw["recipe_dir"], ref=kw["recipe_ref"]),
            BackendKind.SOPERATOR: RecipeChoice(
                dir=kw["soperator_recipe_dir"], ref=kw["soperator_recipe_ref"]
            ),
        }
    )


def rollout(kw: dict[str, Any]) -> Rollout:
    """`--waves`, `--max-in-flight`, `--max-in-flight-per-reservation` (checked as they are read)."""
    from npa_pulumi.sdk.requests import Rollout

    return Rollout(
        waves=kw["waves"],
        max_in_flight=kw["max_in_flight"],
        max_in_flight_per_reservation=kw["max_in_flight_per_reservation"],
        ignore_maintenance=bool(kw.get("ignore_maintenance")),
    )


def teardown(kw: dict[str, Any]) -> TeardownOptions:
    """The opt-in deletions of `deletion_options` (the request checks their combination)."""
    from npa_pulumi.sdk.requests import TeardownOptions

    return TeardownOptions(
        delete_buckets=kw["delete_buckets"],
        delete_nonempty_buckets=kw["delete_nonempty_buckets"],
        delete_storage_identity=kw["delete_storage_identity"],
        delete_projects=kw["delete_projects"],
    )
