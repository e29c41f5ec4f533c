"""The simulator's foundation: finding/seeding the database, the operation envelope, shared helpers.

Every faultable operation runs inside `_op`: build the `CloudRequest` -> take an injected fault if one is
armed (latency, then a typed error) -> one SQLite transaction (`BEGIN IMMEDIATE` for mutations). Typed
errors raised inside carry the request they came from. Write transactions also give node groups that
wait for quota a chance to start, before the operation (so they keep their place in the queue) and after
it (so capacity a delete frees is used at once).

With `$NPA_LOCAL_CLOUD_CALL_LOG` set to a file, every operation appends its name to it, one a line (what
a benchmark counts to show how a command's reads are batched); nothing else changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npa_pulumi.cloud.errors import (
    AlreadyExists,
    CloudError,
    CloudRequest,
    InvalidArgument,
    NotFound,
    OperationTimeout,
    PermissionDenied,
    QuotaExceeded,
    error_from_kind,
)
from npa_pulumi.errors import NpaError
from npa_pulumi.simulator import accounting as acct
from npa_pulumi.simulator import db, faults, ids, records, scheduling

CALL_LOG_ENV = "NPA_LOCAL_CLOUD_CALL_LOG"


def _log_call(op: str) -> None:
    path = os.environ.get(CALL_LOG_ENV)
    if path:
        # One short line per call in append mode: writes of concurrent callers do not interleave.
        with open(path, "a", encoding="utf-8") as log:
            log.write(op + "\n")


class LocalCloudUnusable(NpaError):
    """The local cloud's directory or database cannot be used (not a cloud-side error)."""

    kind = "local-cloud-unusable"


@dataclass
class OpContext:
    """One operation's transaction: the connection, the simulated tenant, the clock and the request."""

    conn: sqlite3.Connection
    tenant_id: str
    now: float
    request: CloudRequest
    write: bool

    def meta(self, key: str) -> str:
        value = db.get_meta(self.conn, key)
        if value is None:
            raise LocalCloudUnusable(
                f"the local cloud database lacks {key!r}; run `local-cloud init --force`"
            )
        return value

    @property
    def provisioning_seconds(self) -> float:
        return float(self.meta("provisioning_seconds"))

    @property
    def regions(self) -> list[str]:
        return [str(r) for r in json.loads(self.meta("regions"))]


def fingerprint(params: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()


def clean_labels(labels: dict[str, str] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (labels or {}).items()}


def _human(kind: str) -> str:
    return kind.replace("_", " ")


class SimulatorBase:
    """The simulator bound to one directory (`$NPA_LOCAL_CLOUD_DIR` or `~/.npa-pulumi/local-cloud/`)."""

    def __init__(self, directory: Path | None = None, *, auto_init: bool = True) -> None:
        self.directory = Path(directory) if directory is not None else db.cloud_dir()
        self.path = db.db_path(self.directory)
        self.auto_init = auto_init

    # ------------------------------------------------------------------ seeding

    def is_initialised(self) -> bool:
        return db.is_initialised(self.path)

    def initialise(self, fixture_path: Path | None = None, *, force: bool = False) -> dict[str, Any]:
        """Seed the database from a tenant fixture (the shipped default when none is given).

        Returns `{"status": "initialised" | "unchanged" | "conflict", ...}`: an initialised cloud is left
        alone unless `force`; "conflict" means it was seeded from different fixture content.
        """
        from npa_pulumi.simulator import fixture as fx  # pydantic + YAML: only when seeding

        path = Path(fixture_path) if fixture_path is not None else fx.default_fixture_path()
        tenant_fixture, digest = fx.load_fixture(path)
        summary = {
            "directory": str(self.directory),
            "fixture": str(path),
            "tenant_id": tenant_fixture.tenant_id,
        }
        with db.init_lock(self.directory):
            self._secure_files()
            conn = db.connect(self.path)
            try:
                db.create_schema(conn)
                with db.transaction(conn, write=True):
                    if db.get_meta(conn, "initialised_at") is not None and not force:
                        same = db.get_meta(conn, "fixture_sha256") == digest
                        return {"status": "unchanged" if same else "conflict", **summary}
                    wipe(conn)
                    fx.seed(conn, tenant_fixture, str(path), digest)
            finally:
                conn.close()
        return {"status": "initialised", **summary}

    def reset(self) -> None:
        """Forget everything; the next use re-seeds from the default fixture. Safe while other processes
        use the cloud, because it empties the tables in one transaction instead of deleting the file."""
        from npa_pulumi.simulator import s3daemon
        from npa_pulumi.simulator.kube import lifecycle

        if self.path.is_file():
            with db.init_lock(self.directory):
                conn = db.connect(self.path)
                try:
                    db.create_schema(conn)
                    with db.transaction(conn, write=True):
                        wipe(conn)
                finally:
                    conn.close()
        lifecycle.stop_all(self.directory)  # no API server outlives the clusters it served
        s3daemon.stop(self.directory)  # nor the S3 server the buckets it served

    def _secure_files(self) -> None:
        # The database holds access-key hashes and the tenant's inventory: private to the user. (A new
        # directory is created 0700 by init_lock; an existing one the user chose is left as it is.)
        if not self.path.exists():
            self.path.touch(mode=0o600)

    def _auto_initialise(self) -> None:
        if not self.auto_init:
            raise LocalCloudUnusable(
                f"the local cloud at {self.directory} is not initialised; run `npa-pulumi local-cloud init`"
            )
        result = self.initialise()
        if result["status"] == "initialised":
            fixture = result["fixture"]
            sys.stderr.write(
                f"local-cloud: initialised {self.directory} from the default tenant fixture ({fixture})\n"
            )

    def _connect(self) -> sqlite3.Connection:
        """A connection to an initialised database, seeding it from the default fixture on first use."""
        for _ in range(2):
            if self.path.is_file():
                conn = db.connect(self.path)
                try:
                    if db.get_meta(conn, "initialised_at") is not None:
                        db.migrate(self.path, conn)
                        return conn
                except sqlite3.OperationalError:
                    pass  # a file without tables yet
                conn.close()
            self._auto_initialise()
        raise LocalCloudUnusable(f"the local cloud at {self.directory} could not be initialised")

    # ------------------------------------------------------------------ the operation envelope

    @contextlib.contextmanager
    def _op(
        self,
        op: str,
        params: dict[str, Any],
        *,
        write: bool,
        inject: bool = True,
        reconcile: bool = False,
        timeout_s: float | None = None,
    ) -> Iterator[OpContext]:
        """`reconcile=True` on a read: take the write lock when node groups wait for quota, so the
        read reports them started if they now fit (states are computed lazily, there is no daemon)."""
        request = CloudRequest(op, {k: v for k, v in params.items() if v is not None})
        _log_call(op)
        conn = self._connect()
        try:
            if inject:
                self._inject(conn, op, request, timeout_s)
            if reconcile and not write:
                write = scheduling.has_waiting(conn)
            with db.transaction(conn, write=write):
                ctx = OpContext(conn, db.get_meta(conn, "tenant_id") or "", time.time(), request, write)
                if write:
                    self._purge_deleted(conn, ctx.now)
                    scheduling.reconcile_waiting(conn, ctx.tenant_id, ctx.now, ctx.provisioning_seconds)
                yield ctx
                if write:
                    scheduling.reconcile_waiting(conn, ctx.tenant_id, ctx.now, ctx.provisioning_seconds)
        except CloudError as err:
            if err.request is None:
                err.request = request
            raise
        finally:
            conn.close()

    @staticmethod
    def _inject(conn: sqlite3.Connection, op: str, request: CloudRequest, timeout_s: float | None) -> None:
        if not faults.any_armed(conn, op):
            return
        with db.transaction(conn, write=True):
            fault = faults.take(conn, op)
        if fault is None:
            return
        delay = fault.latency_ms / 1000
        if timeout_s is not None and delay >= timeout_s:
            # The operation is not performed: the caller gave up before the service answered.
            time.sleep(timeout_s)
            raise OperationTimeout(f"{op} did not finish within {timeout_s:g}s", request)
        time.sleep(delay)
        if fault.error_kind:
            raise error_from_kind(fault.error_kind, fault.message, request)

    # ------------------------------------------------------------------ lookups

    @staticmethod
    def _row(ctx: OpContext, kind: str, resource_id: str) -> sqlite3.Row:
        row: sqlite3.Row | None = ctx.conn.execute(
            "SELECT * FROM resources WHERE id = ? AND kind = ?", (resource_id, kind)
        ).fetchone()
        if row is None or is_deleted(row, ctx.now):
            raise NotFound(f"{_human(kind)} {resource_id} not found")
        if row["tenant_id"] != ctx.tenant_id:
            raise PermissionDenied(f"{_human(kind)} {resource_id} belongs to another tenant")
        return row

    def _project_row(self, ctx: OpContext, project_id: str) -> sqlite3.Row:
        return self._row(ctx, "project", project_id)

    @staticmethod
    def _check_tenant(ctx: OpContext, tenant_id: str) -> None:
        if tenant_id != ctx.tenant_id:
            raise PermissionDenied(
                f"no access to tenant {tenant_id} (this local cloud simulates {ctx.tenant_id})"
            )

    @staticmethod
    def _block_row(ctx: OpContext, block_id: str) -> sqlite3.Row:
        row: sqlite3.Row | None = ctx.conn.execute(
            "SELECT * FROM capacity_blocks WHERE id = ?", (block_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"capacity block group {block_id} not found")
        if row["parent_id"] != ctx.tenant_id:
            raise PermissionDenied(f"capacity block group {block_id} belongs to another tenant")
        return row

    def _fetch(self, ctx: OpContext, kind: str, resource_id: str) -> dict[str, Any]:
        return records.to_record(self._row(ctx, kind, resource_id), ctx.now)

    @staticmethod
    def _list(ctx: OpContext, kind: str, column: str, value: str) -> list[dict[str, Any]]:
        rows = ctx.conn.execute(
            f"SELECT * FROM resources WHERE kind = ? AND {column} = ? ORDER BY created_at, id", (kind, value)
        ).fetchall()
        return [records.to_record(row, ctx.now) for row in rows if not is_deleted(row, ctx.now)]

    @staticmethod
    def _find_named(ctx: OpContext, kind: str, project_id: str, name: str) -> dict[str, Any] | None:
        row = ctx.conn.execute(
            "SELECT * FROM resources WHERE kind = ? AND project_id = ? AND name = ?", (kind, project_id, name)
        ).fetchone()
        return None if row is None or is_deleted(row, ctx.now) else records.to_record(row, ctx.now)

    @staticmethod
    def _node_groups_using(ctx: OpContext, project_id: str, field: str, target_id: str) -> list[str]:
        """Node groups in the project whose `field` (gpu_cluster_id, or the filesystems list) names target."""
        users = []
        for row in ctx.conn.execute(
            "SELECT id, data FROM resources WHERE kind = 'node_group' AND project_id = ?", (project_id,)
        ):
            value = records.data_of(row).get(field)
            attached = [f.get("filesystem_id") for f in value] if isinstance(value, list) else [value]
            if target_id in attached:
                users.append(str(row["id"]))
        return users

    # ------------------------------------------------------------------ creating and deleting

    @staticmethod
    def _replay(ctx: OpContext, kind: str, key: str | None, params: dict[str, Any]) -> sqlite3.Row | None:
        """An earlier create with the same idempotency key: returned when the request matches."""
        if not key:
            return None
        row: sqlite3.Row | None = ctx.conn.execute(
            "SELECT * FROM resources WHERE kind = ? AND idempotency_key = ?", (kind, key)
        ).fetchone()
        if row is None:
            return None
        if records.data_of(row).get("request_fingerprint") != fingerprint(params):
            raise AlreadyExists(
                f"idempotency key {key!r} was already used for a different {_human(kind)} request"
            )
        return row

    @staticmethod
    def _check_name_free(ctx: OpContext, kind: str, scope: str, name: str) -> None:
        if not isinstance(name, str) or not name.strip():
            raise InvalidArgument(f"a {_human(kind)} needs a name")
        row = ctx.conn.execute(
            "SELECT id FROM resources WHERE kind = ? AND name_scope = ? AND name = ?", (kind, scope, name)
        ).fetchone()
        if row is not None:
            where = scope or "the global namespace"
            raise AlreadyExists(f"a {_human(kind)} named {name!r} already exists in {where} ({row['id']})")

    @staticmethod
    def _charge(ctx: OpContext, charges: list[acct.Charge], *, region: str, project_id: str) -> None:
        shortfall = acct.find_shortfall(
            ctx.conn, charges, region=region, tenant_id=ctx.tenant_id, project_id=project_id
        )
        if shortfall is not None:
            raise QuotaExceeded(f"not enough {shortfall.describe()}")

    @staticmethod
    def _insert(
        ctx: OpContext,
        kind: str,
        *,
        name: str,
        scope: str,
        project_id: str,
        parent_id: str,
        region: str,
        key: str | None,
        data: dict[str, Any],
        params: dict[str, Any],
        ready_at: float | None = None,
        resource_id: str | None = None,
    ) -> str:
        prefix = ids.KIND_PREFIX[kind]
        rid = resource_id or (ids.keyed_id(prefix, key) if key else ids.new_id(prefix))
        while (
            not (key or resource_id)
            and ctx.conn.execute("SELECT 1 FROM resources WHERE id = ?", (rid,)).fetchone()
        ):
            rid = ids.new_id(prefix)
        if (key or resource_id) and ctx.conn.execute(
            "SELECT 1 FROM resources WHERE id = ?", (rid,)
        ).fetchone():
            raise AlreadyExists(f"{rid} already exists")
        ctx.conn.execute(
            "INSERT INTO resources (id, kind, tenant_id, project_id, parent_id, name, name_scope, region, "
            "idempotency_key, created_at, ready_at, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                rid,
                kind,
                ctx.tenant_id,
                project_id or rid,  # a project is its own project
                parent_id,
                name,
                scope,
                region,
                key or None,
                ctx.now,
                ctx.now if ready_at is None else ready_at,
                json.dumps({**data, "request_fingerprint": fingerprint(params)}),
            ),
        )
        return rid

    def _create(
        self,
        ctx: OpContext,
        kind: str,
        *,
        name: str,
        scope: str,
        project_id: str,
        parent_id: str,
        region: str,
        key: str | None,
        data: dict[str, Any],
        params: dict[str, Any],
        charges: list[acct.Charge],
        ready_at: float | None = None,
        resource_id: str | None = None,
    ) -> dict[str, Any]:
        """The common create: replay by key, unique name in `scope`, quota check, insert, allocate.
        `resource_id`: an id the caller derived (a bucket grant's group), instead of a drawn one."""
        replayed = self._replay(ctx, kind, key, params)
        if replayed is not None:
            return records.to_record(replayed, ctx.now)
        self._check_name_free(ctx, kind, scope, name)
        self._charge(ctx, charges, region=region, project_id=project_id)
        rid = self._insert(
            ctx,
            kind,
            name=name,
            scope=scope,
            project_id=project_id,
            parent_id=parent_id,
            region=region,
            key=key,
            data=data,
            params=params,
            ready_at=ready_at,
            resource_id=resource_id,
        )
        charged = project_id or rid
        acct.allocate(ctx.conn, rid, charges, region=region, tenant_id=ctx.tenant_id, project_id=charged)
        return self._fetch(ctx, kind, rid)

    @staticmethod
    def _delete_row(ctx: OpContext, resource_id: str) -> None:
        acct.release(ctx.conn, resource_id)
        lag = float(db.get_meta(ctx.conn, "delete_lag_seconds") or 0)
        row = ctx.conn.execute("SELECT kind FROM resources WHERE id = ?", (resource_id,)).fetchone()
        if lag > 0 and row is not None and row["kind"] in LAGGED_KINDS:
            # Deleted, but visible as DELETING until the lag passes (purged by the next write after it).
            ctx.conn.execute(
                "UPDATE resources SET idempotency_key = NULL, "
                "data = json_set(data, '$.deleting_until', ?) WHERE id = ?",
                (ctx.now + lag, resource_id),
            )
            return
        ctx.conn.execute("DELETE FROM resources WHERE id = ?", (resource_id,))

    @staticmethod
    def _purge_deleted(conn: sqlite3.Connection, now: float) -> None:
        """Rows whose delete lag has passed are gone (every write starts with this, so writes never see
        them; reads filter them: see `_row`, `_list`)."""
        conn.execute(
            "DELETE FROM resources WHERE json_extract(data, '$.deleting_until') IS NOT NULL "
            "AND json_extract(data, '$.deleting_until') <= ?",
            (now,),
        )


# The kinds whose deletes complete asynchronously under the `delete_lag_seconds` setting.
LAGGED_KINDS = frozenset(
    {"project", "network", "subnet", "security_group", "bucket", "service_account", "access_key", "iam_group"}
)


def is_deleted(row: sqlite3.Row, now: float) -> bool:
    """A lagged delete whose lag has passed: gone, even before the next write purges the row."""
    until = records.data_of(row).get("deleting_until")
    return until is not None and float(until) <= now


def wipe(conn: sqlite3.Connection) -> None:
    tables = ("resources", "quotas", "capacity_blocks", "allocations", "faults", "objects", "uploads")
    for table in (*tables, "upload_parts", "object_versions", "meta"):
        conn.execute(f"DELETE FROM {table}")
