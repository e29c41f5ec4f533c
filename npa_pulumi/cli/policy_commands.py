"""`npa-pulumi policy ...`: the fleet-guardrails CrossGuard pack as the CLI sees it.

Reads npa_pulumi.policies.catalog only, so it works without the engine, pulumi-policy or a spec.
"""

from __future__ import annotations

import click

from npa_pulumi.cli.common import output_option
from npa_pulumi.output.streams import emit_json
from npa_pulumi.policies import catalog


def _text_listing() -> str:
    listed = (*catalog.POLICIES, *catalog.FLEET_POLICIES)
    width = max(len(p.name) for p in listed)
    lines = [f"Policy pack {catalog.PACK_NAME} ({len(listed)} policies)", ""]
    for info in listed:
        lines.append(f"{info.name:<{width}}  {info.level:<9}  {info.kind:<8}  {info.description}")
        if info.config_schema:
            settings = ", ".join(
                f"{k}={v['default']!r}" if "default" in v else k for k, v in info.config_schema.items()
            )
            lines.append(f"{'':<{width}}  config: {settings}")
    lines += [
        "",
        'Change a level with a policy config file, e.g. {"fleet-tags-present": "mandatory"} or '
        '{"all": "advisory"}; see policies/fleet-guardrails/README.md.',
    ]
    return "\n".join(lines)


@click.group("policy")
def policy_group() -> None:
    """The fleet-guardrails CrossGuard policy pack that runs on every preview and up."""


@policy_group.command("list")
@output_option("text", "json")
def list_policies(output: str) -> None:
    """List the policies with their default enforcement levels and descriptions."""
    if output == "json":
        emit_json(catalog.catalog_document())
    else:
        click.echo(_text_listing())


def register(group: click.Group) -> None:
    group.add_command(policy_group)
