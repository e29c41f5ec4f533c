"""The top-level CLI: the lazy command map names exactly what each module registers, and looking a
command up loads only its own module."""

from __future__ import annotations

import subprocess
import sys

import click
from click.testing import CliRunner

from npa_pulumi.cli.main import COMMAND_MODULES, COMMAND_OWNERS, cli, plugin_commands


def test_command_map_matches_each_modules_registration() -> None:
    import importlib

    registered: dict[str, str] = {}
    for module in COMMAND_MODULES:
        group = click.Group()
        importlib.import_module(module).register(group)
        registered.update(dict.fromkeys(group.commands, module))
    assert registered == COMMAND_OWNERS


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0, result.output
    assert "local-cloud" in plugin_commands()  # a command group outside the CLI, found by its entry point
    for name in [*COMMAND_OWNERS, *plugin_commands()]:
        assert f"  {name} " in result.output or f"  {name}\n" in result.output, name


def test_a_command_loads_only_its_own_module() -> None:
    probe = (
        "import sys\n"
        "from npa_pulumi.cli.main import cli\n"
        "try:\n"
        "    cli(['schema'], prog_name='npa-pulumi')\n"
        "except SystemExit:\n"
        "    pass\n"
        "mine = ('npa_pulumi.cli.', 'npa_pulumi.simulator')\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(mine))\n"
        "print(' '.join(loaded), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(out.stderr.split())
    assert "npa_pulumi.cli.spec_commands" in loaded
    assert not loaded & {
        "npa_pulumi.cli.deploy_commands",
        "npa_pulumi.cli.teardown_commands",
        "npa_pulumi.cli.status_commands",
        "npa_pulumi.cli.verify_commands",
        "npa_pulumi.simulator_cli.commands",
        "npa_pulumi.simulator",
        "npa_pulumi.cli.policy_commands",
    }


def test_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["upp"])
    assert result.exit_code == 2
    assert "No such command" in result.output
