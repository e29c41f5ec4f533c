"""The environment a dynamic provider's call runs in.

A host the engine starts (or the command's shared host in a process of its own) is started with the engines'
environment (`WorkspaceSettings.env()`: the tenant, the engine's PATH, the backend), so its providers read
`os.environ`. When the orchestrator serves the providers itself (engine/automation/provider_host.py), they
run in the orchestrator's process, whose `os.environ` lacks those overrides: the host sets them for each
provider call (`overlay`), and the providers read their environment through `environ()`/`get()`, never
`os.environ` directly. A context variable, not `os.environ`: the overrides are the command's, and must not
leak into the orchestrator's own subprocesses or another command's providers served in the same process.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType

_NONE: Mapping[str, str] = MappingProxyType({})
_OVERLAY: ContextVar[Mapping[str, str]] = ContextVar("npa_provider_env", default=_NONE)


def environ() -> dict[str, str]:
    """This process's environment with the current provider call's overrides."""
    return {**os.environ, **_OVERLAY.get()}


def get(name: str, default: str | None = None) -> str | None:
    overlay = _OVERLAY.get()
    return overlay[name] if name in overlay else os.environ.get(name, default)


@contextmanager
def overlay(env: Mapping[str, str]) -> Iterator[None]:
    """Run the block (one provider call, in its own thread) with `env` over this process's environment."""
    token = _OVERLAY.set(MappingProxyType(dict(env)))
    try:
        yield
    finally:
        _OVERLAY.reset(token)
