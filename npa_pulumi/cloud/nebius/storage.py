"""The Nebius adapter's object storage, service accounts, access keys and bucket grants."""

from __future__ import annotations

import os
import ssl
import uuid
from datetime import datetime

from pydantic import SecretStr

from ..errors import (
    CloudRequest,
    FailedPrecondition,
    InvalidArgument,
)
from ..port import (
    BUCKET_OBJECT_ROLE,
    DEFAULT_OPERATION_TIMEOUT_S,
    AccessKey,
    AccessKeySecret,
    Bucket,
    BucketGrant,
    IamGroup,
    ServiceAccount,
)
from . import convert
from .client import (
    PROBE_PREFIX,
    STORAGE_CLASSES,
    NebiusClient,
    _expect,
    _s3_call,
)
from .endpoints import storage_endpoint
from .s3 import S3Client, S3Response


class StorageAndAccess(NebiusClient):
    """The Nebius adapter's object storage, service accounts, access keys and bucket grants."""

    # ------------------------------------------------------------------ object storage

    def get_bucket(self, bucket_id: str) -> Bucket:
        storage = self._api("storage.v1")
        client = self._client("storage.v1", "BucketServiceClient")
        return convert.bucket(
            self._read(
                "storage.v1.BucketService.Get",
                {"id": bucket_id},
                lambda kw: client.get(storage.GetBucketRequest(id=bucket_id), **kw),
            )
        )

    def find_bucket(self, project_id: str, name: str) -> Bucket | None:
        storage = self._api("storage.v1")
        client = self._client("storage.v1", "BucketServiceClient")
        found = self._find(
            "storage.v1.BucketService.GetByName",
            {"parent_id": project_id, "name": name},
            lambda kw: client.get_by_name(
                storage.GetBucketByNameRequest(parent_id=project_id, name=name), **kw
            ),
        )
        return None if found is None else convert.bucket(found)

    def list_buckets(self, project_id: str) -> list[Bucket]:
        storage = self._api("storage.v1")
        client = self._client("storage.v1", "BucketServiceClient")
        items = self._list(
            "storage.v1.BucketService.List",
            {"parent_id": project_id},
            lambda token, kw: client.list(
                storage.ListBucketsRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.bucket(b) for b in items]

    def count_bucket_objects(self, bucket_id: str) -> int:
        """Objects, multipart objects and uploads and non-current versions, from the bucket's counters."""
        storage = self._api("storage.v1")
        client = self._client("storage.v1", "BucketServiceClient")
        raw = self._read(
            "storage.v1.BucketService.Get",
            {"id": bucket_id},
            lambda kw: client.get(storage.GetBucketRequest(id=bucket_id), **kw),
        )
        return convert.bucket_object_count(raw)

    def create_bucket(
        self,
        project_id: str,
        name: str,
        storage_class: str,
        max_size_bytes: int,
        labels: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> Bucket:
        params = {
            "parent_id": project_id,
            "name": name,
            "storage_class": storage_class,
            "max_size_bytes": max_size_bytes,
        }
        api_class = STORAGE_CLASSES.get(storage_class.strip().lower().replace("-", "_"))
        if api_class is None:
            raise InvalidArgument(
                f"unknown storage class {storage_class!r} (expected one of {', '.join(STORAGE_CLASSES)})",
                CloudRequest("storage.v1.BucketService.Create", params),
            )
        storage, common = self._api("storage.v1"), self._api("common.v1")
        client = self._client("storage.v1", "BucketServiceClient")
        request = storage.CreateBucketRequest(
            metadata=common.ResourceMetadata(parent_id=project_id, name=name, labels=labels or {}),
            spec=storage.BucketSpec(
                max_size_bytes=max_size_bytes, default_storage_class=storage.StorageClass[api_class]
            ),
        )
        op = self._mutate(
            "storage.v1.BucketService.Create", params, lambda kw: client.create(request, **kw), timeout_s
        )
        return self.get_bucket(op.resource_id)

    def delete_bucket(self, bucket_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        storage = self._api("storage.v1")
        client = self._client("storage.v1", "BucketServiceClient")
        # A plain Delete schedules the bucket for deletion (the API's own retention window applies);
        # an explicit purge is the operator's call, not the fleet's.
        self._mutate(
            "storage.v1.BucketService.Delete",
            {"id": bucket_id},
            lambda kw: client.delete(storage.DeleteBucketRequest(id=bucket_id), **kw),
            timeout_s,
        )

    def probe_bucket(self, bucket: Bucket, credentials: AccessKeySecret) -> None:
        """Write, read back and delete one object; then check it is gone. Raise on any mismatch."""
        endpoint = storage_endpoint(self.settings, bucket.region)
        context = None
        if self.settings.ca_file is not None and endpoint.startswith("https:"):
            context = ssl.create_default_context(cafile=str(self.settings.ca_file.expanduser()))
        s3 = S3Client(
            endpoint,
            bucket.region,
            credentials.key.aws_access_key_id,
            credentials.secret,
            timeout_s=self.settings.call_timeout_s,
            ssl_context=context,
        )
        key = f"{PROBE_PREFIX}{uuid.uuid4().hex}"
        body = f"npa-pulumi bucket probe {key}\n".encode() + os.urandom(16)
        request = CloudRequest("s3.probe", {"bucket": bucket.name, "endpoint": endpoint, "key": key})

        def step(method: str, payload: bytes = b"") -> S3Response:
            return self._retrier.read(
                lambda: _s3_call(s3, method, bucket.name, key, payload, request), request
            )

        _expect(step("PUT", body), (200,), "write the probe object", request)
        read = _expect(step("GET"), (200,), "read the probe object back", request)
        if read.body != body:
            raise FailedPrecondition(
                f"bucket {bucket.name}: the probe object read back differs from what was written", request
            )
        _expect(step("DELETE"), (200, 204), "delete the probe object", request)
        gone = step("GET")
        if gone.status == 200:
            raise FailedPrecondition(
                f"bucket {bucket.name}: the probe object is still readable after delete", request
            )
        if gone.status != 404:
            _expect(gone, (404,), "verify the probe object's deletion", request)

    # ------------------------------------------------------------------ IAM service accounts and access keys

    def find_service_account(self, project_id: str, name: str) -> ServiceAccount | None:
        iam = self._api("iam.v1")
        client = self._client("iam.v1", "ServiceAccountServiceClient")
        found = self._find(
            "iam.v1.ServiceAccountService.GetByName",
            {"parent_id": project_id, "name": name},
            lambda kw: client.get_by_name(
                iam.GetServiceAccountByNameRequest(parent_id=project_id, name=name), **kw
            ),
        )
        return None if found is None else convert.service_account(found)

    def list_service_accounts(self, project_id: str) -> list[ServiceAccount]:
        iam = self._api("iam.v1")
        client = self._client("iam.v1", "ServiceAccountServiceClient")
        items = self._list(
            "iam.v1.ServiceAccountService.List",
            {"parent_id": project_id},
            lambda token, kw: client.list(
                iam.ListServiceAccountRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.service_account(a) for a in items]

    def list_access_keys(self, project_id: str, service_account_id: str) -> list[AccessKey]:
        iam2 = self._api("iam.v2")
        client = self._client("iam.v2", "AccessKeyServiceClient")
        items = self._list(
            "iam.v2.AccessKeyService.List",
            {"parent_id": project_id},
            lambda token, kw: client.list(
                iam2.ListAccessKeysRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
            ),
        )
        keys = [convert.access_key(k) for k in items]
        return [k for k in keys if k.service_account_id == service_account_id]

    def _get_service_account(self, service_account_id: str) -> ServiceAccount:
        iam = self._api("iam.v1")
        client = self._client("iam.v1", "ServiceAccountServiceClient")
        return convert.service_account(
            self._read(
                "iam.v1.ServiceAccountService.Get",
                {"id": service_account_id},
                lambda kw: client.get(iam.GetServiceAccountRequest(id=service_account_id), **kw),
            )
        )

    def create_service_account(
        self,
        project_id: str,
        name: str,
        labels: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> ServiceAccount:
        iam, common = self._api("iam.v1"), self._api("common.v1")
        client = self._client("iam.v1", "ServiceAccountServiceClient")
        request = iam.CreateServiceAccountRequest(
            metadata=common.ResourceMetadata(parent_id=project_id, name=name, labels=labels or {}),
            spec=iam.ServiceAccountSpec(description="managed by npa-pulumi"),
        )
        op = self._mutate(
            "iam.v1.ServiceAccountService.Create",
            {"parent_id": project_id, "name": name},
            lambda kw: client.create(request, **kw),
            timeout_s,
        )
        return self._get_service_account(op.resource_id)

    def delete_service_account(
        self, service_account_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S
    ) -> None:
        iam = self._api("iam.v1")
        client = self._client("iam.v1", "ServiceAccountServiceClient")
        self._mutate(
            "iam.v1.ServiceAccountService.Delete",
            {"id": service_account_id},
            lambda kw: client.delete(iam.DeleteServiceAccountRequest(id=service_account_id), **kw),
            timeout_s,
        )

    def create_access_key(
        self,
        project_id: str,
        service_account_id: str,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
        expires_at: datetime | None = None,
    ) -> AccessKeySecret:
        iam1, iam2, common = self._api("iam.v1"), self._api("iam.v2"), self._api("common.v1")
        client = self._client("iam.v2", "AccessKeyServiceClient")
        spec = iam2.AccessKeySpec(
            account=iam1.Account(service_account=iam1.Account.ServiceAccount(id=service_account_id)),
            description="npa-fleet-access-key",
            secret_delivery_mode=iam2.SecretDeliveryMode.EXPLICIT,
        )
        if expires_at is not None:
            spec.expires_at = expires_at  # the SDK converts an aware datetime to the Timestamp
        request = iam2.CreateAccessKeyRequest(
            metadata=common.ResourceMetadata(parent_id=project_id), spec=spec
        )
        op = self._mutate(
            "iam.v2.AccessKeyService.Create",
            {"parent_id": project_id, "service_account_id": service_account_id},
            lambda kw: client.create(request, **kw),
            timeout_s,
        )
        key_id = op.resource_id
        key = convert.access_key(
            self._read(
                "iam.v2.AccessKeyService.Get",
                {"id": key_id},
                lambda kw: client.get(iam2.GetAccessKeyRequest(id=key_id), **kw),
            )
        )
        secret = self._read(
            "iam.v2.AccessKeyService.GetSecret",
            {"id": key_id},
            lambda kw: client.get_secret(iam2.GetAccessKeySecretRequest(id=key_id), **kw),
        )
        if secret.aws_access_key_id and not key.aws_access_key_id:
            key = key.model_copy(update={"aws_access_key_id": secret.aws_access_key_id})
        return AccessKeySecret(key=key, secret=SecretStr(secret.secret))

    def delete_access_key(self, access_key_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        iam2 = self._api("iam.v2")
        client = self._client("iam.v2", "AccessKeyServiceClient")
        self._mutate(
            "iam.v2.AccessKeyService.Delete",
            {"id": access_key_id},
            lambda kw: client.delete(iam2.DeleteAccessKeyRequest(id=access_key_id), **kw),
            timeout_s,
        )

    def grant_bucket_access(
        self,
        project_id: str,
        bucket_id: str,
        service_account_id: str,
        group_name: str,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> BucketGrant:
        """A custom group in the project, the account its member, and the group's access permit on exactly
        the bucket (docs.nebius.com/iam/authorization/groups/manage): each found first, created if missing."""
        owner = self._get_service_account(service_account_id).labels  # the group carries them too
        group_id, made_group = self._ensure_group(project_id, group_name, owner, timeout_s)
        membership_id, made_member = self._ensure_membership(group_id, service_account_id, timeout_s)
        permit_id, made_permit = self._ensure_permit(group_id, bucket_id, BUCKET_OBJECT_ROLE, timeout_s)
        return BucketGrant(
            group_id=group_id,
            membership_id=membership_id,
            permit_id=permit_id,
            bucket_id=bucket_id,
            service_account_id=service_account_id,
            role=BUCKET_OBJECT_ROLE,
            created=made_group or made_member or made_permit,
        )

    def _ensure_group(
        self, project_id: str, name: str, labels: dict[str, str], timeout_s: float
    ) -> tuple[str, bool]:
        iam, common = self._api("iam.v1"), self._api("common.v1")
        client = self._client("iam.v1", "GroupServiceClient")
        found = self._find(
            "iam.v1.GroupService.GetByName",
            {"parent_id": project_id, "name": name},
            lambda kw: client.get_by_name(iam.GetGroupByNameRequest(parent_id=project_id, name=name), **kw),
        )
        if found is not None:
            return str(found.metadata.id), False
        request = iam.CreateGroupRequest(
            metadata=common.ResourceMetadata(parent_id=project_id, name=name, labels=labels),
            spec=iam.GroupSpec(),
        )
        op = self._mutate(
            "iam.v1.GroupService.Create",
            {"parent_id": project_id, "name": name},
            lambda kw: client.create(request, **kw),
            timeout_s,
        )
        return str(op.resource_id), True

    def list_groups(self, project_id: str) -> list[IamGroup]:
        iam = self._api("iam.v1")
        client = self._client("iam.v1", "GroupServiceClient")
        items = self._list(
            "iam.v1.GroupService.List",
            {"parent_id": project_id},
            lambda token, kw: client.list(
                iam.ListGroupsRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.iam_group(g) for g in items]

    def delete_group(self, group_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        iam = self._api("iam.v1")
        client = self._client("iam.v1", "GroupServiceClient")
        self._mutate(
            "iam.v1.GroupService.Delete",
            {"id": group_id},
            lambda kw: client.delete(iam.DeleteGroupRequest(id=group_id), **kw),
            timeout_s,
        )

    def _ensure_membership(self, group_id: str, member_id: str, timeout_s: float) -> tuple[str, bool]:
        iam, common = self._api("iam.v1"), self._api("common.v1")
        client = self._client("iam.v1", "GroupMembershipServiceClient")
        members = self._list(
            "iam.v1.GroupMembershipService.ListMembers",
            {"parent_id": group_id},
            lambda token, kw: client.list_members(
                iam.ListGroupMembershipsRequest(parent_id=group_id, **self._page_kwargs(token)), **kw
            ),
            field="memberships",
        )
        for membership in members:
            if membership.spec.member_id == member_id:
                return str(membership.metadata.id), False
        request = iam.CreateGroupMembershipRequest(
            metadata=common.ResourceMetadata(parent_id=group_id),
            spec=iam.GroupMembershipSpec(member_id=member_id),
        )
        op = self._mutate(
            "iam.v1.GroupMembershipService.Create",
            {"parent_id": group_id, "member_id": member_id},
            lambda kw: client.create(request, **kw),
            timeout_s,
        )
        return str(op.resource_id), True

    def _ensure_permit(
        self, group_id: str, resource_id: str, role: str, timeout_s: float
    ) -> tuple[str, bool]:
        iam, common = self._api("iam.v1"), self._api("common.v1")
        client = self._client("iam.v1", "AccessPermitServiceClient")
        permits = self._list(
            "iam.v1.AccessPermitService.List",
            {"parent_id": group_id},
            lambda token, kw: client.list(
                iam.ListAccessPermitRequest(parent_id=group_id, **self._page_kwargs(token)), **kw
            ),
        )
        for permit in permits:
            if permit.spec.resource_id == resource_id and permit.spec.role == role:
                return str(permit.metadata.id), False
        request = iam.CreateAccessPermitRequest(
            metadata=common.ResourceMetadata(parent_id=group_id),
            spec=iam.AccessPermitSpec(resource_id=resource_id, role=role),
        )
        op = self._mutate(
            "iam.v1.AccessPermitService.Create",
            {"parent_id": group_id, "resource_id": resource_id, "role": role},
            lambda kw: client.create(request, **kw),
            timeout_s,
        )
        return str(op.resource_id), True
