"""The fleet commands' `--trace`, `--trace-file` and `--notify`: a trace of the whole command
(runtime/tracing.py) and a webhook when the run needs a person (output/notifications.py).

`observed` wraps a fleet command's callback (fleet_options.py applies it): it starts the root span before
the command's body and, however the body ends (its exit code arrives as SystemExit), posts the run's
notification and ends and exports the trace. A notification or a trace that could not be sent is a warning
on stderr, never a failed command. Without the flags nothing is imported: tracing off costs nothing.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from npa_pulumi.runtime import tracing

if TYPE_CHECKING:
    from npa_pulumi.output.results import FleetResult

F = TypeVar("F", bound=Callable[..., Any])

_RUN = threading.local()  # the result the command's body finished with (fleet_output.finish)


def observability_options(func: F) -> F:
    decorators = [
        click.option(
            "--trace",
            type=click.Choice(tracing.EXPORTERS),
            default=None,
            help="Export an OpenTelemetry trace of the run over OTLP/HTTP (OTEL_EXPORTER_OTLP_ENDPOINT, "
            "OTEL_EXPORTER_OTLP_HEADERS).",
        ),
        click.option(
            "--trace-file",
            default=None,
            type=click.Path(dir_okay=False),
            metavar="FILE",
            help="Write the run's OpenTelemetry trace to FILE in OTLP JSON (`report --timeline FILE` "
            "draws it).",
        ),
        click.option(
            "--notify",
            "notify",
            multiple=True,
            metavar="URL",
            help="POST one JSON event (Slack-compatible `text`) to URL when a rollout halts, a gate fails or "
            "a destroy ends incomplete (repeatable).",
        ),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def finished(result: FleetResult) -> None:
    """The result the command's body is about to print (what the notification and the root span say)."""
    _RUN.result = result


def observed(func: F) -> F:
    """Run the command inside its trace, then notify (see the module's docstring)."""

    @functools.wraps(func)
    def command(*args: Any, **kw: Any) -> Any:
        settings = tracing.TraceSettings(exporter=kw.pop("trace", None), file=kw.pop("trace_file", None))
        urls = tuple(kw.pop("notify", ()) or ())
        _RUN.result = None
        if settings.enabled:
            from npa_pulumi.cloud.redaction import scrub

            context = click.get_current_context(silent=True)
            name = context.command_path if context is not None else "npa-pulumi"
            tracing.start(
                settings,
                name,
                {
                    "npa.command": context.info_name if context is not None else None,
                    "npa.spec": kw.get("spec_path"),
                    "npa.cloud": kw.get("cloud"),
                    "npa.backend": kw.get("backend"),
                    "npa.concurrency": kw.get("concurrency"),
                },
                scrub=scrub,
            )
        code: Any = 0
        try:
            return func(*args, **kw)
        except SystemExit as exit_:
            code = exit_.code
            raise
        except BaseException:
            code = "error"
            raise
        finally:
            _after(urls, code)

    return cast(F, command)


def _after(urls: tuple[str, ...], code: Any) -> None:
    from npa_pulumi.cli.common import stderr_console

    result: FleetResult | None = getattr(_RUN, "result", None)
    warnings: list[str] = []
    if urls and result is not None:
        from npa_pulumi.output.notifications import notify

        warnings += notify(result, urls)
    if tracing.active():
        status = result.outcome if result is not None else ("ok" if code in (0, None) else f"exit {code}")
        attributes: dict[str, Any] = {"npa.exit_code": str(code if code is not None else 0)}
        if result is not None:
            attributes |= {"npa.fleet": result.fleet, "npa.backend": result.backend}
            attributes |= {f"npa.{name}": count for name, count in result.totals().items()}
        warnings += tracing.finish(status, attributes)
    for warning in warnings:
        stderr_console.print(f"warning: {warning}", markup=False, soft_wrap=True, style="yellow")
