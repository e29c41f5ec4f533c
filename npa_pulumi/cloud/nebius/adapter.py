"""The `nebius` adapter: the cloud port on the official `nebius` Python SDK.

The SDK (and its ~2 s of generated API modules) is imported on first use, service module by service
module, so `import npa_pulumi.cloud` stays cheap and nothing here runs until a method is called.

Every call goes through the SDK's real client stack: its channel, resolver, credentials (a
`~/.nebius/config.yaml` profile, a service-account credentials file, or an explicitly allowed
`NEBIUS_IAM_TOKEN`), its idempotency-key interceptor and its operation wrapper. What the adapter adds:

* identity resolution before any RPC (profile pinning, tenant from that profile, stale-token stripping;
  see `profile.py`), and the API domain by region (see `endpoints.py`);
* one retry policy for everything (see `retry.py`); the SDK's per-request retries are off;
* listing paged to completion; operations waited to completion within the caller's timeout;
* typed errors that keep the request they came from (see `errmap.py`); records normalised as the port
  describes (see `convert.py`).

Choices of API version: projects use `nebius.iam.v1.ProjectService` (deprecated for v2, but only v1
reports a project's suspension state, which preflight must check); access keys use
`nebius.iam.v2.AccessKeyService` with `SecretDeliveryMode.EXPLICIT` (secret fetched once via GetSecret).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import ssl
import threading
import time
import urllib.error
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from pydantic import SecretStr

from ... import __version__
from ...kube.kubeconfig import ClusterAccess, ExecCredential
from ..errors import (
    CloudError,
    CloudRequest,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OperationTimeout,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
)
from ..port import (
    BUCKET_OBJECT_ROLE,
    DEFAULT_OPERATION_TIMEOUT_S,
    AccessKey,
    AccessKeySecret,
    Bucket,
    BucketGrant,
    CapacityBlockGroup,
    Cluster,
    Filesystem,
    GpuCluster,
    Network,
    NodeGroup,
    Principal,
    Project,
    QuotaAllowance,
    ServiceAccount,
    Subnet,
)
from . import convert
from .endpoints import resolve_route, storage_endpoint
from .errmap import error_from_status, map_exception
from .profile import ProfileError, require_tenant, resolve_identity
from .retry import Retrier
from .s3 import S3Client, S3Response
from .settings import ENV_IAM_TOKEN, NebiusSettings

log = logging.getLogger(__name__)
T = TypeVar("T")

# The header the SDK's own interceptor fills with a fresh UUID when a call has none. Setting it
# ourselves keeps one key across our retries of the same mutation.
IDEMPOTENCY_HEADER = "x-idempotency-key"
STORAGE_CLASSES = {
    "standard": "STANDARD",
    "enhanced_throughput": "ENHANCED_THROUGHPUT",
    "intelligent": "INTELLIGENT",
}
PROBE_PREFIX = ".npa-probe/"


class NebiusCloud:
    """The cloud port against the real Nebius API. Thread-safe; close() when done."""

    name = "nebius"

    def __init__(
        self, settings: NebiusSettings | None = None, *, sleep: Callable[[float], None] = time.sleep
    ):
        self.settings = settings or NebiusSettings.from_options()
        self.identity = resolve_identity(self.settings)  # fails fast on a bad profile, before any RPC
        self.route = resolve_route(self.settings, self.identity)
        self._sleep = sleep
        self._retrier = Retrier(self.settings.retry, sleep=sleep)
        self._lock = threading.Lock()
        self._sdk: Any = None
        self._clients: dict[tuple[str, str], Any] = {}
        self._principal: Principal | None = None

    def __repr__(self) -> str:
        tenant = self.identity.tenant_id or "?"
        return f"NebiusCloud({self.identity.describe()}, tenant={tenant}, endpoint={self.route.describe()})"

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        with self._lock:
            sdk, self._sdk = self._sdk, None
            self._clients.clear()
        if sdk is not None:
            _off_loop(lambda: sdk.sync_close(timeout=10))

    def __enter__(self) -> NebiusCloud:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get_sdk(self) -> Any:
        with self._lock:
            if self._sdk is None:
                self._sdk = self._build_sdk()
            return self._sdk

    def _build_sdk(self) -> Any:
        from nebius.sdk import SDK

        kwargs: dict[str, Any] = {
            "user_agent_prefix": f"npa-pulumi/{__version__}",
            "domain": self.route.domain,
        }
        if self.route.constant:
            from nebius.base.resolver import Constant

            kwargs["resolver"] = Constant(self.route.constant)
        if self.settings.insecure:
            from nebius.base.options import INSECURE

            kwargs["options"] = [(INSECURE, True)]
        if self.settings.ca_file is not None:
            import grpc

            roots = self.settings.ca_file.expanduser().read_bytes()
            kwargs["tls_credentials"] = grpc.ssl_channel_credentials(root_certificates=roots)
        ident = self.identity
        if ident.kind == "credentials-file":
            kwargs["credentials_file_name"] = str(ident.credentials_file)
        elif ident.kind == "env-token":
            from nebius.aio.token.static import EnvBearer

            kwargs["credentials"] = EnvBearer(ENV_IAM_TOKEN)
        else:
            from nebius.aio.cli_config import Config

            kwargs["config_reader"] = Config(
                client_id=self.settings.federation_client_id,
                config_file=str(ident.config_file),
                profile=ident.profile,
                token_env=ident.token_env,  # the ambient token only when NPA_REUSE_IAM_TOKEN is set
                no_parent_id=True,  # every request names its parent; never let a profile fill one in
            )
        try:
            return SDK(**kwargs)
        except CloudError:
            raise
        except Exception as exc:
            # SDK config errors name fields and types, never key material.
            raise ProfileError(f"cannot set up Nebius credentials from {ident.describe()}: {exc}") from None

    # ------------------------------------------------------------------ plumbing

    def _api(self, module: str) -> Any:
        """A generated API module, e.g. `iam.v1` -> nebius.api.nebius.iam.v1 (imported on first use)."""
        return importlib.import_module(f"nebius.api.nebius.{module}")

    def _client(self, module: str, name: str) -> Any:
        key = (module, name)
        client = self._clients.get(key)
        if client is None:
            from nebius.base.protos.direct import suppress_deprecation_warnings

            cls = getattr(self._api(module), name)
            sdk = self._get_sdk()
            with suppress_deprecation_warnings():  # v1 projects: chosen knowingly, see module doc
                client = cls(sdk)
            self._clients[key] = client
        return client

    def _call(
        self,
        request: CloudRequest,
        send: Callable[[dict[str, Any]], Any],
        *,
        metadata: list[tuple[str, str]] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """One attempt of one RPC. `send(kwargs)` builds the SDK Request; we wait for it here."""
        kwargs: dict[str, Any] = {"timeout": timeout_s or self.settings.call_timeout_s, "retries": 0}
        if metadata:
            kwargs["metadata"] = metadata
        log.debug("nebius call %s", request.describe())
        try:
            return _off_loop(lambda: send(kwargs).wait())
        except CloudError:
            raise
        except Exception as exc:
            raise map_exception(exc, request) from exc

    def _read(self, method: str, params: dict[str, Any], send: Callable[[dict[str, Any]], Any]) -> Any:
        request = CloudRequest(method, params)
        return self._retrier.read(lambda: self._call(request, send), request)

    def _find(self, method: str, params: dict[str, Any], send: Callable[[dict[str, Any]], Any]) -> Any | None:
        try:
            return self._read(method, params, send)
        except NotFound:
            return None

    def _list(
        self,
        method: str,
        params: dict[str, Any],
        send_page: Callable[[str, dict[str, Any]], Any],
        field: str = "items",
    ) -> list[Any]:
        """All items of a paged List call. A page token seen twice is an error, not a loop."""
        items: list[Any] = []
        token = ""
        seen: set[str] = set()
        while True:
            request = CloudRequest(method, {**params, **({"page_token": token} if token else {})})
            page = self._retrier.read(
                lambda t=token, r=request: self._call(r, lambda kw: send_page(t, kw)),  # type: ignore[misc]
                request,
            )
            items.extend(getattr(page, field))
            token = page.next_page_token
            if not token:
                return items
            if token in seen:
                raise CloudError(f"the service returned page token {token!r} twice", request)
            seen.add(token)

    def _mutate(
        self, method: str, params: dict[str, Any], send: Callable[[dict[str, Any]], Any], timeout_s: float
    ) -> Any:
        """Start a mutation and wait for its operation; returns the finished SDK Operation."""
        request = CloudRequest(method, params)
        deadline = time.monotonic() + timeout_s
        key = str(uuid.uuid4())
        operation = self._retrier.mutation(
            lambda: self._call(request, send, metadata=[(IDEMPOTENCY_HEADER, key)]), request
        )
        self._wait(operation, request, deadline, timeout_s)
        return operation

    def _wait(self, operation: Any, request: CloudRequest, deadline: float, timeout_s: float) -> None:
        interval = self.settings.poll_interval_s
        poll = CloudRequest("common.v1.OperationService.Get", {"id": operation.id, "of": request.method})
        while not operation.done():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise OperationTimeout(
                    f"operation {operation.id} did not finish within {timeout_s:g}s; it may still complete",
                    request,
                )
            self._sleep(min(interval, remaining))
            try:
                self._poll(operation, poll, deadline)
            except Unavailable as exc:
                # The mutation was accepted; only its outcome is unknown. Re-sending it could duplicate.
                raise OperationTimeout(
                    f"operation {operation.id} could not be confirmed: {exc.message}", request
                ) from exc
            interval = min(interval * 1.5, self.settings.max_poll_interval_s)
        if not operation.successful():
            raise error_from_status(operation.status(), request)

    def _poll(self, operation: Any, poll: CloudRequest, deadline: float) -> None:
        """Refresh the operation once (Unavailable retried until the deadline)."""
        attempt_timeout = max(0.05, min(self.settings.call_timeout_s, deadline - time.monotonic()))
        self._retrier.read(
            lambda: self._call(poll, lambda kw: _UpdateRequest(operation, kw), timeout_s=attempt_timeout),
            poll,
            deadline=deadline,
        )

    def _page_kwargs(self, token: str) -> dict[str, Any]:
        return {"page_size": self.settings.page_size, "page_token": token}

    # ------------------------------------------------------------------ identity

    def access_token(self) -> SecretStr:
        """An IAM token minted from this adapter's identity, for the recipe's `TF_VAR_iam_token`.

        Minted per Terraform run (never stored), so a long fleet run does not reuse a stale token: the
        SDK's bearer is asked for a synchronous renewal (a fresh exchange for a service account; the
        profile's token file is re-read), not for whatever it has cached, which may be close to expiry.
        A refusal (a revoked key, a bad credentials file) is reported at once as a typed error: without
        `report error` the SDK keeps retrying a refused exchange in the background and the caller only
        sees a timeout. Transient failures are retried like every other read."""
        from nebius.aio.token.options import (
            OPTION_RENEW_REQUIRED,
            OPTION_RENEW_SYNCHRONOUS,
            OPTION_REPORT_ERROR,
        )

        sdk = self._get_sdk()
        request = CloudRequest("iam.TokenExchange", {"profile": self.identity.describe()})
        options = {OPTION_RENEW_REQUIRED: "1", OPTION_RENEW_SYNCHRONOUS: "1", OPTION_REPORT_ERROR: "1"}

        def mint() -> Any:
            try:
                return _off_loop(
                    lambda: sdk.get_token_sync(timeout=self.settings.call_timeout_s, options=options)
                )
            except CloudError:
                raise
            except Exception as exc:
                # Never chain the SDK exception: its context may hold credential material.
                mapped = map_exception(exc, request)
                if type(mapped) is CloudError and _is_sdk_error(exc):
                    # No status from the API: the credentials themselves are unusable (an empty
                    # token file, an unreadable key). SDK errors name the problem, not the secret.
                    raise Unauthenticated(
                        f"{self.identity.describe()} cannot provide an IAM token: {exc}", request
                    ) from None
                raise mapped from None

        token = self._retrier.read(mint, request)
        if token.is_empty():
            raise Unauthenticated(f"{self.identity.describe()} yields an empty IAM token", request)
        return SecretStr(token.token)

    def principal(self) -> Principal:
        if self._principal is not None:
            return self._principal
        iam = self._api("iam.v1")
        resp = self._read(
            "iam.v1.ProfileService.Get",
            {},
            lambda kw: self._client("iam.v1", "ProfileServiceClient").get(iam.GetProfileRequest(), **kw),
        )
        which = resp.WhichOneof("profile")
        if which == "user_profile":
            subject = resp.user_profile.id
            tenants = [t.tenant_id for t in resp.user_profile.tenants]
        elif which == "service_account_profile":
            subject, tenants = resp.service_account_profile.info.metadata.id, []
        else:
            raise Unauthenticated(f"{self.identity.describe()} authenticates as an anonymous account")
        tenant = require_tenant(self.identity, tenants)
        if tenants and tenant not in tenants:
            raise PermissionDenied(
                f"{subject} ({self.identity.describe()}) is not a member of tenant {tenant}",
                CloudRequest("iam.v1.ProfileService.Get"),
            )
        self._principal = Principal(tenant_id=tenant, profile=self.identity.profile, subject=subject)
        return self._principal

    def default_region(self) -> str:
        """The region of the profile's `parent-id` project (one read); "" for a profile without one, a
        credentials file or a bare token. The Nebius CLI configuration has no region of its own."""
        parent = self.identity.parent_id
        return self.get_project(parent).region if parent else ""

    # ------------------------------------------------------------------ IAM projects

    def list_projects(self, tenant_id: str) -> list[Project]:
        iam = self._api("iam.v1")
        client = self._client("iam.v1", "ProjectServiceClient")
        items = self._list(
            "iam.v1.ProjectService.List",
            {"parent_id": tenant_id},
            lambda token, kw: client.list(
                iam.ListProjectsRequest(parent_id=tenant_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.project(c) for c in items]

    def get_project(self, project_id: str) -> Project:
        iam = self._api("iam.v1")
        client = self._client("iam.v1", "ProjectServiceClient")
        return convert.project(
            self._read(
                "iam.v1.ProjectService.Get",
                {"id": project_id},
                lambda kw: client.get(iam.GetProjectRequest(id=project_id), **kw),
            )
        )

    def create_project(
        self,
        tenant_id: str,
        name: str,
        region: str,
        labels: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> Project:
        iam, common = self._api("iam.v1"), self._api("common.v1")
        client = self._client("iam.v1", "ProjectServiceClient")
        request = iam.CreateProjectRequest(
            metadata=common.ResourceMetadata(parent_id=tenant_id, name=name, labels=labels or {}),
            spec=iam.ContainerSpec(region=region),
        )
        op = self._mutate(
            "iam.v1.ProjectService.Create",
            {"parent_id": tenant_id, "name": name, "region": region},
            lambda kw: client.create(request, **kw),
            timeout_s,
        )
        return self.get_project(op.resource_id)

    def delete_project(self, project_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        iam2 = self._api("iam.v2")
        client = self._client("iam.v2", "ProjectServiceClient")
        self._mutate(
            "iam.v2.ProjectService.Delete",
            {"id": project_id},
            lambda kw: client.delete(iam2.DeleteProjectRequest(id=project_id), **kw),
            timeout_s,
        )

    # ------------------------------------------------------------------ VPC

    def list_networks(self, project_id: str) -> list[Network]:
        vpc = self._api("vpc.v1")
        client = self._client("vpc.v1", "NetworkServiceClient")
        items = self._list(
            "vpc.v1.NetworkService.List",
            {"parent_id": project_id},
            lambda token, kw: client.list(
                vpc.ListNetworksRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.network(n) for n in items]

    def get_network(self, network_id: str) -> Network:
        vpc = self._api("vpc.v1")
        client = self._client("vpc.v1", "NetworkServiceClient")
        return convert.network(
            self._read(
                "vpc.v1.NetworkService.Get",
                {"id": network_id},
                lambda kw: client.get(vpc.GetNetworkRequest(id=network_id), **kw),
            )
        )

    def create_network(
        self,
        project_id: str,
        name: str,
        labels: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> Network:
        vpc, common = self._api("vpc.v1"), self._api("common.v1")
        client = self._client("vpc.v1", "NetworkServiceClient")
        # An empty spec asks for the default private pools, as `nebius vpc network create` does.
        request = vpc.CreateNetworkRequest(
            metadata=common.ResourceMetadata(parent_id=project_id, name=name, labels=labels or {}),
            spec=vpc.NetworkSpec(),
        )
        op = self._mutate(
            "vpc.v1.NetworkService.Create",
            {"parent_id": project_id, "name": name},
            lambda kw: client.create(request, **kw),
            timeout_s,
        )
        return self.get_network(op.resource_id)

    def delete_network(self, network_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        vpc = self._api("vpc.v1")
        client = self._client("vpc.v1", "NetworkServiceClient")
        self._mutate(
            "vpc.v1.NetworkService.Delete",
            {"id": network_id},
            lambda kw: client.delete(vpc.DeleteNetworkRequest(id=network_id), **kw),
            timeout_s,
        )

    def list_subnets(self, project_id: str) -> list[Subnet]:
        vpc = self._api("vpc.v1")
        client = self._client("vpc.v1", "SubnetServiceClient")
        items = self._list(
            "vpc.v1.SubnetService.List",
            {"parent_id": project_id},
            lambda token, kw: client.list(
                vpc.ListSubnetsRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.subnet(s) for s in items]

    def get_subnet(self, subnet_id: str) -> Subnet:
        vpc = self._api("vpc.v1")
        client = self._client("vpc.v1", "SubnetServiceClient")
        return convert.subnet(
            self._read(
                "vpc.v1.SubnetService.Get",
                {"id": subnet_id},
                lambda kw: client.get(vpc.GetSubnetRequest(id=subnet_id), **kw),
            )
        )

    def create_subnet(
        self,
        project_id: str,
        network_id: str,
        name: str,
        labels: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> Subnet:
        vpc, common = self._api("vpc.v1"), self._api("common.v1")
        client = self._client("vpc.v1", "SubnetServiceClient")
        request = vpc.CreateSubnetRequest(
            metadata=common.ResourceMetadata(parent_id=project_id, name=name, labels=labels or {}),
            spec=vpc.SubnetSpec(
                network_id=network_id,
                ipv4_private_pools=vpc.IPv4PrivateSubnetPools(use_network_pools=True),
            ),
        )
        op = self._mutate(
            "vpc.v1.SubnetService.Create",
            {"parent_id": project_id, "network_id": network_id, "name": name},
            lambda kw: client.create(request, **kw),
            timeout_s,
        )
        return self.get_subnet(op.resource_id)

    def delete_subnet(self, subnet_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        vpc = self._api("vpc.v1")
        client = self._client("vpc.v1", "SubnetServiceClient")
        self._mutate(
            "vpc.v1.SubnetService.Delete",
            {"id": subnet_id},
            lambda kw: client.delete(vpc.DeleteSubnetRequest(id=subnet_id), **kw),
            timeout_s,
        )

    # ------------------------------------------------------------------ quotas and reserved capacity

    def list_quota_allowances(self, tenant_id: str) -> list[QuotaAllowance]:
        quotas = self._api("quotas.v1")
        client = self._client("quotas.v1", "QuotaAllowanceServiceClient")
        items = self._list(
            "quotas.v1.QuotaAllowanceService.List",
            {"parent_id": tenant_id},
            lambda token, kw: client.list(
                quotas.ListQuotaAllowancesRequest(parent_id=tenant_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.quota_allowance(q, tenant_id) for q in items]

    def list_capacity_block_groups(self, tenant_id: str) -> list[CapacityBlockGroup]:
        capacity = self._api("capacity.v1")
        client = self._client("capacity.v1", "CapacityBlockGroupServiceClient")
        items = self._list(
            "capacity.v1.CapacityBlockGroupService.List",
            {"parent_id": tenant_id},
            lambda token, kw: client.list(
                capacity.ListCapacityBlockGroupsRequest(parent_id=tenant_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.capacity_block_group(b) for b in items]

    def get_capacity_block_group(self, block_id: str) -> CapacityBlockGroup:
        capacity = self._api("capacity.v1")
        client = self._client("capacity.v1", "CapacityBlockGroupServiceClient")
        return convert.capacity_block_group(
            self._read(
                "capacity.v1.CapacityBlockGroupService.Get",
                {"id": block_id},
                lambda kw: client.get(capacity.GetCapacityBlockGroupRequest(id=block_id), **kw),
            )
        )

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
        self, project_id: str, service_account_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S
    ) -> AccessKeySecret:
        from pydantic import SecretStr

        iam1, iam2, common = self._api("iam.v1"), self._api("iam.v2"), self._api("common.v1")
        client = self._client("iam.v2", "AccessKeyServiceClient")
        request = iam2.CreateAccessKeyRequest(
            metadata=common.ResourceMetadata(parent_id=project_id),
            spec=iam2.AccessKeySpec(
                account=iam1.Account(service_account=iam1.Account.ServiceAccount(id=service_account_id)),
                description="npa-fleet-access-key",
                secret_delivery_mode=iam2.SecretDeliveryMode.EXPLICIT,
            ),
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
        group_id, made_group = self._ensure_group(project_id, group_name, timeout_s)
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

    def _ensure_group(self, project_id: str, name: str, timeout_s: float) -> tuple[str, bool]:
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
            metadata=common.ResourceMetadata(parent_id=project_id, name=name), spec=iam.GroupSpec()
        )
        op = self._mutate(
            "iam.v1.GroupService.Create",
            {"parent_id": project_id, "name": name},
            lambda kw: client.create(request, **kw),
            timeout_s,
        )
        return str(op.resource_id), True

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

    # ------------------------------------------------------------------ Managed Kubernetes and compute

    def get_cluster(self, cluster_id: str) -> Cluster:
        mk8s = self._api("mk8s.v1")
        client = self._client("mk8s.v1", "ClusterServiceClient")
        return convert.cluster(
            self._read(
                "mk8s.v1.ClusterService.Get",
                {"id": cluster_id},
                lambda kw: client.get(mk8s.GetClusterRequest(id=cluster_id), **kw),
            )
        )

    def kubernetes_api_available(self) -> bool:
        return True

    def object_storage_endpoint(self, region: str) -> str:
        return f"https://storage.{region}.nebius.cloud"

    def cluster_access(self, cluster_id: str) -> ClusterAccess:
        """The cluster's public endpoint and CA from the API, and the `nebius` CLI as the exec credential
        plugin pinned to this adapter's profile (as `nebius mk8s cluster get-credentials` writes it), so
        kubectl keeps authenticating as this fleet's principal, whatever profile is active later."""
        mk8s = self._api("mk8s.v1")
        client = self._client("mk8s.v1", "ClusterServiceClient")
        raw = self._read(
            "mk8s.v1.ClusterService.Get",
            {"id": cluster_id},
            lambda kw: client.get(mk8s.GetClusterRequest(id=cluster_id), **kw),
        )
        record = convert.cluster(raw)
        profile = ["--profile", self.identity.profile] if self.identity.profile else []
        credential = ExecCredential(
            "nebius", ("--no-browser", "mk8s", "v1", "cluster", "get-token", *profile, "--format", "json")
        )
        return ClusterAccess(
            record.endpoint, raw.status.control_plane.auth.cluster_ca_certificate, credential
        )

    def list_clusters(self, project_id: str) -> list[Cluster]:
        mk8s = self._api("mk8s.v1")
        client = self._client("mk8s.v1", "ClusterServiceClient")
        items = self._list(
            "mk8s.v1.ClusterService.List",
            {"parent_id": project_id},
            lambda token, kw: client.list(
                mk8s.ListClustersRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.cluster(c) for c in items]

    def delete_cluster(self, cluster_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        mk8s = self._api("mk8s.v1")
        client = self._client("mk8s.v1", "ClusterServiceClient")
        self._mutate(
            "mk8s.v1.ClusterService.Delete",
            {"id": cluster_id},
            lambda kw: client.delete(mk8s.DeleteClusterRequest(id=cluster_id), **kw),
            timeout_s,
        )

    def get_node_group(self, node_group_id: str) -> NodeGroup:
        mk8s = self._api("mk8s.v1")
        client = self._client("mk8s.v1", "NodeGroupServiceClient")
        return convert.node_group(
            self._read(
                "mk8s.v1.NodeGroupService.Get",
                {"id": node_group_id},
                lambda kw: client.get(mk8s.GetNodeGroupRequest(id=node_group_id), **kw),
            )
        )

    def list_node_groups(self, cluster_id: str) -> list[NodeGroup]:
        mk8s = self._api("mk8s.v1")
        client = self._client("mk8s.v1", "NodeGroupServiceClient")
        items = self._list(
            "mk8s.v1.NodeGroupService.List",
            {"parent_id": cluster_id},
            lambda token, kw: client.list(
                mk8s.ListNodeGroupsRequest(parent_id=cluster_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.node_group(ng) for ng in items]

    def delete_node_group(self, node_group_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        mk8s = self._api("mk8s.v1")
        client = self._client("mk8s.v1", "NodeGroupServiceClient")
        self._mutate(
            "mk8s.v1.NodeGroupService.Delete",
            {"id": node_group_id},
            lambda kw: client.delete(mk8s.DeleteNodeGroupRequest(id=node_group_id), **kw),
            timeout_s,
        )

    def list_filesystems(self, project_id: str) -> list[Filesystem]:
        compute = self._api("compute.v1")
        client = self._client("compute.v1", "FilesystemServiceClient")
        items = self._list(
            "compute.v1.FilesystemService.List",
            {"parent_id": project_id},
            lambda token, kw: client.list(
                compute.ListFilesystemsRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.filesystem(fs) for fs in items]

    def list_gpu_clusters(self, project_id: str) -> list[GpuCluster]:
        compute = self._api("compute.v1")
        client = self._client("compute.v1", "GpuClusterServiceClient")
        items = self._list(
            "compute.v1.GpuClusterService.List",
            {"parent_id": project_id},
            lambda token, kw: client.list(
                compute.ListGpuClustersRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.gpu_cluster(g) for g in items]


def _is_sdk_error(exc: BaseException) -> bool:
    from nebius.base.error import SDKError

    return isinstance(exc, SDKError)


def _off_loop(fn: Callable[[], T]) -> T:
    """Run a blocking SDK wait, from a worker thread when this thread runs an asyncio loop.

    The port is synchronous, but callers may sit in async code (a Pulumi program, an async CLI); the
    SDK refuses synchronous waits there. Blocking that loop for the call is the port's contract anyway.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return fn()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="npa-nebius") as pool:
        return pool.submit(fn).result()


class _UpdateRequest:
    """Adapts Operation.sync_update to the `send(kwargs).wait()` shape `_call` expects."""

    def __init__(self, operation: Any, kwargs: dict[str, Any]) -> None:
        self._operation, self._kwargs = operation, kwargs

    def wait(self) -> None:
        self._operation.sync_update(**self._kwargs)


def _s3_call(
    s3: S3Client, method: str, bucket: str, key: str, body: bytes, request: CloudRequest
) -> S3Response:
    try:
        resp = s3.request(method, bucket, key, body)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Unavailable(f"object storage unreachable: {reason}", request) from None
    if resp.status >= 500:
        raise Unavailable(f"object storage answered HTTP {resp.status} {resp.error_code()}".strip(), request)
    return resp


def _expect(resp: S3Response, ok: tuple[int, ...], what: str, request: CloudRequest) -> S3Response:
    if resp.status in ok:
        return resp
    code = resp.error_code()
    text = f"could not {what}: HTTP {resp.status}" + (f" {code}" if code else "")
    if resp.status == 403:
        raise PermissionDenied(text, request)
    if resp.status == 404 and code == "NoSuchBucket":
        raise NotFound(text, request)
    raise FailedPrecondition(text, request)


@contextmanager
def opened(settings: NebiusSettings | None = None) -> Iterator[NebiusCloud]:
    """`with opened(settings) as cloud:` closes the SDK's channels and threads afterwards."""
    cloud = NebiusCloud(settings)
    try:
        yield cloud
    finally:
        cloud.close()
