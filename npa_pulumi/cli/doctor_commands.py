"""`doctor`: what the fleet needs on this machine for the chosen cloud, and how to fix what is missing
(machine/doctor.py). Read-only; exit 1 when something `up` on that cloud needs is missing."""

from __future__ import annotations

import click

from npa_pulumi.cli.common import output_option, run_guarded
from npa_pulumi.cli.fleet_options import auth_option, k8s_training_dir_option, with_recipe_aliases
from npa_pulumi.errors import EXIT_FAILED
from npa_pulumi.output.streams import emit_json


@click.command("doctor")
@click.option(
    "--cloud",
    type=click.Choice(["local", "nebius"]),
    default="local",
    show_default=True,
    help="The cloud the fleet will run on: nebius adds the CLI, the profile and a token check.",
)
@click.option("--profile", default=None, help="~/.nebius profile to check (--cloud nebius).")
@click.option(
    "--spec",
    "spec_path",
    default=None,
    type=click.Path(dir_okay=False),
    help="The fleet spec whose projects the identity must read (--cloud nebius; default: the tenant's list).",
)
@auth_option
@click.option("--backend", default=None, metavar="URL", help="Backend to check (default as for up).")
@click.option("--passphrase-file", default=None, type=click.Path(dir_okay=False))
@click.option(
    "--recipe-dir",
    default=None,
    type=click.Path(file_okay=False),
    help="The k8s-training checkout to check, with its terraform constraint (default: the default recipe, "
    "from $NPA_K8S_TRAINING_MIRROR or the checkout an earlier run cached).",
)
@k8s_training_dir_option(click.Path(file_okay=False))
@click.option(
    "--install-plugins",
    is_flag=True,
    help="Install a missing pinned provider plugin with `pulumi plugin install` (needs its plugin source).",
)
@output_option()
@with_recipe_aliases
def doctor_command(
    cloud: str,
    profile: str | None,
    spec_path: str | None,
    auth: str | None,
    backend: str | None,
    passphrase_file: str | None,
    recipe_dir: str | None,
    install_plugins: bool,
    output: str,
) -> None:
    """Check this machine for what the fleet needs: Python and the package, the Pulumi engine and its
    version, the k8s-training recipe `up` would deploy (--recipe-dir, else the default recipe from
    $NPA_K8S_TRAINING_MIRROR or a cached checkout: never fetched here), terraform/tofu against that recipe's
    constraint, the provider plugins, kubectl, the Nebius CLI
    and profile (--cloud nebius: the auth path found, the identity and its tenant, a token's lifetime and
    renewal, and whether it can read the fleet's projects, those of --spec or the tenant's; with --auth
    federated: the OIDC token and the exchange), the backend and its locks, the
    passphrase source, disk space, and $HOME against the account's home. Changes nothing, except that
    --install-plugins installs a missing pinned provider plugin."""

    def body() -> int:
        from npa_pulumi.machine.doctor import run_doctor
        from npa_pulumi.machine.nebius_auth import fleet_projects
        from npa_pulumi.output.doctor import print_doctor

        spec = None
        if spec_path is not None:
            from npa_pulumi.spec import load_spec

            spec = load_spec(spec_path)  # invalid: exit 2 with the located problems, nothing checked
        report = run_doctor(
            cloud,
            profile=profile or (spec.profile if spec is not None else None) or None,
            projects=fleet_projects(spec) if spec is not None else None,
            tenant_id=(spec.tenant_id if spec is not None else None) or None,
            backend=backend,
            passphrase_file=passphrase_file,
            recipe_dir=recipe_dir,
            install_plugins=install_plugins,
            auth=auth,
        )
        if output == "json":
            emit_json(report.to_json())
        else:
            print_doctor(report)
        return 0 if report.ok else EXIT_FAILED

    run_guarded(body, output)


def register(group: click.Group) -> None:
    group.add_command(doctor_command)
