"""Each gRPC call the command's provider host serves runs in a fresh context, as in a host of its own.

The Pulumi SDK keeps its runtime settings (`pulumi.runtime.settings.SETTINGS`: the engine's monitor, the
project, whether this is a preview, the monitor's features) in context variables, with one twist
(`pulumi._utils.ContextProperty.fset`): setting a value in a context where it is still None also makes it
the *process-wide default*, which every thread without a context of its own reads. An inline program relies
on that default (it asks the engine for its features from an executor thread), and the SDK's
dynamic-provider host configures `Settings(project=..., stack="stack")` (no monitor) on every call. In a
host of its own that is harmless; in the orchestrator, which also runs inline programs, it reset the
default monitor to None under a running program ("'NoneType' object has no attribute 'GetDeploymentInfo'":
2 of 100 stacks of a first deploy). And the analyzers, which read no settings of their own, would see
whatever program configured last (a preview's `dry_run`, say).

So every call runs in a brand-new `contextvars.Context` in which the settings are what a fresh host process
has after that `configure` — built without touching the defaults (`fresh_context`) — with the provider
environment's overrides (runtime/provider_env.py), and the SDK's own per-call `configure` is switched off
(runtime/provider_host.py). This reads the SDK's `ContextProperty` internals; `check()` fails loudly when
they change, and the orchestrator then serves its providers from a host process instead.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping
from typing import Any

from npa_pulumi.runtime import provider_env

_PLACEHOLDER = object()


def _properties() -> dict[str, Any]:
    from pulumi._utils import ContextProperty
    from pulumi.runtime.settings import Settings

    props = {name: p for name, p in vars(Settings).items() if isinstance(p, ContextProperty)}
    if not props or not all(
        isinstance(getattr(p, "_data", None), contextvars.ContextVar) for p in props.values()
    ):
        raise RuntimeError("the Pulumi SDK's Settings no longer keep their values in ContextProperty._data")
    return props


def check() -> None:
    """Raise RuntimeError if the SDK's settings are not kept the way `fresh_context` expects."""
    fresh_context("project")


def fresh_context(project: str) -> contextvars.Context:
    """A new context holding the SDK settings of a fresh plugin host (`Settings(project, stack="stack",
    organization="organization")`), the process-wide defaults untouched."""
    from pulumi.runtime.settings import Settings

    props = _properties()

    def build() -> None:
        for prop in props.values():
            prop._data.set(_PLACEHOLDER)  # not None: the Settings() below leaves the defaults alone
        Settings(project=project, stack="stack", organization="organization")
        unset = [name for name, prop in props.items() if prop._data.get() is _PLACEHOLDER]
        if unset:
            raise RuntimeError(f"the Pulumi SDK's Settings() no longer sets {', '.join(sorted(unset))}")

    context = contextvars.Context()
    context.run(build)
    return context


def interceptor(env: Mapping[str, str] | None = None) -> Any:
    """A gRPC server interceptor that runs every unary call in `fresh_context`, with `env` over the
    process's environment (runtime/provider_env.py)."""
    import grpc

    overrides = dict(env or {})

    class FreshContext(grpc.ServerInterceptor):
        def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
            handler = continuation(details)
            if handler is None or handler.unary_unary is None:
                return handler
            behavior = handler.unary_unary

            def in_fresh_context(request: Any, context: Any) -> Any:
                project = overrides.get("PULUMI_PROJECT") or provider_env.get("PULUMI_PROJECT") or "project"
                return fresh_context(project).run(_call, behavior, request, context)

            return grpc.unary_unary_rpc_method_handler(
                in_fresh_context,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )

    def _call(behavior: Callable[[Any, Any], Any], request: Any, context: Any) -> Any:
        if not overrides:
            return behavior(request, context)
        with provider_env.overlay(overrides):
            return behavior(request, context)

    return FreshContext()
