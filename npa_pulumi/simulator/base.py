"""The mixins' foundation while the simulator moves to services: the store (store.py) and the
transaction's helpers (transaction.py) under the names the remaining mixins call."""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from npa_pulumi.simulator import accounting as acct
from npa_pulumi.simulator.store import Store
from npa_pulumi.simulator.transaction import (
    LAGGED_KINDS,
    LocalCloudUnusable,
    OpContext,
    clean_labels,
    fingerprint,
    is_deleted,
    wipe,
)

__all__ = [
    "LAGGED_KINDS",
    "LocalCloudUnusable",
    "OpContext",
    "SimulatorBase",
    "clean_labels",
    "fingerprint",
    "is_deleted",
    "wipe",
]


class SimulatorBase:
    """The simulator bound to one directory (`$NPA_LOCAL_CLOUD_DIR` or `~/.npa-pulumi/local-cloud/`)."""

    def __init__(self, directory: Path | None = None, *, auto_init: bool = True) -> None:
        self.store = Store(directory, auto_init=auto_init)

    @property
    def directory(self) -> Path:
        return self.store.directory

    @property
    def path(self) -> Path:
        return self.store.path

    def is_initialised(self) -> bool:
        return self.store.is_initialised()

    def initialise(self, fixture_path: Path | None = None, *, force: bool = False) -> dict[str, Any]:
        return self.store.initialise(fixture_path, force=force)

    def reset(self) -> None:
        self.store.reset()

    def _connect(self) -> sqlite3.Connection:
        return self.store.connect()

    def _op(
        self,
        op: str,
        params: dict[str, Any],
        *,
        write: bool,
        inject: bool = True,
        reconcile: bool = False,
        timeout_s: float | None = None,
    ) -> AbstractContextManager[OpContext]:
        return self.store.op(op, params, write=write, inject=inject, reconcile=reconcile, timeout_s=timeout_s)

    @staticmethod
    def _row(ctx: OpContext, kind: str, resource_id: str) -> sqlite3.Row:
        return ctx.row(kind, resource_id)

    @staticmethod
    def _project_row(ctx: OpContext, project_id: str) -> sqlite3.Row:
        return ctx.project_row(project_id)

    @staticmethod
    def _check_tenant(ctx: OpContext, tenant_id: str) -> None:
        ctx.check_tenant(tenant_id)

    @staticmethod
    def _block_row(ctx: OpContext, block_id: str) -> sqlite3.Row:
        return ctx.block_row(block_id)

    @staticmethod
    def _fetch(ctx: OpContext, kind: str, resource_id: str) -> dict[str, Any]:
        return ctx.fetch(kind, resource_id)

    @staticmethod
    def _list(ctx: OpContext, kind: str, column: str, value: str) -> list[dict[str, Any]]:
        return ctx.list_of(kind, column, value)

    @staticmethod
    def _find_named(ctx: OpContext, kind: str, project_id: str, name: str) -> dict[str, Any] | None:
        return ctx.find_named(kind, project_id, name)

    @staticmethod
    def _node_groups_using(ctx: OpContext, project_id: str, field: str, target_id: str) -> list[str]:
        return ctx.node_groups_using(project_id, field, target_id)

    @staticmethod
    def _replay(ctx: OpContext, kind: str, key: str | None, params: dict[str, Any]) -> sqlite3.Row | None:
        return ctx.replay(kind, key, params)

    @staticmethod
    def _check_name_free(ctx: OpContext, kind: str, scope: str, name: str) -> None:
        ctx.check_name_free(kind, scope, name)

    @staticmethod
    def _charge(ctx: OpContext, charges: list[acct.Charge], *, region: str, project_id: str) -> None:
        ctx.charge(charges, region=region, project_id=project_id)

    @staticmethod
    def _insert(ctx: OpContext, kind: str, **fields: Any) -> str:
        return ctx.insert(kind, **fields)

    @staticmethod
    def _create(ctx: OpContext, kind: str, **fields: Any) -> dict[str, Any]:
        return ctx.create(kind, **fields)

    @staticmethod
    def _delete_row(ctx: OpContext, resource_id: str) -> None:
        ctx.delete_row(resource_id)
