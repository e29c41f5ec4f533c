"""S3's view of the simulator's access keys and buckets: who signs a request (a key and its derived
secret), which buckets a tenant holds, CreateBucket and DeleteBucket (through the storage service, as the
cloud's own API creates and deletes them) and a bucket's versioning status."""

from __future__ import annotations

import time

from npa_pulumi.cloud.errors import AlreadyExists, CloudError, QuotaExceeded
from npa_pulumi.simulator import records
from npa_pulumi.simulator.access_keys import SECRET_DERIVATION, access_key_secret
from npa_pulumi.simulator.objects import (
    VERSIONING,
    VERSIONING_STATES,
    AccessKey,
    BucketInfo,
    bucket_info,
    bucket_row,
    gone,
    versioning_of,
)
from npa_pulumi.simulator.s3errors import S3Error
from npa_pulumi.simulator.storage import Buckets
from npa_pulumi.simulator.store import Store


class S3Buckets:
    """Access keys and buckets as S3 sees them, over the store and the storage service."""

    def __init__(self, store: Store, buckets: Buckets) -> None:
        self.store = store
        self.buckets = buckets

    def access_key(self, aws_access_key_id: str) -> AccessKey | None:
        """The live access key with this public id, or None (unknown, deleted, being deleted, or a temporary
        key past its expiry: S3 refuses it as unknown)."""
        with self.store.op("s3_access_key", {}, write=False, inject=False) as ctx:
            row = ctx.conn.execute(
                "SELECT * FROM resources WHERE kind = 'access_key' AND name = ?", (aws_access_key_id,)
            ).fetchone()
            if gone(row):
                return None
            data = records.data_of(row)
            if records.key_expired(data, time.time()):
                return None
            return AccessKey(
                aws_access_key_id,
                row["tenant_id"],
                row["project_id"],
                data.get("secret_derivation") == SECRET_DERIVATION,
            )

    def secret(self, key: AccessKey) -> str:
        """The key's secret, derived again (storage.access_key_secret): only to check a signature."""
        return access_key_secret(self.store.directory, key.aws_access_key_id)

    def bucket(self, name: str) -> BucketInfo:
        with self.store.op("s3_bucket", {}, write=False, inject=False) as ctx:
            return bucket_info(bucket_row(ctx, name))

    def owned_by(self, tenant_id: str) -> list[BucketInfo]:
        with self.store.op("s3_buckets", {}, write=False, inject=False) as ctx:
            rows = ctx.conn.execute(
                "SELECT * FROM resources WHERE kind = 'bucket' AND tenant_id = ? ORDER BY name", (tenant_id,)
            ).fetchall()
            return [bucket_info(row) for row in rows if not gone(row)]

    def create(self, key: AccessKey, name: str, location: str) -> bool:
        """CreateBucket in the key's project; False when the caller's tenant already owns it (S3's
        BucketAlreadyOwnedByYou is the caller's to report)."""
        with self.store.op("s3_create_bucket", {}, write=False, inject=False) as ctx:
            project = ctx.project_row(key.project_id)
        if location and location != project["region"]:
            raise S3Error(
                "IllegalLocationConstraintException",
                f"the {location} location constraint is incompatible with this endpoint's region for "
                f"project {key.project_id} ({project['region']})",
            )
        try:
            self.buckets.create_bucket(key.project_id, name, "standard", 0)
        except AlreadyExists:
            existing = self.bucket(name)
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

    def delete(self, bucket: BucketInfo) -> None:
        """DeleteBucket: refused while the bucket holds objects or uploads, as S3 refuses it."""
        if self.buckets.count_bucket_objects(bucket.id):
            raise S3Error(
                "BucketNotEmpty", "The bucket you tried to delete is not empty", BucketName=bucket.name
            )
        self.buckets.delete_bucket(bucket.id)

    def versioning(self, bucket: BucketInfo) -> str:
        """The bucket's versioning status: "Enabled", "Suspended", or "" (never enabled)."""
        with self.store.op("s3_versioning", {}, write=False, inject=False) as ctx:
            return versioning_of(bucket_row(ctx, bucket.name))

    def set_versioning(self, bucket: BucketInfo, status: str) -> None:
        if status not in VERSIONING_STATES:
            raise S3Error("MalformedXML", "Versioning Status must be Enabled or Suspended")
        with self.store.op("s3_set_versioning", {}, write=True, inject=False) as ctx:
            row = bucket_row(ctx, bucket.name)
            data = records.data_of(row)
            data[VERSIONING] = status
            ctx.set_data(row["id"], data)
