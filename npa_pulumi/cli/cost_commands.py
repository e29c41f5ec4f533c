"""`npa-pulumi prices`: the price catalog in use, and the `--prices FILE` option the costed commands share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from npa_pulumi.cli.common import output_option, run_guarded
from npa_pulumi.output.streams import emit_json

F = TypeVar("F", bound=Callable[..., Any])

prices_option = click.option(
    "--prices",
    "prices",
    default=None,
    type=click.Path(dir_okay=False),
    envvar="NPA_PRICES",
    show_envvar=True,
    help="A price catalog (YAML/JSON, the shipped catalog's format) layered over the shipped one: "
    "negotiated prices, reserved capacity; `mode: replace` uses it alone. See `npa-pulumi prices`.",
)


def _text(document: dict[str, Any]) -> str:
    lines = [f"Prices in USD; a month is {document['hours_per_month']} hours. Looked up in this order:"]
    for layer in document["files"]:
        lines += ["", f"{layer['origin']}: version {layer.get('version') or '-'}, {layer.get('date') or '-'}"]
        for key, source in (layer.get("sources") or {}).items():
            lines.append(
                f"  source {key} ({source['date']}): {source['title']} {source.get('url', '')}".rstrip()
            )
        for entry in layer.get("compute") or []:
            region = f" [{entry['region']}]" if entry.get("region") else ""
            lines.append(
                f"  {entry['platform']} {entry['preset']}{region}: "
                f"on-demand {_price(entry.get('on_demand_hourly_usd'), '/h')}, "
                f"preemptible {_price(entry.get('preemptible_hourly_usd'), '/h')}  "
                f"({entry.get('source') or '-'})"
            )
        for entry in layer.get("units") or []:
            region = f" [{entry['region']}]" if entry.get("region") else ""
            lines.append(
                f"  {entry['platform']}{region} per unit: GPU {_price(entry.get('gpu_hourly_usd'), '/h')}, "
                f"vCPU {_price(entry.get('vcpu_hourly_usd'), '/h')}, "
                f"GiB {_price(entry.get('memory_gib_hourly_usd'), '/h')}  ({entry.get('source') or '-'})"
            )
        for entry in layer.get("reserved") or []:
            lines.append(
                f"  reserved {entry['platform']} {entry.get('preset') or '(any preset)'}: "
                f"{_price(entry['hourly_usd'], '/h')}  ({entry.get('source') or '-'})"
            )
        for entry in layer.get("storage") or []:
            kind = entry["kind"] + (f" ({entry['type']})" if entry.get("type") else "")
            price = entry.get("gib_month_usd")
            shown = _price(price, "/GiB-month") if price is not None else f"unknown: {entry.get('reason')}"
            lines.append(f"  {kind}: {shown}")
        for entry in layer.get("unpriced") or []:
            preset = f" {entry['preset']}" if entry.get("preset") else ""
            lines.append(f"  {entry['platform']}{preset}: unknown: {entry['reason']}")
    return "\n".join(lines) + "\n"


def _price(value: Any, per: str) -> str:
    return "unknown" if value is None else f"${value:g}{per}"


@click.command("prices")
@output_option("text", "json")
@prices_option
def prices_command(output: str, prices: str | None) -> None:
    """Print the price catalog in use: the shipped one, and a --prices file (or $NPA_PRICES) over it."""

    def body() -> int:
        from npa_pulumi.plan.prices import catalog_document, load_catalog

        document = catalog_document(load_catalog(prices))
        if output == "json":
            emit_json(document)
        else:
            click.echo(_text(document), nl=False)
        return 0

    run_guarded(body, output)


def register(group: click.Group) -> None:
    group.add_command(prices_command)
