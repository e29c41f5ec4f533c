"""A package's public names loaded on first use (PEP 562), for packages whose modules are costly to import
and whose users each need only some of them (`npa_pulumi.components` in a provider host, `npa_pulumi.plan`
and `npa_pulumi.cloud.nebius` in every command).

    _MODULE_OF = {"plan_document": "document", "public_name": "module:its_name_there", ...}
    __getattr__, __dir__ = lazy_names(__name__, _MODULE_OF, globals())

A `module:name` entry offers a module's name under another (a package's face may name a thing for what it
is to its users where its module names it for its neighbours).

Type checkers read the names from the package's `if TYPE_CHECKING:` imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, module_of: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's `__getattr__` (imports the name's module once, then keeps the name in the package)
    and `__dir__` (the names already loaded and those still to come)."""

    def getattr_(name: str) -> Any:
        where = module_of.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, there = where.partition(":")
        value = getattr(importlib.import_module(f"{package}.{module}"), there or name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted([*namespace, *module_of])

    return getattr_, dir_
