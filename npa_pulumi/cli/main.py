"""The `npa-pulumi` command line. Each concern registers its commands from its own module."""

from __future__ import annotations

import importlib

import click

from npa_pulumi import __version__

# Command modules, each exposing `register(group: click.Group) -> None`. A module is listed here once it
# exists; keeping the list explicit makes the CLI surface easy to audit.
COMMAND_MODULES: tuple[str, ...] = (
    "npa_pulumi.cli.policy_commands",
    "npa_pulumi.cli.fleet_commands",
    "npa_pulumi.cli.local_cloud",
    "npa_pulumi.cli.preflight_commands",
    "npa_pulumi.cli.spec_commands",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="npa-pulumi")
def cli() -> None:
    """Deploy and operate fleets of Nebius Managed Kubernetes GPU training clusters from one
    npa.fleet/v0.0.1 spec, with one Pulumi stack per (project, cluster)."""


def _register_commands() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(cli)


_register_commands()


def main() -> None:
    cli(prog_name="npa-pulumi")


if __name__ == "__main__":
    main()
