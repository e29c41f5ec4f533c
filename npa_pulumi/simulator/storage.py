"""Object storage buckets: create, find, count their objects, delete, grant a service account access
(as Nebius grants it: a group, its membership and an access permit), and the probe that checks an access
key can write, read and delete an object (access_keys.py: how a key's secret is checked).

A bucket's objects live only in the cloud's S3 server, SeaweedFS (seaweed.py, seaweedd.py): the database
holds buckets, keys and grants. A cloud whose server never ran holds no object; one whose server ran and
stopped has its objects counted by the server, started again for it."""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from typing import Any

from npa_pulumi.cloud.errors import InvalidArgument, PermissionDenied
from npa_pulumi.simulator import accounting as acct
from npa_pulumi.simulator import records
from npa_pulumi.simulator.access_keys import sha256
from npa_pulumi.simulator.store import Store
from npa_pulumi.simulator.transaction import OpContext, clean_labels

BUCKET_ROLES = records.BUCKET_ROLES

STORAGE_CLASSES = ("standard", "enhanced_throughput", "intelligent")
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def _check_bucket_request(name: str, storage_class: str, max_size_bytes: int) -> None:
    if storage_class not in STORAGE_CLASSES:
        raise InvalidArgument(f"storage class {storage_class!r} is not one of {', '.join(STORAGE_CLASSES)}")
    if not _BUCKET_NAME.match(name or ""):
        raise InvalidArgument(
            f"bucket name {name!r} must be 3-63 characters of a-z, 0-9, '.' and '-', "
            "starting and ending with a letter or digit"
        )
    if not isinstance(max_size_bytes, int) or isinstance(max_size_bytes, bool) or max_size_bytes < 0:
        raise InvalidArgument("max_size_bytes must be a non-negative integer")


class Buckets:
    """Buckets, their objects' count and probe, and access grants on them, over the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get_bucket(self, bucket_id: str) -> dict[str, Any]:
        with self.store.op("get_bucket", {"bucket_id": bucket_id}, write=False) as ctx:
            return ctx.fetch("bucket", bucket_id)

    def find_bucket(self, project_id: str, name: str) -> dict[str, Any] | None:
        with self.store.op("find_bucket", {"project_id": project_id, "name": name}, write=False) as ctx:
            ctx.project_row(project_id)
            return ctx.find_named("bucket", project_id, name)

    def create_bucket(
        self,
        project_id: str,
        name: str,
        storage_class: str,
        max_size_bytes: int,
        labels: dict[str, str] | None = None,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        storage_class = (storage_class or "").strip().lower().removeprefix("storage_class_")
        params = {
            "project_id": project_id,
            "name": name,
            "storage_class": storage_class,
            "max_size_bytes": max_size_bytes,
            "labels": clean_labels(labels),
        }
        with self.store.op("create_bucket", params, write=True, timeout_s=timeout_s) as ctx:
            project = ctx.project_row(project_id)
            _check_bucket_request(name, storage_class, max_size_bytes)
            size_quota = acct.BUCKET_SIZE_PREFIX + storage_class.replace("_", "-")
            created = ctx.create(
                "bucket",
                name=name,
                scope="",  # bucket names are global, as in S3
                project_id=project_id,
                parent_id=project_id,
                region=project["region"],
                key=idempotency_key,
                data={
                    "labels": clean_labels(labels),
                    "storage_class": storage_class,
                    "max_size_bytes": max_size_bytes,
                },
                params=params,
                charges=[acct.Charge(acct.BUCKET_COUNT, 1), acct.Charge(size_quota, max_size_bytes)],
            )
        _s3_sync(self.store)
        return created

    def list_buckets(self, project_id: str) -> list[dict[str, Any]]:
        with self.store.op("list_buckets", {"project_id": project_id}, write=False) as ctx:
            ctx.project_row(project_id)
            return ctx.list_of("bucket", "project_id", project_id)

    def count_bucket_objects(self, bucket_id: str) -> int:
        """Every object version, delete marker and multipart upload in progress: they hold data, and S3
        refuses to delete their bucket."""
        with self.store.op("count_bucket_objects", {"bucket_id": bucket_id}, write=False) as ctx:
            name = str(ctx.row("bucket", bucket_id)["name"])
        from npa_pulumi.simulator import seaweed

        if not seaweed.serving(self.store.directory):
            if not seaweed.has_data(self.store.directory):
                return 0  # no server ever ran for this cloud: nothing was written to a bucket
            _serve(self.store)
        return seaweed.count_objects(self.store.directory, name)

    def put_object(self, bucket_id: str, key: str, body: str = "") -> None:
        """Store one object (simulator only: what a training job's upload would leave in a bucket), through
        the cloud's S3 server (started if none runs)."""
        with self.store.op("put_object", {"bucket_id": bucket_id, "key": key}, write=False) as ctx:
            name = str(ctx.row("bucket", bucket_id)["name"])
        from npa_pulumi.simulator import seaweed

        _serve(self.store)
        seaweed.put_object(self.store.directory, name, key, body.encode())

    def delete_bucket(self, bucket_id: str, timeout_s: float | None = None) -> None:
        with self.store.op("delete_bucket", {"bucket_id": bucket_id}, write=True, timeout_s=timeout_s) as ctx:
            ctx.row("bucket", bucket_id)
            # The storage API's delete takes the bucket's data with it (the fleet's teardown refuses a
            # non-empty bucket itself); S3's DeleteBucket refuses one, and the server keeps that rule.
            ctx.delete_row(bucket_id)
        _s3_sync(self.store)  # SeaweedFS's bucket goes with its data (a server started later never makes it)

    def probe_bucket(self, bucket_id: str, access_key_id: str, aws_access_key_id: str, secret: str) -> None:
        """Write, read back and delete one object, authenticating with the access key as S3 would."""
        params = {
            "bucket_id": bucket_id,
            "access_key_id": access_key_id,
            "aws_access_key_id": aws_access_key_id,
        }
        with self.store.op("probe_bucket", params, write=False) as ctx:
            bucket = ctx.row("bucket", bucket_id)
            key_row = ctx.conn.execute(
                "SELECT * FROM resources WHERE kind = 'access_key' AND id = ?", (access_key_id,)
            ).fetchone()
            key_data = records.data_of(key_row) if key_row is not None else {}
            if key_row is None or key_data.get("aws_access_key_id") != aws_access_key_id:
                raise PermissionDenied(f"InvalidAccessKeyId: access key {aws_access_key_id} does not exist")
            if records.key_expired(key_data, time.time()):
                raise PermissionDenied(f"InvalidAccessKeyId: access key {aws_access_key_id} has expired")
            if key_row["project_id"] != bucket["project_id"]:
                raise PermissionDenied(
                    f"AccessDenied: access key {aws_access_key_id} is in project {key_row['project_id']}, "
                    f"bucket {bucket['name']} in {bucket['project_id']}"
                )
            if not secrets.compare_digest(key_data["secret_sha256"], sha256(secret)):
                raise PermissionDenied(
                    f"SignatureDoesNotMatch: wrong secret for access key {aws_access_key_id}"
                )
            account = ctx.row("service_account", key_row["parent_id"])
            grants = records.data_of(account).get("bucket_grants") or []
            if not any(g.get("bucket_id") == bucket_id and g.get("role") in BUCKET_ROLES for g in grants):
                raise PermissionDenied(
                    f"AccessDenied: service account {account['id']} holds no access permit on bucket "
                    f"{bucket['name']} (grant_bucket_access)"
                )
            from npa_pulumi.simulator import seaweed

            # The checks above are the cloud's; where its S3 server runs, the server decides as well, as
            # the key's holder would meet it (a deployment's probe does not start a server for this).
            if seaweed.serving(self.store.directory):
                object_key, body = f".npa-probe/{secrets.token_hex(8)}", secrets.token_bytes(32)
                name = bucket["name"]
                seaweed.probe(self.store.directory, name, aws_access_key_id, secret, object_key, body)

    def grant_bucket_access(
        self, project_id: str, bucket_id: str, service_account_id: str, group_name: str, role: str
    ) -> dict[str, Any]:
        """As Nebius grants it: a group in the project with the account as member, and the group's access
        permit with `role` on the bucket; recorded on the account (ids derived from what they join)."""
        params = {
            "project_id": project_id,
            "bucket_id": bucket_id,
            "service_account_id": service_account_id,
            "group_name": group_name,
            "role": role,
        }
        with self.store.op("grant_bucket_access", params, write=True) as ctx:
            bucket = ctx.row("bucket", bucket_id)
            account = ctx.row("service_account", service_account_id)
            if bucket["project_id"] != project_id or account["project_id"] != project_id:
                raise InvalidArgument(f"bucket and service account must both be in project {project_id}")

            def rid(kind: str, *parts: str) -> str:
                return f"{kind}-e00{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:16]}"

            group_id = rid("group", project_id, group_name)
            self._ensure_grant_group(ctx, account, group_id, group_name)
            grant = {
                "group_name": group_name,
                "group_id": group_id,
                "membership_id": rid("groupmembership", group_id, service_account_id),
                "permit_id": rid("accesspermit", group_id, bucket_id, role),
                "bucket_id": bucket_id,
                "role": role,
            }
            data = records.data_of(account)
            grants = list(data.get("bucket_grants") or [])
            created = grant not in grants
            if created:
                data["bucket_grants"] = [*grants, grant]
                ctx.set_data(service_account_id, data)
        _s3_sync(self.store)
        return {**grant, "service_account_id": service_account_id, "created": created}

    def _ensure_grant_group(self, ctx: OpContext, account: Any, group_id: str, name: str) -> None:
        """The grant's group, a project IAM group of its own as on Nebius (it outlives the account: a
        teardown deletes it with the storage identity), with the account's labels: whoever owns the
        account owns its grant's group."""
        if ctx.find_named("iam_group", account["project_id"], name) is not None:
            return
        labels = records.data_of(account).get("labels") or {}
        params = {"project_id": account["project_id"], "name": name}
        ctx.create(
            "iam_group",
            name=name,
            scope=account["project_id"],
            project_id=account["project_id"],
            parent_id=account["project_id"],
            region=account["region"],
            key=None,
            data={"labels": labels},
            params=params,
            charges=[],
            resource_id=group_id,
        )


def _serve(store: Store) -> None:
    """The cloud's S3 server, started if none runs (seaweedd.py)."""
    from npa_pulumi.simulator import seaweedd

    seaweedd.ensure_running(store.directory)


def _s3_sync(store: Store) -> None:
    """A SeaweedFS S3 server serving this cloud takes the change before the call returns (seaweed.py)."""
    from npa_pulumi.simulator import seaweed

    seaweed.sync_if_serving(store.directory)
