"""Structural mutation of a spec document, shared by the spec property tests (tests/unit/spec/
test_spec_property.py) and the fuzz campaign (tests/chaos/test_spec_fuzz.py): each draws its own values,
keys and positions; how a drawn mutation is applied is the same."""

from __future__ import annotations

import copy
import math
from typing import Any

# What `mutate` can do to the node at a path. `retype` wraps a value in a list (a list in a mapping).
ACTIONS = ("replace", "delete", "insert", "duplicate", "retype")


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path in a document, the document itself (`()`) first, then depth first."""
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += paths(value, (*prefix, index))
    return found


def keys(node: Any) -> set[str]:
    """Every mapping key anywhere in a document."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            found.add(str(key))
            found |= keys(value)
    elif isinstance(node, list):
        for value in node:
            found |= keys(value)
    return found


def mutate(document: Any, path: tuple[Any, ...], action: str, value: Any, key: str) -> Any:
    """`document` with one action applied at `path` (in place where it can be; the result is returned for
    the root's `replace`). An action that does not fit the node there leaves the document as it was."""
    if not path:
        return value if action == "replace" else document
    parent = document
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if action == "replace":
        parent[last] = value
    elif action == "delete":
        del parent[last]
    elif action == "insert" and isinstance(parent[last], dict):
        parent[last][key] = value
    elif action == "duplicate" and isinstance(parent, list):
        parent.append(copy.deepcopy(parent[last]))
    elif action == "retype":
        current = parent[last]
        parent[last] = [current] if not isinstance(current, list) else {"x": current}
    return document


def mutated(document: Any, mutations: list[tuple[str, Any, str, float]]) -> Any:
    """A deep copy of `document` with each (action, value, key, where) applied in turn; `where` in [0, 1)
    picks the path among the document's paths at that moment."""
    result = copy.deepcopy(document)
    for action, value, key, where in mutations:
        found = paths(result)
        result = mutate(result, found[math.floor(where * len(found))], action, value, key)
    return result
