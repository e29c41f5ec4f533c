"""What else a project can hold, beside what the fleet deploys: compute instances (VMs) and disks,
container registries and IAM groups (VPC security groups are with the networks, in vpc.py).

The fleet creates none of these itself except a bucket grant's IAM group (storage.py); they exist so
that a test (or a person at `local-cloud add`) can put into a project what a user could, and so that a
teardown's inventory of a project is as complete as the cloud's. None of them draws on a quota here.
Every kind has the same three operations (`create_<noun>`, `list_<plural>`, `delete_<noun>`), so each is
one row of `HELD_KINDS` rather than code of its own. `set_labels` edits any object's labels out of band,
as a person in the console could.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from npa_pulumi.cloud.errors import InvalidArgument
from npa_pulumi.simulator import records
from npa_pulumi.simulator.store import Store
from npa_pulumi.simulator.transaction import clean_labels


@dataclass(frozen=True)
class HeldKind:
    """One kind a project can hold: its row kind, the nouns of its operations and its own fields."""

    kind: str  # the `resources.kind`
    noun: str  # create_<noun>, delete_<noun>(<noun>_id)
    plural: str  # list_<plural>
    fields: tuple[tuple[str, Any], ...] = ()  # its create's own arguments with their defaults, as stored
    positive: tuple[str, ...] = ()  # fields that must be positive integers


HELD_KINDS: tuple[HeldKind, ...] = (
    HeldKind("instance", "instance", "instances", (("platform", "cpu-d3"), ("preset", "4vcpu-16gb"))),
    HeldKind("disk", "disk", "disks", (("size_bytes", 64 * 1024**3),), positive=("size_bytes",)),
    HeldKind("registry", "registry", "registries"),
    HeldKind("iam_group", "group", "groups"),
)
BY_NOUN = {held.noun: held for held in HELD_KINDS}


def _is_positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class Holdings:
    """The held kinds' operations over the store: `create`, `list` and `delete` of any row of
    `HELD_KINDS`, and `operation(name)`, the per-kind operation (`create_disk`, ...) with its signature."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def create(
        self,
        held: HeldKind,
        project_id: str,
        name: str,
        fields: dict[str, Any],
        labels: dict[str, str] | None = None,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        for field in held.positive:
            if not _is_positive(fields[field]):
                raise InvalidArgument(f"a {held.noun} needs a positive integer {field}")
        data = {**fields, "labels": clean_labels(labels)}
        params = {"project_id": project_id, "name": name, **data}
        with self.store.op(f"create_{held.noun}", params, write=True, timeout_s=timeout_s) as ctx:
            project = ctx.project_row(project_id)
            return ctx.create(
                held.kind,
                name=name,
                scope=project_id,
                project_id=project_id,
                parent_id=project_id,
                region=project["region"],
                key=idempotency_key,
                data=data,
                params=params,
                charges=[],
            )

    def list(self, held: HeldKind, project_id: str) -> list[dict[str, Any]]:
        with self.store.op(f"list_{held.plural}", {"project_id": project_id}, write=False) as ctx:
            ctx.project_row(project_id)
            return ctx.list_of(held.kind, "project_id", project_id)

    def delete(self, held: HeldKind, resource_id: str, timeout_s: float | None = None) -> None:
        """A group goes with its memberships and access permits: a bucket grant through it ends."""
        params = {f"{held.kind}_id": resource_id}
        with self.store.op(f"delete_{held.noun}", params, write=True, timeout_s=timeout_s) as ctx:
            ctx.row(held.kind, resource_id)
            ctx.delete_row(resource_id)

    def operation(self, name: str) -> Callable[..., Any]:
        """`create_<noun>`, `list_<plural>` or `delete_<noun>` of a held kind, as a function whose
        signature is the operation's (the machine-facing API checks arguments against it)."""
        for held in HELD_KINDS:
            if name == f"create_{held.noun}":
                return self._create_operation(held)
            if name == f"list_{held.plural}":
                return self._list_operation(held)
            if name == f"delete_{held.noun}":
                return self._delete_operation(held)
        raise AttributeError(name)

    def _create_operation(self, held: HeldKind) -> Callable[..., Any]:
        def body(given: dict[str, Any]) -> dict[str, Any]:
            fields = {field: given.pop(field) for field, _ in held.fields}
            return self.create(held, fields=fields, **given)

        optional = [("labels", None), ("idempotency_key", None), ("timeout_s", None)]
        return _operation(f"create_{held.noun}", ["project_id", "name", *held.fields, *optional], body)

    def _list_operation(self, held: HeldKind) -> Callable[..., Any]:
        return _operation(f"list_{held.plural}", ["project_id"], lambda given: self.list(held, **given))

    def _delete_operation(self, held: HeldKind) -> Callable[..., Any]:
        def body(given: dict[str, Any]) -> None:
            self.delete(held, given[f"{held.noun}_id"], given["timeout_s"])

        return _operation(f"delete_{held.noun}", [f"{held.noun}_id", ("timeout_s", None)], body)

    # ------------------------------------------------------------------ labels, edited out of band

    def set_labels(self, resource_id: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
        """Replace an object's labels, as a person editing them in the console would (a teardown must
        then no longer take the object for the fleet's). Any kind that carries labels."""
        with self.store.op("set_labels", {"resource_id": resource_id}, write=True) as ctx:
            row = ctx.conn.execute("SELECT * FROM resources WHERE id = ?", (resource_id,)).fetchone()
            if row is None or "labels" not in records.to_record(row, ctx.now):
                raise InvalidArgument(f"{resource_id} is not an object with labels")
            kind = str(row["kind"])
            ctx.row(kind, resource_id)  # not found / another tenant, as for any call
            ctx.set_data(resource_id, {**records.data_of(row), "labels": clean_labels(labels)})
            return ctx.fetch(kind, resource_id)


def _operation(
    name: str, parameters: list[str | tuple[str, Any]], body: Callable[[dict[str, Any]], Any]
) -> Callable[..., Any]:
    """A function named `name` whose signature is `parameters` (a name, or a name and its default) and
    which calls `body` with its arguments by name, defaults filled in."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    signature = inspect.Signature(
        [
            inspect.Parameter(p, kind) if isinstance(p, str) else inspect.Parameter(p[0], kind, default=p[1])
            for p in parameters
        ]
    )

    def operation(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return body(dict(bound.arguments))

    operation.__name__ = operation.__qualname__ = name
    operation.__signature__ = signature  # type: ignore[attr-defined]
    return operation
