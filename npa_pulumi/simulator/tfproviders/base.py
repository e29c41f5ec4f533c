"""What every local provider's handlers share: the call context and the handler shapes the worker
dispatches to (tools/localcloud-providers/PROTOCOL.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

State = dict[str, Any]


class ProviderError(Exception):
    """A diagnostic for Terraform: `summary` is its one line, `detail` the rest."""

    def __init__(self, summary: str, detail: str = "") -> None:
        super().__init__(summary)
        self.summary = summary
        self.detail = detail


@dataclass
class CallContext:
    """One call: the provider block's configuration (JSON, unknowns as null), what the worker keeps
    between calls of the same provider process (clients, caches), and on create and update the
    resource's configuration (`config`: the only place a write-only attribute's value arrives)."""

    provider_config: dict[str, Any]
    cache: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)


class ResourceHandler(Protocol):
    def create(self, ctx: CallContext, planned: State) -> State: ...

    def read(self, ctx: CallContext, state: State) -> State | None: ...

    def update(self, ctx: CallContext, planned: State, prior: State) -> State: ...

    def delete(self, ctx: CallContext, state: State) -> None: ...

    def import_(self, ctx: CallContext, import_id: str) -> State: ...


class StateOnly:
    """The read, update and delete of a resource that lives in Terraform's state alone (a timestamp, a group
    membership the local cloud does not model): what the state holds is what there is."""

    def read(self, ctx: CallContext, state: State) -> State | None:
        return state

    def update(self, ctx: CallContext, planned: State, prior: State) -> State:
        return {**prior, **{k: v for k, v in planned.items() if v is not None}}

    def delete(self, ctx: CallContext, state: State) -> None:
        return None


class DataSourceHandler(Protocol):
    def read_data(self, ctx: CallContext, config: State) -> State: ...


class EphemeralHandler(Protocol):
    def open_ephemeral(self, ctx: CallContext, config: State) -> State: ...


@dataclass(frozen=True)
class ProviderHandlers:
    """One provider's handlers by Terraform type name; the worker's registry maps `<namespace>/<type>`
    to one of these."""

    resources: dict[str, ResourceHandler] = field(default_factory=dict)
    data_sources: dict[str, DataSourceHandler] = field(default_factory=dict)
    ephemeral_resources: dict[str, EphemeralHandler] = field(default_factory=dict)
