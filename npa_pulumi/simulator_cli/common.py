"""What the `local-cloud` commands share: the simulator a command works on (`--dir`), and how a command's
body runs (cloud errors and bad values turned into the CLI's exit codes) and speaks (stderr)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from npa_pulumi.cli.common import run_guarded, stderr_console
from npa_pulumi.cloud.errors import CloudError
from npa_pulumi.errors import NpaError, UserInputError
from npa_pulumi.simulator.simulator import LocalSimulator


class LocalCloudCommandError(NpaError):
    """A cloud-side refusal surfaced by a local-cloud command."""

    kind = "local-cloud-error"

    def __init__(self, err: CloudError) -> None:
        super().__init__(str(err))
        self.cloud_error = err

    def to_dict(self) -> dict[str, Any]:
        return self.cloud_error.to_dict()


def simulator_of(ctx: click.Context, *, auto_init: bool = True) -> LocalSimulator:
    directory: Path | None = ctx.obj.get("dir") if ctx.obj else None
    return LocalSimulator(directory, auto_init=auto_init)


def guard(body: Callable[[], int | None], output: str = "text") -> None:
    """run_guarded, with cloud errors and bad values turned into the CLI's exit codes."""

    def wrapped() -> int | None:
        try:
            return body()
        except CloudError as err:
            raise LocalCloudCommandError(err) from None
        except ValueError as err:
            raise UserInputError(str(err)) from None

    run_guarded(wrapped, output)


def say(message: str) -> None:
    stderr_console.print(message, soft_wrap=True, markup=False)
