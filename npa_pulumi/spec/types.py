"""Field types for the spec models.

YAML is forgiving about types in ways that matter: `k8s_version: 1.34` is a float, `count: "2"` a string.
These annotated types accept what the original tool accepted where that is unambiguous (a number where
text is expected, a digit string where a count is expected) and reject the rest with a short message.
They never echo the offending value, because some fields (capacity-block ids) must not be printed.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer
from pydantic_core import PydanticCustomError

from npa_pulumi.spec.constants import BackendKind

_DIGITS = re.compile(r"\s*[+-]?\d+\s*")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        # YAML 1.1 (as in the original) reads unquoted yes/no/on/off/true/false as booleans.
        raise PydanticCustomError(
            "string_type", "must be text, not a boolean (quote values such as 'on' or 'no')"
        )
    if isinstance(value, (int, float)):
        # Numbers parsed from YAML remember their source text (`1.30` stays "1.30").
        return str(getattr(value, "yaml_text", value))
    raise PydanticCustomError("string_type", "must be text")


def _strict_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise PydanticCustomError("string_type", "must be a string")


def _lower_text(value: Any) -> str:
    return _strict_text(value).strip().lower()


def _integer(value: Any) -> int:
    if isinstance(value, bool):
        raise PydanticCustomError("int_type", "must be an integer, not a boolean")
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _DIGITS.fullmatch(value):
        return int(value)
    raise PydanticCustomError("int_type", "must be an integer")


# Only a model that keeps its nulls (KubeRaySpec) lets a None reach a field: elsewhere null means unset.
_NOT_NULL = "not null (leave it out for the default)"


def _strict_integer(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    if value is None:
        raise PydanticCustomError("int_type", f"must be an integer, {_NOT_NULL}")
    raise PydanticCustomError("int_type", "must be an integer (not a boolean, string or float)")


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value is None:
        raise PydanticCustomError("bool_type", f"must be a boolean (true or false), {_NOT_NULL}")
    raise PydanticCustomError("bool_type", "must be a boolean (true or false)")


# Text; a YAML number is taken as the text it was written as.
Text = Annotated[str, BeforeValidator(_text, json_schema_input_type=str | int | float)]
# Text that must be written as a string.
StrictText = Annotated[str, BeforeValidator(_strict_text, json_schema_input_type=str)]
# A string, stripped and lower-cased (MIG strategy/config).
LowerText = Annotated[str, BeforeValidator(_lower_text, json_schema_input_type=str)]
# An integer; integral floats and digit strings are accepted, booleans are not.
Integer = Annotated[int, BeforeValidator(_integer, json_schema_input_type=int)]
# A real integer only (KubeRay's typed policy).
StrictInteger = Annotated[int, BeforeValidator(_strict_integer, json_schema_input_type=int)]
# true or false only: `bool("false")` being True in the original is exactly the bug this prevents.
Boolean = Annotated[bool, BeforeValidator(_boolean, json_schema_input_type=bool)]

# A cluster's backend: the enum in Python, its plain string in every dump (YAML data, JSON), as before the
# vocabulary was an enum.
Backend = Annotated[BackendKind, PlainSerializer(lambda kind: kind.value, return_type=str)]
