"""S3 objects in the simulator's buckets: what the S3 wire (s3wire.py) serves, in the cloud's database.

A bucket here is the simulator's bucket row (storage.py: named globally, in a project, charged to its
quotas); its objects are rows of `objects`, multipart uploads in progress rows of `uploads` and
`upload_parts`, so `local-cloud reset` forgets them with everything else and a bucket's object count
(`count_bucket_objects`, which the fleet's teardown reads) includes what was written over the wire.
Errors are S3's (s3errors.S3Error). These operations take no injected faults: fault injection targets the
cloud's control plane, not its data path.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
from dataclasses import dataclass

from npa_pulumi.cloud.errors import AlreadyExists, CloudError, QuotaExceeded
from npa_pulumi.cloud.local import records
from npa_pulumi.cloud.local.base import OpContext
from npa_pulumi.cloud.local.s3errors import S3Error
from npa_pulumi.cloud.local.storage import SECRET_DERIVATION, StorageMixin, access_key_secret

MIN_PART_BYTES = 5 * 1024 * 1024  # S3: every part of a multipart upload but the last
MAX_PARTS = 10000


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def _gone(row: sqlite3.Row | None) -> bool:
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


def _bucket_info(row: sqlite3.Row) -> BucketInfo:
    return BucketInfo(
        row["id"], row["name"], row["tenant_id"], row["project_id"], row["region"], float(row["created_at"])
    )


def _object_info(row: sqlite3.Row) -> ObjectInfo:
    # A row written before the wire has no ETag stored: its body's MD5 is the one S3 would show.
    etag = str(row["etag"]) or _md5(bytes(row["legacy_body"] or b""))
    return ObjectInfo(row["key"], int(row["size"]), etag, str(row["content_type"]), float(row["modified_at"]))


_INFO_COLUMNS = (
    "key, length(body) AS size, etag, content_type, modified_at, "
    "CASE WHEN etag = '' THEN body END AS legacy_body"
)


class ObjectsMixin(StorageMixin):
    # ------------------------------------------------------------------ identities and buckets

    def s3_access_key(self, aws_access_key_id: str) -> AccessKey | None:
        """The live access key with this public id, or None (unknown, deleted or being deleted)."""
        with self._op("s3_access_key", {}, write=False, inject=False) as ctx:
            row = ctx.conn.execute(
                "SELECT * FROM resources WHERE kind = 'access_key' AND name = ?", (aws_access_key_id,)
            ).fetchone()
            if _gone(row):
                return None
            data = records.data_of(row)
            return AccessKey(
                aws_access_key_id,
                row["tenant_id"],
                row["project_id"],
                data.get("secret_derivation") == SECRET_DERIVATION,
            )

    def s3_secret(self, key: AccessKey) -> str:
        """The key's secret, derived again (storage.access_key_secret): only to check a signature."""
        return access_key_secret(self.directory, key.aws_access_key_id)

    def s3_bucket(self, name: str) -> BucketInfo:
        with self._op("s3_bucket", {}, write=False, inject=False) as ctx:
            return _bucket_info(self._s3_bucket_row(ctx, name))

    def s3_buckets(self, tenant_id: str) -> list[BucketInfo]:
        with self._op("s3_buckets", {}, write=False, inject=False) as ctx:
            rows = ctx.conn.execute(
                "SELECT * FROM resources WHERE kind = 'bucket' AND tenant_id = ? ORDER BY name", (tenant_id,)
            ).fetchall()
            return [_bucket_info(row) for row in rows if not _gone(row)]

    @staticmethod
    def _s3_bucket_row(ctx: OpContext, name: str) -> sqlite3.Row:
        row: sqlite3.Row | None = ctx.conn.execute(
            "SELECT * FROM resources WHERE kind = 'bucket' AND name_scope = '' AND name = ?", (name,)
        ).fetchone()
        if row is None or _gone(row):
            raise S3Error("NoSuchBucket", "The specified bucket does not exist", BucketName=name)
        return row

    def s3_create_bucket(self, key: AccessKey, name: str, location: str) -> bool:
        """CreateBucket in the key's project; False when the caller's tenant already owns it (S3's
        BucketAlreadyOwnedByYou is the caller's to report)."""
        with self._op("s3_create_bucket", {}, write=False, inject=False) as ctx:
            project = self._project_row(ctx, key.project_id)
        if location and location != project["region"]:
            raise S3Error(
                "IllegalLocationConstraintException",
                f"the {location} location constraint is incompatible with this endpoint's region for "
                f"project {key.project_id} ({project['region']})",
            )
        try:
            self.create_bucket(key.project_id, name, "standard", 0)
        except AlreadyExists:
            existing = self.s3_bucket(name)
            if existing.tenant_id == key.tenant_id:
                return False
            raise S3Error(
                "BucketAlreadyExists", "The requested bucket name is not available.", BucketName=name
            ) from None
        except QuotaExceeded as err:
            raise S3Error("TooManyBuckets", str(err), BucketName=name) from None
        except CloudError as err:
            raise S3Error(
                "InvalidBucketName" if "bucket name" in str(err) else "InvalidRequest", str(err)
            ) from None
        return True

    def s3_delete_bucket(self, bucket: BucketInfo) -> None:
        """DeleteBucket: refused while the bucket holds objects or uploads, as S3 refuses it."""
        if self.count_bucket_objects(bucket.id):
            raise S3Error(
                "BucketNotEmpty", "The bucket you tried to delete is not empty", BucketName=bucket.name
            )
        self.delete_bucket(bucket.id)

    # ------------------------------------------------------------------ objects

    def s3_put(self, bucket: BucketInfo, key: str, body: bytes, content_type: str) -> ObjectInfo:
        with self._op("s3_put", {}, write=True, inject=False) as ctx:
            self._s3_bucket_row(ctx, bucket.name)
            etag = _md5(body)
            ctx.conn.execute(
                "INSERT OR REPLACE INTO objects (bucket_id, key, body, etag, content_type, modified_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (bucket.id, key, body, etag, content_type, ctx.now),
            )
            return ObjectInfo(key, len(body), etag, content_type, ctx.now)

    def s3_head(self, bucket: BucketInfo, key: str) -> ObjectInfo:
        with self._op("s3_head", {}, write=False, inject=False) as ctx:
            row = ctx.conn.execute(
                f"SELECT {_INFO_COLUMNS} FROM objects WHERE bucket_id = ? AND key = ?", (bucket.id, key)
            ).fetchone()
            if row is None:
                raise S3Error("NoSuchKey", "The specified key does not exist.", Key=key)
            return _object_info(row)

    def s3_get(self, bucket: BucketInfo, key: str) -> tuple[ObjectInfo, bytes]:
        with self._op("s3_get", {}, write=False, inject=False) as ctx:
            row = ctx.conn.execute(
                f"SELECT {_INFO_COLUMNS}, body FROM objects WHERE bucket_id = ? AND key = ?", (bucket.id, key)
            ).fetchone()
            if row is None:
                raise S3Error("NoSuchKey", "The specified key does not exist.", Key=key)
            return _object_info(row), bytes(row["body"])

    def s3_list(self, bucket: BucketInfo, prefix: str, after: str) -> list[ObjectInfo]:
        """The objects under `prefix` whose keys sort after `after`, in S3's order (UTF-8 bytes)."""
        with self._op("s3_list", {}, write=False, inject=False) as ctx:
            rows = ctx.conn.execute(
                f"SELECT {_INFO_COLUMNS} FROM objects WHERE bucket_id = ? AND key > ? "
                "AND substr(key, 1, ?) = ? ORDER BY key",
                (bucket.id, after, len(prefix), prefix),
            ).fetchall()
            return [_object_info(row) for row in rows]

    def s3_delete(self, bucket: BucketInfo, keys: list[str]) -> None:
        """DeleteObject(s): a key that does not exist is deleted already (S3 answers success)."""
        with self._op("s3_delete", {}, write=True, inject=False) as ctx:
            self._s3_bucket_row(ctx, bucket.name)
            ctx.conn.executemany(
                "DELETE FROM objects WHERE bucket_id = ? AND key = ?", [(bucket.id, key) for key in keys]
            )

    def s3_copy(
        self, source: BucketInfo, source_key: str, target: BucketInfo, key: str, content_type: str | None
    ) -> ObjectInfo:
        """CopyObject; `content_type` None keeps the source's (x-amz-metadata-directive COPY)."""
        with self._op("s3_copy", {}, write=True, inject=False) as ctx:
            self._s3_bucket_row(ctx, target.name)
            row = ctx.conn.execute(
                "SELECT body, etag, content_type FROM objects WHERE bucket_id = ? AND key = ?",
                (source.id, source_key),
            ).fetchone()
            if row is None:
                raise S3Error("NoSuchKey", "The specified key does not exist.", Key=source_key)
            body = bytes(row["body"])
            etag = str(row["etag"]) or _md5(body)
            kind = str(row["content_type"]) if content_type is None else content_type
            ctx.conn.execute(
                "INSERT OR REPLACE INTO objects (bucket_id, key, body, etag, content_type, modified_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (target.id, key, body, etag, kind, ctx.now),
            )
            return ObjectInfo(key, len(body), etag, kind, ctx.now)

    # ------------------------------------------------------------------ multipart uploads

    def s3_create_upload(self, bucket: BucketInfo, key: str, content_type: str) -> str:
        with self._op("s3_create_upload", {}, write=True, inject=False) as ctx:
            self._s3_bucket_row(ctx, bucket.name)
            upload_id = secrets.token_urlsafe(24)
            ctx.conn.execute(
                "INSERT INTO uploads (upload_id, bucket_id, key, content_type, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (upload_id, bucket.id, key, content_type, ctx.now),
            )
            return upload_id

    @staticmethod
    def _upload_row(ctx: OpContext, bucket: BucketInfo, key: str, upload_id: str) -> sqlite3.Row:
        row: sqlite3.Row | None = ctx.conn.execute(
            "SELECT * FROM uploads WHERE upload_id = ? AND bucket_id = ? AND key = ?",
            (upload_id, bucket.id, key),
        ).fetchone()
        if row is None:
            raise S3Error(
                "NoSuchUpload",
                "The specified upload does not exist. The upload ID may be invalid, or the upload may have "
                "been aborted or completed.",
                UploadId=upload_id,
            )
        return row

    def s3_put_part(self, bucket: BucketInfo, key: str, upload_id: str, number: int, body: bytes) -> str:
        if not 1 <= number <= MAX_PARTS:
            raise S3Error("InvalidArgument", f"Part number must be an integer between 1 and {MAX_PARTS}")
        with self._op("s3_put_part", {}, write=True, inject=False) as ctx:
            self._upload_row(ctx, bucket, key, upload_id)
            etag = _md5(body)
            ctx.conn.execute(
                "INSERT OR REPLACE INTO upload_parts (upload_id, part_number, body, etag) "
                "VALUES (?, ?, ?, ?)",
                (upload_id, number, body, etag),
            )
            return etag

    def s3_complete_upload(
        self, bucket: BucketInfo, key: str, upload_id: str, parts: list[tuple[int, str]]
    ) -> ObjectInfo:
        """CompleteMultipartUpload: the listed parts (ascending, ETags matching) become the object."""
        if not parts:
            raise S3Error("MalformedXML", "The XML you provided was not well-formed or did not validate")
        numbers = [n for n, _ in parts]
        if numbers != sorted(set(numbers)):
            raise S3Error("InvalidPartOrder", "The list of parts was not in ascending order.")
        with self._op("s3_complete_upload", {}, write=True, inject=False) as ctx:
            upload = self._upload_row(ctx, bucket, key, upload_id)
            stored = {
                int(row["part_number"]): row
                for row in ctx.conn.execute(
                    "SELECT part_number, etag, length(body) AS size FROM upload_parts WHERE upload_id = ?",
                    (upload_id,),
                )
            }
            for index, (number, etag) in enumerate(parts):
                row = stored.get(number)
                if row is None or row["etag"] != etag.strip().strip('"'):
                    raise S3Error(
                        "InvalidPart",
                        "One or more of the specified parts could not be found. The part may not have been "
                        "uploaded, or the specified entity tag may not match the part's entity tag.",
                        PartNumber=str(number),
                    )
                if index < len(parts) - 1 and int(row["size"]) < MIN_PART_BYTES:
                    raise S3Error(
                        "EntityTooSmall",
                        "Your proposed upload is smaller than the minimum allowed object size.",
                    )
            body = bytearray()
            md5s = bytearray()
            for number, _ in parts:
                part = ctx.conn.execute(
                    "SELECT body, etag FROM upload_parts WHERE upload_id = ? AND part_number = ?",
                    (upload_id, number),
                ).fetchone()
                body += bytes(part["body"])
                md5s += bytes.fromhex(part["etag"])
            etag = f"{_md5(bytes(md5s))}-{len(parts)}"
            content_type = str(upload["content_type"])
            ctx.conn.execute(
                "INSERT OR REPLACE INTO objects (bucket_id, key, body, etag, content_type, modified_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (bucket.id, key, bytes(body), etag, content_type, ctx.now),
            )
            ctx.conn.execute("DELETE FROM upload_parts WHERE upload_id = ?", (upload_id,))
            ctx.conn.execute("DELETE FROM uploads WHERE upload_id = ?", (upload_id,))
            return ObjectInfo(key, len(body), etag, content_type, ctx.now)

    def s3_abort_upload(self, bucket: BucketInfo, key: str, upload_id: str) -> None:
        with self._op("s3_abort_upload", {}, write=True, inject=False) as ctx:
            self._upload_row(ctx, bucket, key, upload_id)
            ctx.conn.execute("DELETE FROM upload_parts WHERE upload_id = ?", (upload_id,))
            ctx.conn.execute("DELETE FROM uploads WHERE upload_id = ?", (upload_id,))
