"""S3 multipart uploads: an upload is not an object until it is completed (its parts are rows of
`upload_parts`); completing one writes the object as a plain PUT would (objects.write_current)."""

from __future__ import annotations

import secrets
import sqlite3

from npa_pulumi.simulator.objects import BucketInfo, ObjectInfo, bucket_row, md5, write_current
from npa_pulumi.simulator.s3errors import S3Error
from npa_pulumi.simulator.store import Store
from npa_pulumi.simulator.transaction import OpContext

MIN_PART_BYTES = 5 * 1024 * 1024  # S3: every part of a multipart upload but the last
MAX_PARTS = 10000


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


class S3Uploads:
    """Multipart uploads over the store: create, put a part, complete, abort."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def create(self, bucket: BucketInfo, key: str, content_type: str) -> str:
        with self.store.op("s3_create_upload", {}, write=True, inject=False) as ctx:
            bucket_row(ctx, bucket.name)
            upload_id = secrets.token_urlsafe(24)
            ctx.conn.execute(
                "INSERT INTO uploads (upload_id, bucket_id, key, content_type, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (upload_id, bucket.id, key, content_type, ctx.now),
            )
            return upload_id

    def put_part(self, bucket: BucketInfo, key: str, upload_id: str, number: int, body: bytes) -> str:
        if not 1 <= number <= MAX_PARTS:
            raise S3Error("InvalidArgument", f"Part number must be an integer between 1 and {MAX_PARTS}")
        with self.store.op("s3_put_part", {}, write=True, inject=False) as ctx:
            _upload_row(ctx, bucket, key, upload_id)
            etag = md5(body)
            ctx.conn.execute(
                "INSERT OR REPLACE INTO upload_parts (upload_id, part_number, body, etag) "
                "VALUES (?, ?, ?, ?)",
                (upload_id, number, body, etag),
            )
            return etag

    def complete(
        self, bucket: BucketInfo, key: str, upload_id: str, parts: list[tuple[int, str]]
    ) -> ObjectInfo:
        """CompleteMultipartUpload: the listed parts (ascending, ETags matching) become the object."""
        if not parts:
            raise S3Error("MalformedXML", "The XML you provided was not well-formed or did not validate")
        numbers = [n for n, _ in parts]
        if numbers != sorted(set(numbers)):
            raise S3Error("InvalidPartOrder", "The list of parts was not in ascending order.")
        with self.store.op("s3_complete_upload", {}, write=True, inject=False) as ctx:
            upload = _upload_row(ctx, bucket, key, upload_id)
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
            etag = f"{md5(bytes(md5s))}-{len(parts)}"
            target = bucket_row(ctx, bucket.name)
            done = write_current(ctx, target, key, bytes(body), etag, str(upload["content_type"]))
            ctx.conn.execute("DELETE FROM upload_parts WHERE upload_id = ?", (upload_id,))
            ctx.conn.execute("DELETE FROM uploads WHERE upload_id = ?", (upload_id,))
            return done

    def abort(self, bucket: BucketInfo, key: str, upload_id: str) -> None:
        with self.store.op("s3_abort_upload", {}, write=True, inject=False) as ctx:
            _upload_row(ctx, bucket, key, upload_id)
            ctx.conn.execute("DELETE FROM upload_parts WHERE upload_id = ?", (upload_id,))
            ctx.conn.execute("DELETE FROM uploads WHERE upload_id = ?", (upload_id,))
