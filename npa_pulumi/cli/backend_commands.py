"""`backend init`: a team's state bucket and the `--backend` URL for it (machine/backend_init.py)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

import click

from npa_pulumi.cli.common import output_option, run_guarded, stderr_console
from npa_pulumi.errors import UserInputError
from npa_pulumi.output.streams import emit_json

if TYPE_CHECKING:
    from npa_pulumi.engine.ci_identity import CiIdentity


@click.group("backend")
def backend_group() -> None:
    """The Pulumi backend that holds the fleet's state."""


@backend_group.command("init")
@click.option("--cloud", type=click.Choice(["local", "nebius"]), default="local", show_default=True)
@click.option("--bucket", required=True, help="The state bucket (created if missing, else verified).")
@click.option("--region", default=None, help="Storage region (nebius: default eu-north1; other: us-east-1).")
@click.option(
    "--endpoint",
    default=None,
    metavar="URL",
    help="S3 endpoint (nebius: https://storage.<region>.nebius.cloud; local: the local cloud's own S3 "
    "server, SeaweedFS, started if needed). Any S3-compatible server (SeaweedFS, MinIO).",
)
@click.option(
    "--project",
    default=None,
    metavar="ID",
    help="--cloud local without --endpoint: the bucket's project (default: the local tenant's "
    "`npa-state` project, created if missing).",
)
@click.option(
    "--ci-repository",
    default=None,
    metavar="OWNER/REPO",
    help="--cloud nebius: also print what keyless CI from this GitHub repository needs (service accounts, "
    "their federated credentials, least-privilege group memberships) as Terraform to apply. Creates nothing.",
)
@click.option(
    "--ci-environment",
    default=None,
    metavar="NAME",
    help="The GitHub environment whose jobs may deploy (default: fleet-production).",
)
@output_option()
def init_command(
    cloud: str,
    bucket: str,
    region: str | None,
    endpoint: str | None,
    project: str | None,
    ci_repository: str | None,
    ci_environment: str | None,
    output: str,
) -> None:
    """Create or verify a private, versioned state bucket and print the --backend URL and what to export.
    Credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and are never printed; with the local
    cloud and none exported, a key is minted for the bucket and written as an AWS shared-credentials
    profile (0600) whose file and name are printed. With --ci-repository (nebius), also the federated
    credentials and role bindings keyless CI needs, including the access permits that let each CI account
    mint its run's short-lived key to the state bucket (docs/ci-previews.md)."""

    def body() -> int:
        from npa_pulumi.engine.ci_identity import DEFAULT_ENVIRONMENT, ci_identity
        from npa_pulumi.machine.backend_init import DEFAULT_NEBIUS_REGION, init_bucket, init_local_bucket

        ci = None
        if ci_repository or ci_environment:
            if cloud != "nebius" or not ci_repository:
                raise UserInputError("--ci-repository OWNER/REPO (and --ci-environment) need --cloud nebius")
            # Checked before the bucket is touched: bad input changes nothing.
            ci = ci_identity(ci_repository, ci_environment or DEFAULT_ENVIRONMENT)
        if project and (cloud != "local" or endpoint):
            raise UserInputError(
                "--project names the bucket's project in the local cloud: only with "
                "--cloud local and no --endpoint"
            )
        if cloud == "local" and not endpoint:
            if region:
                raise UserInputError("--region: the local cloud's bucket is in its project's region")
            result = init_local_bucket(bucket, project)
        else:
            where = region or (DEFAULT_NEBIUS_REGION if cloud == "nebius" else "us-east-1")
            url = endpoint or f"https://storage.{where}.nebius.cloud"
            result = init_bucket(bucket, url, where)
        if output == "json":
            document = result.to_json()
            if ci is not None:
                document["ci"] = {**ci.to_json(), "terraform": ci.terraform()}
            emit_json(document)
            return 0
        state = "created" if result.created else "exists, verified"
        stderr_console.print(
            f"bucket {result.bucket} ({state}) at {result.endpoint}, region {result.region}; "
            f"versioning {result.versioning}",
            markup=False,
        )
        click.echo(f"--backend '{result.backend_url}'")
        click.echo("# every operator and CI job exports:")
        click.echo(f"export PULUMI_BACKEND_URL={shlex.quote(result.backend_url)}")
        if result.credentials_file and result.profile:
            click.echo(
                f"export AWS_SHARED_CREDENTIALS_FILE={shlex.quote(result.credentials_file)} "
                f"AWS_PROFILE={shlex.quote(result.profile)}   # the bucket's access key (file mode 0600)"
            )
        else:
            click.echo("export AWS_ACCESS_KEY_ID=...        # the storage access key id")
            click.echo("export AWS_SECRET_ACCESS_KEY=...    # its secret (never in the spec)")
        click.echo(
            "export PULUMI_CONFIG_PASSPHRASE_FILE=...  # the team's passphrase file, kept with the state"
        )
        if ci is not None:
            _print_ci(ci)
        return 0

    run_guarded(body, output)


def _print_ci(ci: CiIdentity) -> None:
    """The keyless-CI section: what to create (Terraform), then the repository's variables."""
    click.echo("")
    click.echo(f"# Keyless CI for {ci.repository}: no Nebius key and no storage key in GitHub. Review and")
    variables = " ".join(f"-var {name}=..." for name, _ in ci.variables())
    click.echo(f"# apply this Terraform (Nebius provider) as a tenant admin, with {variables}:")
    for account in ci.accounts:
        trusted = f"trusted for sub={account.subject}"
        click.echo(f"#   {account.role}: {account.name}, {trusted}, group {account.group}")
        click.echo(
            f"#     and group {account.keys_group}: admin on var.{account.project_variable} (a project of "
            "this account alone: it mints its run's state-bucket key), storage.object-editor on the bucket"
        )
    click.echo("# " + ci.note)
    click.echo(ci.terraform())
    click.echo("# then set these repository variables (ids, not secrets) from its outputs:")
    for account in ci.accounts:
        click.echo(f"#   {account.variable}=<{account.variable.lower()}>")
    click.echo("# and give each job `permissions: id-token: write` (examples/ci/github/).")


def register(group: click.Group) -> None:
    group.add_command(backend_group)
