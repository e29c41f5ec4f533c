"""S3 objects in the simulator's buckets: what the S3 wire (s3wire.py) serves, in the cloud's database.

A bucket here is the simulator's bucket row (storage.py: named globally, in a project, charged to its
quotas); its objects are rows of `objects`, multipart uploads in progress rows of `uploads` and
`upload_parts`, so `local-cloud reset` forgets them with everything else and a bucket's object count
(`count_bucket_objects`, which the fleet's teardown reads) includes what was written over the wire. The S3
services are `S3Buckets` (s3buckets.py: keys, buckets, versioning), `S3Objects` (here) and `S3Uploads`
(s3uploads.py), each over the store. Errors are S3's (s3errors.S3Error). These operations take no injected
faults: fault injection targets the cloud's control plane, not its data path.

Versioning is S3's: a bucket's status (`Enabled` or `Suspended`, never back to off) is kept in its row;
with it enabled every write or delete keeps the version it replaces as a noncurrent row of
`object_versions` (a delete adds a delete marker there), any version can be read, copied back or deleted
by its id, and deleting the current version or the latest delete marker makes the next newer one current
again. While suspended, writes and deletes replace the `null` version and keep the others.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
from dataclasses import dataclass

from npa_pulumi.simulator import records
from npa_pulumi.simulator.s3errors import S3Error
from npa_pulumi.simulator.store import Store
from npa_pulumi.simulator.transaction import OpContext


def md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def gone(row: sqlite3.Row | None) -> bool:
    # A lagged delete (DELETING) is already gone for S3 clients.
    return row is None or records.data_of(row).get("deleting_until") is not None


@dataclass(frozen=True)
class AccessKey:
    """An access key as the S3 wire sees it (never with its secret)."""

    aws_access_key_id: str
    tenant_id: str
    project_id: str
    derivable: bool  # minted with a derivable secret (keys from before the wire are not)


@dataclass(frozen=True)
class BucketInfo:
    id: str
    name: str
    tenant_id: str
    project_id: str
    region: str
    created_at: float


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str
    content_type: str
    modified_at: float
    version_id: str = "null"


@dataclass(frozen=True)
class VersionInfo:
    """One entry of ListObjectVersions: a version or a delete marker."""

    key: str
    version_id: str
    is_latest: bool
    delete_marker: bool
    size: int
    etag: str
    modified_at: float


VERSIONING = "s3_versioning"  # a bucket row's data key: "Enabled" | "Suspended" (absent: never enabled)
VERSIONING_STATES = ("Enabled", "Suspended")


def bucket_info(row: sqlite3.Row) -> BucketInfo:
    return BucketInfo(
        row["id"], row["name"], row["tenant_id"], row["project_id"], row["region"], float(row["created_at"])
    )


def _object_info(row: sqlite3.Row) -> ObjectInfo:
    # A row written before the wire has no ETag stored: its body's MD5 is the one S3 would show.
    etag = str(row["etag"]) or md5(bytes(row["legacy_body"] or b""))
    return ObjectInfo(
        row["key"],
        int(row["size"]),
        etag,
        str(row["content_type"]),
        float(row["modified_at"]),
        str(row["version_id"]),
    )


_INFO_COLUMNS = (
    "key, length(body) AS size, etag, content_type, modified_at, version_id, "
    "CASE WHEN etag = '' THEN body END AS legacy_body"
)
_VERSION_COLUMNS = (  # in _INFO_COLUMNS' order (the two are united in listings), then the marker flag
    "key, length(body) AS size, etag, content_type, modified_at, version_id, NULL AS legacy_body, "
    "delete_marker"
)


def versioning_of(row: sqlite3.Row) -> str:
    return str(records.data_of(row).get(VERSIONING) or "")


def _new_version_id() -> str:
    return secrets.token_urlsafe(24)  # S3's version ids are opaque URL-safe strings


def _no_such_version(key: str, version_id: str) -> S3Error:
    return S3Error("NoSuchVersion", "The specified version does not exist.", Key=key, VersionId=version_id)


def bucket_row(ctx: OpContext, name: str) -> sqlite3.Row:
    row: sqlite3.Row | None = ctx.conn.execute(
        "SELECT * FROM resources WHERE kind = 'bucket' AND name_scope = '' AND name = ?", (name,)
    ).fetchone()
    if row is None or gone(row):
        raise S3Error("NoSuchBucket", "The specified bucket does not exist", BucketName=name)
    return row


def _keep_replaced(ctx: OpContext, bucket_id: str, key: str, status: str) -> None:
    """Before a write or delete replaces a key's current version: in a versioned bucket it becomes
    noncurrent (while suspended, only a version with an id: the `null` one is replaced)."""
    if not status:
        return
    row = ctx.conn.execute(
        "SELECT * FROM objects WHERE bucket_id = ? AND key = ?", (bucket_id, key)
    ).fetchone()
    if row is None or (status == "Suspended" and row["version_id"] == "null"):
        return
    ctx.conn.execute(
        "INSERT OR REPLACE INTO object_versions (bucket_id, key, version_id, body, etag, content_type, "
        "modified_at, delete_marker) VALUES (?, ?, ?, ?, ?, ?, ?, 0)",
        (
            bucket_id,
            key,
            row["version_id"],
            row["body"],
            row["etag"] or md5(bytes(row["body"])),
            row["content_type"],
            row["modified_at"],
        ),
    )


def write_current(
    ctx: OpContext, bucket_row: sqlite3.Row, key: str, body: bytes, etag: str, content_type: str
) -> ObjectInfo:
    """Make `body` the key's current version (keeping the one it replaces where versioning says so)."""
    status = versioning_of(bucket_row)
    bucket_id = bucket_row["id"]
    _keep_replaced(ctx, bucket_id, key, status)
    version = _new_version_id() if status == "Enabled" else "null"
    if version == "null":  # a write while suspended replaces the null version, wherever it is
        ctx.conn.execute(
            "DELETE FROM object_versions WHERE bucket_id = ? AND key = ? AND version_id = 'null'",
            (bucket_id, key),
        )
    ctx.conn.execute(
        "INSERT OR REPLACE INTO objects (bucket_id, key, body, etag, content_type, modified_at, "
        "version_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (bucket_id, key, body, etag, content_type, ctx.now, version),
    )
    return ObjectInfo(key, len(body), etag, content_type, ctx.now, version)


def _version_row(ctx: OpContext, bucket_id: str, key: str, version_id: str) -> tuple[sqlite3.Row, bool]:
    """A version by id: (row, is it the current one); NoSuchVersion when there is none."""
    current = ctx.conn.execute(
        f"SELECT {_INFO_COLUMNS}, body, 0 AS delete_marker FROM objects "
        "WHERE bucket_id = ? AND key = ? AND version_id = ?",
        (bucket_id, key, version_id),
    ).fetchone()
    if current is not None:
        return current, True
    older = ctx.conn.execute(
        f"SELECT {_VERSION_COLUMNS}, body FROM object_versions "
        "WHERE bucket_id = ? AND key = ? AND version_id = ?",
        (bucket_id, key, version_id),
    ).fetchone()
    if older is None:
        raise _no_such_version(key, version_id)
    return older, False


def _promote_newest(ctx: OpContext, bucket_id: str, key: str) -> None:
    """After a version was deleted by id: with no current version left, the newest remaining one
    becomes current, unless it is a delete marker (then the key stays deleted)."""
    if ctx.conn.execute("SELECT 1 FROM objects WHERE bucket_id = ? AND key = ?", (bucket_id, key)).fetchone():
        return
    newest = ctx.conn.execute(
        "SELECT * FROM object_versions WHERE bucket_id = ? AND key = ? ORDER BY modified_at DESC LIMIT 1",
        (bucket_id, key),
    ).fetchone()
    if newest is None or newest["delete_marker"]:
        return
    ctx.conn.execute(
        "INSERT INTO objects (bucket_id, key, body, etag, content_type, modified_at, version_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            bucket_id,
            key,
            newest["body"],
            newest["etag"],
            newest["content_type"],
            newest["modified_at"],
            newest["version_id"],
        ),
    )
    ctx.conn.execute(
        "DELETE FROM object_versions WHERE bucket_id = ? AND key = ? AND version_id = ?",
        (bucket_id, key, newest["version_id"]),
    )


class S3Objects:
    """A bucket's objects and their versions over the store: put, head, get, list, delete and copy."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def put(self, bucket: BucketInfo, key: str, body: bytes, content_type: str) -> ObjectInfo:
        with self.store.op("s3_put", {}, write=True, inject=False) as ctx:
            row = bucket_row(ctx, bucket.name)
            return write_current(ctx, row, key, body, md5(body), content_type)

    def head(self, bucket: BucketInfo, key: str, version_id: str = "") -> ObjectInfo:
        if version_id:
            return self.get(bucket, key, version_id)[0]
        with self.store.op("s3_head", {}, write=False, inject=False) as ctx:  # no body read for a HEAD
            row = ctx.conn.execute(
                f"SELECT {_INFO_COLUMNS} FROM objects WHERE bucket_id = ? AND key = ?", (bucket.id, key)
            ).fetchone()
            if row is None:
                raise S3Error("NoSuchKey", "The specified key does not exist.", Key=key)
            return _object_info(row)

    def get(self, bucket: BucketInfo, key: str, version_id: str = "") -> tuple[ObjectInfo, bytes]:
        """The key's current version, or the version `version_id` (a delete marker: MethodNotAllowed)."""
        with self.store.op("s3_get", {}, write=False, inject=False) as ctx:
            if version_id:
                row, _ = _version_row(ctx, bucket.id, key, version_id)
                if row["delete_marker"]:
                    raise S3Error(
                        "MethodNotAllowed",
                        "The specified method is not allowed against this resource.",
                        Method="GET",
                        ResourceType="DeleteMarker",
                    )
            else:
                row = ctx.conn.execute(
                    f"SELECT {_INFO_COLUMNS}, body FROM objects WHERE bucket_id = ? AND key = ?",
                    (bucket.id, key),
                ).fetchone()
                if row is None:
                    raise S3Error("NoSuchKey", "The specified key does not exist.", Key=key)
            return _object_info(row), bytes(row["body"])

    def list_versions(self, bucket: BucketInfo, prefix: str, after_key: str) -> list[VersionInfo]:
        """Every version and delete marker under `prefix` of keys sorting after `after_key`: by key, the
        newest first (ListObjectVersions)."""
        with self.store.op("s3_list_versions", {}, write=False, inject=False) as ctx:
            where = "bucket_id = ? AND key > ? AND substr(key, 1, ?) = ?"
            args = (bucket.id, after_key, len(prefix), prefix)
            rows = ctx.conn.execute(
                f"SELECT {_INFO_COLUMNS}, 0 AS delete_marker, 1 AS current FROM objects WHERE {where} "
                f"UNION ALL SELECT {_VERSION_COLUMNS}, 0 AS current FROM object_versions WHERE {where} "
                "ORDER BY key, current DESC, modified_at DESC",
                (*args, *args),
            ).fetchall()
        found: list[VersionInfo] = []
        for row in rows:
            latest = not found or found[-1].key != row["key"]
            info = _object_info(row) if not row["delete_marker"] else None
            found.append(
                VersionInfo(
                    row["key"],
                    str(row["version_id"]),
                    latest,
                    bool(row["delete_marker"]),
                    info.size if info else 0,
                    info.etag if info else "",
                    float(row["modified_at"]),
                )
            )
        return found

    def list_objects(self, bucket: BucketInfo, prefix: str, after: str) -> list[ObjectInfo]:
        """The objects under `prefix` whose keys sort after `after`, in S3's order (UTF-8 bytes)."""
        with self.store.op("s3_list", {}, write=False, inject=False) as ctx:
            rows = ctx.conn.execute(
                f"SELECT {_INFO_COLUMNS} FROM objects WHERE bucket_id = ? AND key > ? "
                "AND substr(key, 1, ?) = ? ORDER BY key",
                (bucket.id, after, len(prefix), prefix),
            ).fetchall()
            return [_object_info(row) for row in rows]

    def delete(self, bucket: BucketInfo, keys: list[tuple[str, str]]) -> list[tuple[str, bool]]:
        """DeleteObject(s) of (key, version id or ""): per key, the version id S3 reports and whether it is a
        delete marker. Without a version id a key that does not exist is deleted already (S3 answers
        success), and a versioned bucket gets a delete marker; with one, exactly that version goes."""
        with self.store.op("s3_delete", {}, write=True, inject=False) as ctx:
            row = bucket_row(ctx, bucket.name)
            return [self._delete_one(ctx, row, key, version_id) for key, version_id in keys]

    def _delete_one(
        self, ctx: OpContext, bucket_row: sqlite3.Row, key: str, version_id: str
    ) -> tuple[str, bool]:
        bucket_id, status = bucket_row["id"], versioning_of(bucket_row)
        if version_id:
            found, current = _version_row(ctx, bucket_id, key, version_id)
            table = "objects" if current else "object_versions"
            ctx.conn.execute(
                f"DELETE FROM {table} WHERE bucket_id = ? AND key = ? AND version_id = ?",
                (bucket_id, key, version_id),
            )
            _promote_newest(ctx, bucket_id, key)
            return version_id, bool(found["delete_marker"])
        if not status:
            ctx.conn.execute("DELETE FROM objects WHERE bucket_id = ? AND key = ?", (bucket_id, key))
            return "", False
        _keep_replaced(ctx, bucket_id, key, status)
        ctx.conn.execute("DELETE FROM objects WHERE bucket_id = ? AND key = ?", (bucket_id, key))
        marker = _new_version_id() if status == "Enabled" else "null"
        ctx.conn.execute(
            "INSERT OR REPLACE INTO object_versions (bucket_id, key, version_id, body, etag, content_type, "
            "modified_at, delete_marker) VALUES (?, ?, ?, x'', '', '', ?, 1)",
            (bucket_id, key, marker, ctx.now),
        )
        return marker, True

    def copy(
        self,
        source: BucketInfo,
        source_key: str,
        target: BucketInfo,
        key: str,
        content_type: str | None,
        source_version: str = "",
    ) -> ObjectInfo:
        """CopyObject (of the source's current version, or `source_version`: how an overwritten version
        is restored); `content_type` None keeps the source's (x-amz-metadata-directive COPY)."""
        info, body = self.get(source, source_key, source_version)
        with self.store.op("s3_copy", {}, write=True, inject=False) as ctx:
            row = bucket_row(ctx, target.name)
            kind = info.content_type if content_type is None else content_type
            return write_current(ctx, row, key, body, info.etag, kind)
