"""One operation's transaction (`OpContext`) and what every service does inside one: look rows up (tenant
checked, lagged deletes filtered), create (replay by idempotency key, unique name, quota charge, insert,
allocate) and delete (release, and a lagged delete where the setting asks for one).

The store (store.py) opens the transaction and hands the context to the service's operation; the services
never hold a connection of their own.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from npa_pulumi.cloud.errors import (
    AlreadyExists,
    CloudRequest,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    QuotaExceeded,
)
from npa_pulumi.errors import NpaError
from npa_pulumi.simulator import accounting as acct
from npa_pulumi.simulator import db, ids, records

# The kinds whose deletes complete asynchronously under the `delete_lag_seconds` setting.
LAGGED_KINDS = frozenset(
    {"project", "network", "subnet", "security_group", "bucket", "service_account", "access_key", "iam_group"}
)


class LocalCloudUnusable(NpaError):
    """The local cloud's directory or database cannot be used (not a cloud-side error)."""

    kind = "local-cloud-unusable"


def fingerprint(params: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()


def clean_labels(labels: dict[str, str] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (labels or {}).items()}


def human(kind: str) -> str:
    return kind.replace("_", " ")


def is_deleted(row: sqlite3.Row, now: float) -> bool:
    """A lagged delete whose lag has passed: gone, even before the next write purges the row."""
    until = records.data_of(row).get("deleting_until")
    return until is not None and float(until) <= now


def purge_deleted(conn: sqlite3.Connection, now: float) -> None:
    """Rows whose delete lag has passed are gone (every write starts with this, so writes never see
    them; reads filter them: see `OpContext.row`, `OpContext.list_of`)."""
    conn.execute(
        "DELETE FROM resources WHERE json_extract(data, '$.deleting_until') IS NOT NULL "
        "AND json_extract(data, '$.deleting_until') <= ?",
        (now,),
    )


def wipe(conn: sqlite3.Connection) -> None:
    for table in ("resources", "quotas", "capacity_blocks", "allocations", "faults", "meta"):
        conn.execute(f"DELETE FROM {table}")


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

    # ------------------------------------------------------------------ lookups

    def row(self, kind: str, resource_id: str) -> sqlite3.Row:
        row: sqlite3.Row | None = self.conn.execute(
            "SELECT * FROM resources WHERE id = ? AND kind = ?", (resource_id, kind)
        ).fetchone()
        if row is None or is_deleted(row, self.now):
            raise NotFound(f"{human(kind)} {resource_id} not found")
        if row["tenant_id"] != self.tenant_id:
            raise PermissionDenied(f"{human(kind)} {resource_id} belongs to another tenant")
        return row

    def project_row(self, project_id: str) -> sqlite3.Row:
        return self.row("project", project_id)

    def check_tenant(self, tenant_id: str) -> None:
        if tenant_id != self.tenant_id:
            raise PermissionDenied(
                f"no access to tenant {tenant_id} (this local cloud simulates {self.tenant_id})"
            )

    def block_row(self, block_id: str) -> sqlite3.Row:
        row: sqlite3.Row | None = self.conn.execute(
            "SELECT * FROM capacity_blocks WHERE id = ?", (block_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"capacity block group {block_id} not found")
        if row["parent_id"] != self.tenant_id:
            raise PermissionDenied(f"capacity block group {block_id} belongs to another tenant")
        return row

    def fetch(self, kind: str, resource_id: str) -> dict[str, Any]:
        return records.to_record(self.row(kind, resource_id), self.now)

    def list_of(self, kind: str, column: str, value: str) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            f"SELECT * FROM resources WHERE kind = ? AND {column} = ? ORDER BY created_at, id", (kind, value)
        ).fetchall()
        return [records.to_record(row, self.now) for row in rows if not is_deleted(row, self.now)]

    def find_named(self, kind: str, project_id: str, name: str) -> dict[str, Any] | None:
        row = self.conn.execute(
            "SELECT * FROM resources WHERE kind = ? AND project_id = ? AND name = ?", (kind, project_id, name)
        ).fetchone()
        return None if row is None or is_deleted(row, self.now) else records.to_record(row, self.now)

    def node_groups_using(self, project_id: str, field: str, target_id: str) -> list[str]:
        """Node groups in the project whose `field` (gpu_cluster_id, or the filesystems list) names target."""
        users = []
        for row in self.conn.execute(
            "SELECT id, data FROM resources WHERE kind = 'node_group' AND project_id = ?", (project_id,)
        ):
            value = records.data_of(row).get(field)
            attached = [f.get("filesystem_id") for f in value] if isinstance(value, list) else [value]
            if target_id in attached:
                users.append(str(row["id"]))
        return users

    # ------------------------------------------------------------------ creating, changing and deleting

    def replay(self, kind: str, key: str | None, params: dict[str, Any]) -> sqlite3.Row | None:
        """An earlier create with the same idempotency key: returned when the request matches."""
        if not key:
            return None
        row: sqlite3.Row | None = self.conn.execute(
            "SELECT * FROM resources WHERE kind = ? AND idempotency_key = ?", (kind, key)
        ).fetchone()
        if row is None:
            return None
        if records.data_of(row).get("request_fingerprint") != fingerprint(params):
            raise AlreadyExists(
                f"idempotency key {key!r} was already used for a different {human(kind)} request"
            )
        return row

    def check_name_free(self, kind: str, scope: str, name: str) -> None:
        if not isinstance(name, str) or not name.strip():
            raise InvalidArgument(f"a {human(kind)} needs a name")
        row = self.conn.execute(
            "SELECT id FROM resources WHERE kind = ? AND name_scope = ? AND name = ?", (kind, scope, name)
        ).fetchone()
        if row is not None:
            where = scope or "the global namespace"
            raise AlreadyExists(f"a {human(kind)} named {name!r} already exists in {where} ({row['id']})")

    def charge(self, charges: list[acct.Charge], *, region: str, project_id: str) -> None:
        shortfall = acct.find_shortfall(
            self.conn, charges, region=region, tenant_id=self.tenant_id, project_id=project_id
        )
        if shortfall is not None:
            raise QuotaExceeded(f"not enough {shortfall.describe()}")

    def insert(
        self,
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
            and self.conn.execute("SELECT 1 FROM resources WHERE id = ?", (rid,)).fetchone()
        ):
            rid = ids.new_id(prefix)
        if (key or resource_id) and self.conn.execute(
            "SELECT 1 FROM resources WHERE id = ?", (rid,)
        ).fetchone():
            raise AlreadyExists(f"{rid} already exists")
        self.conn.execute(
            "INSERT INTO resources (id, kind, tenant_id, project_id, parent_id, name, name_scope, region, "
            "idempotency_key, created_at, ready_at, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                rid,
                kind,
                self.tenant_id,
                project_id or rid,  # a project is its own project
                parent_id,
                name,
                scope,
                region,
                key or None,
                self.now,
                self.now if ready_at is None else ready_at,
                json.dumps({**data, "request_fingerprint": fingerprint(params)}),
            ),
        )
        return rid

    def create(
        self,
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
        replayed = self.replay(kind, key, params)
        if replayed is not None:
            return records.to_record(replayed, self.now)
        self.check_name_free(kind, scope, name)
        self.charge(charges, region=region, project_id=project_id)
        rid = self.insert(
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
        acct.allocate(self.conn, rid, charges, region=region, tenant_id=self.tenant_id, project_id=charged)
        return self.fetch(kind, rid)

    def set_data(self, resource_id: str, data: dict[str, Any]) -> None:
        """Replace a row's kind-specific fields (what an in-place change of an object writes)."""
        self.conn.execute("UPDATE resources SET data = ? WHERE id = ?", (json.dumps(data), resource_id))

    def delete_row(self, resource_id: str) -> None:
        acct.release(self.conn, resource_id)
        lag = float(db.get_meta(self.conn, "delete_lag_seconds") or 0)
        row = self.conn.execute("SELECT kind FROM resources WHERE id = ?", (resource_id,)).fetchone()
        if lag > 0 and row is not None and row["kind"] in LAGGED_KINDS:
            # Deleted, but visible as DELETING until the lag passes (purged by the next write after it).
            self.conn.execute(
                "UPDATE resources SET idempotency_key = NULL, "
                "data = json_set(data, '$.deleting_until', ?) WHERE id = ?",
                (self.now + lag, resource_id),
            )
            return
        self.conn.execute("DELETE FROM resources WHERE id = ?", (resource_id,))
