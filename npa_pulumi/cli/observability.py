"""The fleet commands' `--trace`, `--trace-file` and `--notify`: a trace of the whole command
(runtime/tracing.py) and a webhook when the run needs a person (output/notifications.py), to `--notify`'s
URLs and the spec's `notify:` list.

`observed` wraps a fleet command's callback (fleet_options.py applies it): it starts the root span before
the command's body and, however the body ends (its exit code arrives as SystemExit), posts the run's
notification and ends and exports the trace. `health`, which has no FleetResult, posts through
`health_notifier` as it reads. A notification or a trace that could not be sent is a warning on stderr,
never a failed command. Without the flags nothing is imported: tracing off costs nothing.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from npa_pulumi.runtime import tracing

if TYPE_CHECKING:
    from npa_pulumi.output.health import FleetHealth
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
        _RUN.urls, _RUN.spec_path = urls, kw.get("spec_path")
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
            _after(code)

    return cast(F, command)


def notification_targets() -> tuple[list[str], list[str]]:
    """Where this command's notifications go: its `--notify` URLs, then its spec's `notify:` list (read
    again here, only when a notification is due), and the warnings of entries that give no URL."""
    from npa_pulumi.output.notifications import targets

    entries: list[str] = []
    spec_path = getattr(_RUN, "spec_path", None)
    if spec_path:
        from npa_pulumi.errors import NpaError
        from npa_pulumi.spec import load_spec

        with suppress(NpaError):  # the command reports a bad spec itself
            entries = list(load_spec(spec_path).notify)
    return targets(getattr(_RUN, "urls", ()), entries)


def health_notifier() -> Callable[[FleetHealth], None] | None:
    """`health`'s notifications, called with each read: one event when a cluster is degraded or below
    --min-usable (the first read), then only when a cluster's condition changes (`--watch`); None when the
    command has no webhook."""
    from npa_pulumi.output.notifications import HealthNotifier

    urls, warnings = notification_targets()
    _print_warnings(warnings)
    if not urls:
        return None
    notifier = HealthNotifier(urls)

    def on_report(report: FleetHealth) -> None:
        _print_warnings(notifier(report))

    return on_report


def _print_warnings(warnings: list[str]) -> None:
    from npa_pulumi.cli.common import stderr_console

    for warning in warnings:
        stderr_console.print(f"warning: {warning}", markup=False, soft_wrap=True, style="yellow")


def _after(code: Any) -> None:
    result: FleetResult | None = getattr(_RUN, "result", None)
    warnings: list[str] = []
    if result is not None:
        from npa_pulumi.output.notifications import notify, reasons

        if reasons(result):
            urls, warnings = notification_targets()
            warnings += notify(result, urls)
    if tracing.active():
        status = result.outcome if result is not None else ("ok" if code in (0, None) else f"exit {code}")
        attributes: dict[str, Any] = {"npa.exit_code": str(code if code is not None else 0)}
        if result is not None:
            attributes |= {"npa.fleet": result.fleet, "npa.backend": result.backend}
            attributes |= {f"npa.{name}": count for name, count in result.totals().items()}
        warnings += tracing.finish(status, attributes)
    _print_warnings(warnings)
