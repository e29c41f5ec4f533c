"""The typed arguments of the fleet's components and dynamic resources.

Every ComponentResource takes one `*Args` dataclass; every dynamic resource takes one `*Args` dataclass
(values may be `pulumi.Input`s: another resource's outputs) and its provider reads the resolved values
through a pydantic `*Inputs` model at the edge, and writes its results through an `*Outputs` model. The
property names are those in Pulumi state and in docs/resource-contract.md: renaming a field is a state
migration, not a refactor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from pydantic import BaseModel, ConfigDict


@dataclass(frozen=True, kw_only=True)
class FleetResourceArgs:
    """What every fleet resource carries: which cloud adapter its provider uses, and whose it is."""

    cloud: str  # local | nebius
    profile: str  # a Nebius profile; "" for the configured default
    fleet: str
    project_key: str


def as_props(args: FleetResourceArgs) -> dict[str, Any]:
    """A dataclass's fields as resource properties, values as they are (Outputs must not be copied)."""
    return {f.name: getattr(args, f.name) for f in fields(args)}


class ProviderModel(BaseModel):
    """A provider's view of its resource's properties: state holds more keys (outputs, `__provider`) than
    any one model names, so unknown keys are ignored, never rejected."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class FleetResourceInputs(ProviderModel):
    cloud: str
    profile: str = ""
    fleet: str
    project_key: str
    region: str = ""
    tenant_id: str = ""


def with_outputs(props: Mapping[str, Any], outputs: BaseModel) -> dict[str, Any]:
    """The properties a provider hands back: its inputs as they came (so state keeps exactly what the
    program sent), with its outputs set."""
    return {**props, **outputs.model_dump()}
