"""Problems before they are located, and the translation of pydantic errors into them."""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from npa_pulumi.spec.constants import SOPERATOR_IDENTITY_FIELDS
from npa_pulumi.spec.models import SoperatorSpec
from npa_pulumi.spec.names import PathTuple, unknown_key_hint


@dataclass(frozen=True)
class RawProblem:
    """A problem at a spec path (a tuple), not yet given a YAML position."""

    path: PathTuple
    message: str
    hint: str | None = None


def problems_from_validation(
    err: ValidationError, model: type[BaseModel], prefix: PathTuple = ()
) -> list[RawProblem]:
    """One RawProblem per pydantic error, with messages for people and never the offending value."""
    problems: list[RawProblem] = []
    for error in err.errors(include_url=False, include_input=False):
        loc = tuple(part for part in error["loc"] if isinstance(part, (str, int)))
        problems.append(_problem(error, model, prefix, loc))
    return problems


_MESSAGES = {
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "dict_type": "must be a mapping",
    "list_type": "must be a list",
    "string_type": "must be text",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "bool_type": "must be a boolean (true or false)",
    "bool_parsing": "must be a boolean (true or false)",
    "missing": "is required",
}


def _problem(error: Any, model: type[BaseModel], prefix: PathTuple, loc: PathTuple) -> RawProblem:
    kind = error["type"]
    path = (*prefix, *loc)
    if kind == "extra_forbidden" and loc:
        key = str(loc[-1])
        owner = model_at(model, loc[:-1])
        if owner is SoperatorSpec and key in SOPERATOR_IDENTITY_FIELDS:
            return RawProblem(
                path,
                f"a soperator payload must not set target identity field '{key}'",
                "the fleet owns target identity: set tenant_id/region at the top level and project_id on "
                "the project",
            )
        choices = field_names(owner) if owner is not None else []
        return RawProblem(path, f"unknown field '{key}'", unknown_key_hint(key, choices) if choices else None)
    if kind == "literal_error":
        expected = error.get("ctx", {}).get("expected", "")
        return RawProblem(path, "has an unsupported value", f"expected {expected}" if expected else None)
    if kind == "value_error":
        message = str(error.get("ctx", {}).get("error", error["msg"]))
        return RawProblem(path, message)
    message = error["msg"] if kind not in _MESSAGES or error["msg"].startswith("must ") else _MESSAGES[kind]
    return RawProblem(path, message)


def field_names(model: type[BaseModel]) -> list[str]:
    """The names a YAML mapping for `model` may use (aliases where a field has one)."""
    return [info.alias or name for name, info in model.model_fields.items() if not info.exclude]


def model_at(model: type[BaseModel], loc: PathTuple) -> type[BaseModel] | None:
    """The model class validating the mapping at `loc` inside `model`, if any."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            current = _element_model(current)
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            current = _element_model(current)
            if current is None:
                return None
        by_name = {info.alias or name: info for name, info in current.model_fields.items()}
        info = by_name.get(part)
        if info is None:
            return None
        current = info.annotation
    return _model_in(current)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _element_model(annotation: Any) -> Any:
    """Step into a list (or Optional list) annotation."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if arg is not type(None):
                return _element_model(arg)
        return None
    if origin is list:
        return typing.get_args(annotation)[0]
    return annotation
