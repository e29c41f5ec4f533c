"""Where the local cloud lives and how every process talks to it: one SQLite file in WAL mode.

Several processes use the same database at once (the CLI, Pulumi's dynamic-provider host, terraform's
local-exec provisioners), so:

* every connection sets a long busy timeout, so a writer waits for another instead of failing;
* every mutation runs in `BEGIN IMMEDIATE`, which takes the write lock up front: a read-then-write
  transaction can never be upgraded into a deadlock, and quota checks see a consistent picture;
* reads run in a deferred transaction, which in WAL mode never blocks writers;
* first-time initialisation is serialised with an advisory file lock next to the database.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from npa_pulumi.runtime.locks import FileLock

ENV_DIR = "NPA_LOCAL_CLOUD_DIR"
DB_FILENAME = "cloud.db"
LOCK_FILENAME = "init.lock"
SCHEMA_VERSION = "1"
BUSY_TIMEOUT_S = 60.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
-- Every cloud object. Kind-specific fields live in `data` (JSON); the columns are what is searched on.
CREATE TABLE IF NOT EXISTS resources (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    project_id TEXT NOT NULL DEFAULT '',
    parent_id TEXT NOT NULL DEFAULT '',
    name TEXT NOT NULL,
    name_scope TEXT NOT NULL,
    region TEXT NOT NULL DEFAULT '',
    idempotency_key TEXT,
    created_at REAL NOT NULL,
    ready_at REAL NOT NULL,
    data TEXT NOT NULL DEFAULT '{}',
    UNIQUE (kind, name_scope, name),
    UNIQUE (kind, idempotency_key)
);
CREATE INDEX IF NOT EXISTS resources_by_project ON resources (kind, project_id);
CREATE INDEX IF NOT EXISTS resources_by_parent ON resources (kind, parent_id);
-- Every operation asks whether node groups wait for quota, and every write purges the rows whose delete
-- lag has passed: without these, both scan every row (a 10,000-cluster fleet's benchmark).
CREATE INDEX IF NOT EXISTS resources_waiting ON resources (kind, ready_at);
CREATE INDEX IF NOT EXISTS resources_deleting ON resources (json_extract(data, '$.deleting_until'));
CREATE TABLE IF NOT EXISTS quotas (
    position INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    region TEXT NOT NULL,
    lim INTEGER,
    base_usage INTEGER,
    base_usage_pct REAL,
    usage_state TEXT NOT NULL DEFAULT '',
    unit TEXT NOT NULL,
    state TEXT NOT NULL,
    scope TEXT NOT NULL,
    parent_id TEXT NOT NULL DEFAULT '',
    container_id TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS capacity_blocks (
    position INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    parent_id TEXT NOT NULL,
    region TEXT NOT NULL,
    platform TEXT NOT NULL,
    fabric TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL,
    lim INTEGER NOT NULL,
    base_usage INTEGER,
    base_usage_pct REAL,
    usage_state TEXT NOT NULL DEFAULT ''
);
-- What each live object consumes: `target` is a quota name or `capacityblock:<block id>`.
CREATE TABLE IF NOT EXISTS allocations (
    owner_id TEXT NOT NULL,
    target TEXT NOT NULL,
    region TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    amount INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS allocations_by_target ON allocations (target, region);
-- Quota checks sum a target's allocations from the index alone.
CREATE INDEX IF NOT EXISTS allocations_sums ON allocations (target, region, tenant_id, project_id, amount);
CREATE INDEX IF NOT EXISTS allocations_by_owner ON allocations (owner_id);
CREATE TABLE IF NOT EXISTS faults (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    op TEXT NOT NULL,
    error_kind TEXT,
    remaining INTEGER,
    latency_ms INTEGER NOT NULL DEFAULT 0,
    message TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL
);
"""


def cloud_dir() -> Path:
    """`$NPA_LOCAL_CLOUD_DIR`, else `~/.npa-pulumi/local-cloud/`."""
    override = os.environ.get(ENV_DIR)
    if override:
        return Path(override).expanduser()
    return Path.home() / ".npa-pulumi" / "local-cloud"


def db_path(directory: Path) -> Path:
    return directory / DB_FILENAME


def connect(path: Path) -> sqlite3.Connection:
    # isolation_level=None: we issue BEGIN/COMMIT ourselves, so Python never opens implicit transactions.
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection, *, write: bool) -> Iterator[sqlite3.Connection]:
    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@contextlib.contextmanager
def init_lock(directory: Path) -> Iterator[None]:
    """An exclusive advisory lock held while a process creates or re-seeds the database."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    with FileLock(directory / LOCK_FILENAME):
        yield


# Columns added to a table after databases with the table existed: (table, column, declaration). A database
# made before is brought up to date by `migrate` (`CREATE TABLE IF NOT EXISTS` adds only missing tables).
# (A bucket's objects live in the cloud's S3 server, not here: the tables `objects`, `object_versions`,
# `uploads` and `upload_parts` of older databases are no longer read.)
ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = ()
_MIGRATED: set[str] = set()  # database paths this process has brought up to date
# Tables and indexes added after databases existed: one missing means the schema is run again.
_LATEST_NAMES = {"resources_waiting", "allocations_sums"}


def create_schema(conn: sqlite3.Connection) -> None:
    # WAL is a property of the file, set once; it lets readers and one writer work side by side.
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript(SCHEMA)
    _add_columns(conn)


def _missing_columns(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    have: dict[str, set[str]] = {}
    for table, _, _ in ADDED_COLUMNS:
        if table not in have:
            have[table] = {row["name"] for row in conn.execute(f"PRAGMA table_info({table})")}
    return [(t, c, d) for t, c, d in ADDED_COLUMNS if c not in have[t]]


def _add_columns(conn: sqlite3.Connection) -> None:
    for table, column, declaration in _missing_columns(conn):
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")


def migrate(path: Path, conn: sqlite3.Connection) -> None:
    """Bring an initialised database made by an older version up to this schema (new tables, added
    columns); checked once per process and path, done under the init lock by whichever process is first."""
    key = str(path)
    if key in _MIGRATED:
        return
    names = {row["name"] for row in conn.execute("SELECT name FROM sqlite_master")}
    if not names >= _LATEST_NAMES or _missing_columns(conn):
        with init_lock(path.parent):
            conn.executescript(SCHEMA)
            _add_columns(conn)
    _MIGRATED.add(key)


def get_meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row["value"])


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def is_initialised(path: Path) -> bool:
    if not path.is_file():
        return False
    conn = connect(path)
    try:
        row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
        return row is not None and get_meta(conn, "initialised_at") is not None
    finally:
        conn.close()
