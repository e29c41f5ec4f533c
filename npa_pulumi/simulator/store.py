"""The local cloud's one database handle, which every service of the simulator shares: where the cloud
lives, seeding it, and the operation envelope each operation runs in.

Every faultable operation runs inside `op`: build the `CloudRequest` -> take an injected fault if one is
armed (latency, then a typed error) -> one SQLite transaction (`BEGIN IMMEDIATE` for mutations). Typed
errors raised inside carry the request they came from. Write transactions also give node groups that
wait for quota a chance to start, before the operation (so they keep their place in the queue) and after
it (so capacity a delete frees is used at once).

With `$NPA_LOCAL_CLOUD_CALL_LOG` set to a file, every operation appends its name to it, one a line (what
a benchmark counts to show how a command's reads are batched); nothing else changes.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from npa_pulumi.cloud.errors import CloudError, CloudRequest, OperationTimeout, error_from_kind
from npa_pulumi.simulator import db, faults, scheduling
from npa_pulumi.simulator.transaction import LocalCloudUnusable, OpContext, purge_deleted, wipe

CALL_LOG_ENV = "NPA_LOCAL_CLOUD_CALL_LOG"


def _log_call(op: str) -> None:
    path = os.environ.get(CALL_LOG_ENV)
    if path:
        # One short line per call in append mode: writes of concurrent callers do not interleave.
        with open(path, "a", encoding="utf-8") as log:
            log.write(op + "\n")


class Store:
    """The simulator's database at one directory (`$NPA_LOCAL_CLOUD_DIR` or `~/.npa-pulumi/local-cloud/`)
    and its clock (`clock`: what an operation takes as now)."""

    def __init__(
        self, directory: Path | None = None, *, auto_init: bool = True, clock: Callable[[], float] = time.time
    ) -> None:
        self.directory = Path(directory) if directory is not None else db.cloud_dir()
        self.path = db.db_path(self.directory)
        self.auto_init = auto_init
        self.clock = clock

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
        from npa_pulumi.simulator import seaweedd
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
        seaweedd.stop(self.directory)  # nor the S3 server the buckets it served
        seaweedd.forget_data(self.directory)  # nor their objects

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

    def connect(self) -> sqlite3.Connection:
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

    @contextlib.contextmanager
    def connection(self, *, write: bool | None = None) -> Iterator[sqlite3.Connection]:
        """A connection outside the operation envelope (administration: settings, faults), in one
        transaction when `write` says which kind, closed after."""
        conn = self.connect()
        try:
            if write is None:
                yield conn
            else:
                with db.transaction(conn, write=write):
                    yield conn
        finally:
            conn.close()

    # ------------------------------------------------------------------ the operation envelope

    @contextlib.contextmanager
    def op(
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
        conn = self.connect()
        try:
            if inject:
                _inject(conn, op, request, timeout_s)
            if reconcile and not write:
                write = scheduling.has_waiting(conn)
            with db.transaction(conn, write=write):
                ctx = OpContext(conn, db.get_meta(conn, "tenant_id") or "", self.clock(), request, write)
                if write:
                    purge_deleted(conn, ctx.now)
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
