"""The `npa-pulumi` command line. Each concern registers its commands from its own module."""

from __future__ import annotations

import functools
import importlib
from importlib.metadata import EntryPoint, entry_points

import click

from npa_pulumi import __version__
from npa_pulumi.runtime.interpreter import tune_for_a_command

# Which module registers each top-level command (its `register(group: click.Group) -> None`). A module is
# imported only when one of its commands runs (or for --help): importing all of them costs ~0.1 s on
# every invocation, a tenth of `plan` on a large fleet. Keeping the map explicit makes the CLI surface
# easy to audit; tests/unit/cli/test_cli_main.py checks it against what each module registers.
COMMAND_OWNERS: dict[str, str] = {
    "policy": "npa_pulumi.cli.policy_commands",
    "backend": "npa_pulumi.cli.backend_commands",
    "adopt": "npa_pulumi.cli.adopt_commands",
    "up": "npa_pulumi.cli.deploy_commands",
    "deploy": "npa_pulumi.cli.deploy_commands",
    "preview": "npa_pulumi.cli.deploy_commands",
    "preview-merge": "npa_pulumi.cli.deploy_commands",
    "destroy": "npa_pulumi.cli.teardown_commands",
    "cleanup": "npa_pulumi.cli.teardown_commands",
    "reconcile": "npa_pulumi.cli.reconcile_commands",
    "refresh": "npa_pulumi.cli.status_commands",
    "status": "npa_pulumi.cli.status_commands",
    "stacks": "npa_pulumi.cli.status_commands",
    "kubeconfig": "npa_pulumi.cli.status_commands",
    "verify-mig": "npa_pulumi.cli.verify_commands",
    "verify-graphics": "npa_pulumi.cli.verify_commands",
    "verify-storage": "npa_pulumi.cli.verify_commands",
    "verify-fabric": "npa_pulumi.cli.verify_commands",
    "health": "npa_pulumi.cli.health_commands",
    "preflight": "npa_pulumi.cli.preflight_commands",
    "plan": "npa_pulumi.cli.spec_commands",
    "prices": "npa_pulumi.cli.cost_commands",
    "schema": "npa_pulumi.cli.spec_commands",
    "tfvars": "npa_pulumi.cli.spec_commands",
    "doctor": "npa_pulumi.cli.doctor_commands",
    "report": "npa_pulumi.cli.report_commands",
    "audit": "npa_pulumi.cli.audit_commands",
    "completion": "npa_pulumi.cli.completion_commands",
    "upgrade": "npa_pulumi.cli.upgrade_commands",
    "approve": "npa_pulumi.cli.approval_commands",
}
COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(COMMAND_OWNERS.values()))
# Command groups of packages above the CLI, which it must not import (the local cloud's `local-cloud`):
# each registers its module (with the same `register(group)`) under its command's name in this entry-point
# group (pyproject.toml), as the simulator registers its cloud adapter for cloud/factory.py.
PLUGIN_GROUP = "npa_pulumi.commands"


@functools.cache
def plugin_commands() -> dict[str, EntryPoint]:
    """The commands registered in `PLUGIN_GROUP` (read once: scanning the installed metadata costs a few
    milliseconds, paid only when a command outside `COMMAND_OWNERS` is looked up or all are listed)."""
    found = {entry.name: entry for entry in entry_points(group=PLUGIN_GROUP)}
    return {name: entry for name, entry in found.items() if name not in COMMAND_OWNERS}


class _LazyGroup(click.Group):
    """Registers a command module the first time one of its commands is looked up."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMAND_OWNERS) | set(plugin_commands()) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMAND_OWNERS:
            importlib.import_module(COMMAND_OWNERS[cmd_name]).register(self)
        elif cmd_name not in self.commands and cmd_name in plugin_commands():
            plugin_commands()[cmd_name].load().register(self)
        return self.commands.get(cmd_name)


@click.group(
    cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110}
)
@click.version_option(__version__, prog_name="npa-pulumi")
def cli() -> None:
    """Deploy and operate fleets of Nebius Managed Kubernetes GPU training clusters from one
    npa.fleet/v0.0.1 spec, with one Pulumi stack per (project, cluster)."""


def main() -> None:
    tune_for_a_command()  # before any command module loads
    cli(prog_name="npa-pulumi")


if __name__ == "__main__":
    main()
