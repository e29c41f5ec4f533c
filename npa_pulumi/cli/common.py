"""Shared CLI plumbing: output formats, the one-JSON-document rule, and error reporting.

Contract: with `--output json`, stdout carries exactly one JSON document; everything else (progress,
logs, warnings) goes to stderr. Expected failures print a clear message and exit 1 (operation failed)
or 2 (invalid input), never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from npa_pulumi.errors import EXIT_FAILED, NpaError
from npa_pulumi.output.streams import emit_json

F = TypeVar("F", bound=Callable[..., Any])

# Progress and human messages go to stderr so stdout stays machine-readable.
stderr_console = Console(stderr=True, highlight=False)


def output_option(*choices: str, default: str = "text") -> Callable[[F], F]:
    values = choices or ("text", "json")
    return click.option(
        "--output",
        "-o",
        "output",
        type=click.Choice(values),
        default=default,
        show_default=True,
        help="Output format. json prints one JSON document on stdout; progress goes to stderr.",
    )


def report_error(err: NpaError, output: str = "text") -> int:
    """Print an expected error in the requested format and return its exit code."""
    if output == "json":
        emit_json({"ok": False, "error": err.to_dict()})
    else:
        # The message can hold user text (spec keys, names): escape it so it is never read as markup.
        stderr_console.print(f"[bold red]error:[/] {escape(str(err))}", markup=True, soft_wrap=True)
    return err.exit_code


class CloudFailure(NpaError):
    """A cloud error that reached the CLI: the operation failed (exit 1), reported without a traceback."""

    kind = "cloud"

    def __init__(self, err: Exception) -> None:
        super().__init__(str(err))
        self.cause = err

    def to_dict(self) -> dict[str, Any]:
        cause = self.cause
        return cause.to_dict() if hasattr(cause, "to_dict") else super().to_dict()


def run_guarded(func: Callable[[], int | None], output: str = "text") -> None:
    """Run a command body, turning expected errors into their exit codes."""
    from npa_pulumi.cloud.errors import CloudError

    try:
        code = func()
    except NpaError as err:
        sys.exit(report_error(err, output))
    except CloudError as err:
        sys.exit(report_error(CloudFailure(err), output))
    except KeyboardInterrupt:
        stderr_console.print("interrupted", style="yellow")
        sys.exit(130)
    sys.exit(code or 0)


__all__ = ["EXIT_FAILED", "output_option", "report_error", "run_guarded", "stderr_console"]
