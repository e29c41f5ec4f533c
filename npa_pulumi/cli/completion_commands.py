"""`completion bash|zsh|fish`: print the shell's completion script (click's own, see cli/completion.py)."""

from __future__ import annotations

import click

from npa_pulumi.cli.completion import SHELLS, completion_source


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
def completion_command(shell: str) -> None:
    """Print the completion script for SHELL. Install it with:

    \b
      bash:  eval "$(npa-pulumi completion bash)"   (in ~/.bashrc)
      zsh:   eval "$(npa-pulumi completion zsh)"    (in ~/.zshrc, after compinit)
      fish:  npa-pulumi completion fish > ~/.config/fish/completions/npa-pulumi.fish

    Commands, flags and choices complete; --only-projects and --only-clusters complete from the --spec
    given before them."""
    from npa_pulumi.cli.main import cli

    click.echo(completion_source(shell, cli))


def register(group: click.Group) -> None:
    group.add_command(completion_command)
