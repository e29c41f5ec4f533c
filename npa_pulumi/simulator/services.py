"""How the simulator's façade names the operations its services answer (simulator.py): one class attribute
per operation, typed as the service's own method, resolved on the instance to that service's bound
method (so `inspect.signature` of an operation is the service method's, which the machine-facing API
checks arguments against)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

S = TypeVar("S")
P = ParamSpec("P")
R = TypeVar("R")


class Served(Generic[S, P, R]):
    """The operation `method` of the service held in the façade's attribute `service`."""

    def __init__(self, service: str, method: Callable[Concatenate[S, P], R]) -> None:
        self.service = service
        self.method = method.__name__

    @overload
    def __get__(self, facade: None, owner: type[Any]) -> Served[S, P, R]: ...

    @overload
    def __get__(self, facade: object, owner: type[Any]) -> Callable[P, R]: ...

    def __get__(self, facade: object | None, owner: type[Any]) -> Served[S, P, R] | Callable[P, R]:
        if facade is None:
            return self
        bound: Callable[P, R] = getattr(getattr(facade, self.service), self.method)
        return bound


class HeldOperation:
    """An operation of a kind a project can hold (holdings.py), made from its row of `HELD_KINDS`: the
    attribute's name is the operation's."""

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, facade: None, owner: type[Any]) -> HeldOperation: ...

    @overload
    def __get__(self, facade: object, owner: type[Any]) -> Callable[..., Any]: ...

    def __get__(self, facade: Any, owner: type[Any]) -> HeldOperation | Callable[..., Any]:
        if facade is None:
            return self
        operation: Callable[..., Any] = facade.holdings.operation(self.name)
        return operation
