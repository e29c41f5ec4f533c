"""Which `CloudPort` methods each wire test exercises, declared and then checked.

A test says `@covers("create_project", "get_project")`. Its adapter is wrapped in a `RecordingCloud`,
and at teardown the fixture asserts that every declared method really was called through the port:
the declaration cannot drift from what the test does. `port_methods()` enumerates the Protocol, and a
meta-test asserts every method is declared by at least one wire test.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from npa_pulumi.cloud.port import CloudPort

F = TypeVar("F", bound=Callable[..., Any])
REGISTRY: dict[str, set[str]] = {}  # "module::test" -> methods
ATTRIBUTE = "__wire_covers__"


def port_methods() -> set[str]:
    return {
        name
        for name, member in vars(CloudPort).items()
        if not name.startswith("_") and inspect.isfunction(member)
    }


def covers(*methods: str) -> Callable[[F], F]:
    unknown = set(methods) - port_methods()
    if unknown:
        raise ValueError(f"not CloudPort methods: {sorted(unknown)}")

    def mark(fn: F) -> F:
        setattr(fn, ATTRIBUTE, frozenset(methods))
        REGISTRY[f"{fn.__module__}::{fn.__qualname__}"] = set(methods)
        return fn

    return mark


def declared(fn: Callable[..., Any]) -> frozenset[str]:
    found: frozenset[str] = getattr(fn, ATTRIBUTE, frozenset())
    return found


class RecordingCloud:
    """Forwards everything to the wrapped adapter and remembers which port methods were called."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.called: set[str] = set()

    @property
    def inner(self) -> Any:
        return self._inner

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name in port_methods() and callable(value):

            def recorded(*args: Any, **kwargs: Any) -> Any:
                self.called.add(name)
                return value(*args, **kwargs)

            return recorded
        return value
