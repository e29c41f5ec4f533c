"""The Nebius adapter's plumbing (see adapter.py for what the adapter is): the SDK's client stack, calls
with one retry policy, paging, operation waits and identity."""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import threading
import time
import urllib.error
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

from pydantic import SecretStr

from ... import __version__
from ..errors import (
    CloudError,
    CloudRequest,
    FailedPrecondition,
    NotFound,
    OperationTimeout,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
)
from ..port import (
    Principal,
)
from .endpoints import resolve_route
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


class NebiusClient:
    """What every part of the adapter shares: settings and identity, the SDK and its clients, calls with
    retries, paging and operation waits, and the principal. Thread-safe; close() when done."""

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
        self._home_project = ""  # a service account's own project (from the principal)

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

    def __enter__(self) -> NebiusClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get_sdk(self) -> Any:
        with self._lock:
            if self._sdk is None:
                sdk = self._build_sdk()
                if self.identity.kind == "federated":
                    try:
                        self._mint(sdk, renew=False)  # a refused exchange fails now, not as a timeout
                    except BaseException:
                        _off_loop(lambda: sdk.sync_close(timeout=10))
                        raise
                self._sdk = sdk
            return self._sdk

    def _build_sdk(self) -> Any:
        from nebius.sdk import SDK

        _quiet_token_renewal_logs()

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
        bearer = None
        if ident.kind == "federated":
            from .federated import federated_bearer, oidc_source

            source = oidc_source(self.settings, os.environ)  # checked by resolve_identity already
            bearer = federated_bearer(source, ident.service_account_id)
            kwargs["credentials"] = bearer
        elif ident.kind == "credentials-file":
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
            sdk = SDK(**kwargs)
        except CloudError:
            raise
        except Exception as exc:
            # SDK config errors name fields and types, never key material.
            raise ProfileError(f"cannot set up Nebius credentials from {ident.describe()}: {exc}") from None
        if bearer is not None:
            bearer.set_channel(sdk)  # the exchange goes through the SDK's own channel (routing, TLS)
        return sdk

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
        SDK's bearer is asked for a synchronous renewal (a fresh exchange for a service account or federated
        credentials; the profile's token file is re-read), not for whatever it has cached, which may be
        close to expiry. A refusal (a revoked key, a bad credentials file, an OIDC token the exchange does
        not accept) is reported at once as a typed error: without `report error` the SDK keeps retrying a
        refused exchange in the background and the caller only sees a timeout. Transient failures are
        retried like every other read."""
        return self._mint(self._get_sdk(), renew=True)

    def token_expiry(self) -> datetime | None:
        """When a token freshly minted from this identity expires (None: it carries no expiry, as a token
        read from a file or the environment): `doctor` reports the lifetime. The token is dropped."""
        expiration = self._mint_token(self._get_sdk(), renew=True).expiration
        return expiration if isinstance(expiration, datetime) else None

    def _mint(self, sdk: Any, *, renew: bool) -> SecretStr:
        return SecretStr(self._mint_token(sdk, renew=renew).token)

    def _mint_token(self, sdk: Any, *, renew: bool) -> Any:
        """A token from the SDK's bearer: renewed synchronously (`renew`), else the cached one (the first
        fetch awaited when there is none yet). Errors come back typed, never chained to the SDK's."""
        from nebius.aio.token.options import (
            OPTION_RENEW_REQUIRED,
            OPTION_RENEW_SYNCHRONOUS,
            OPTION_REPORT_ERROR,
        )

        from .federated import OidcTokenError

        request = CloudRequest("iam.TokenExchange", {"profile": self.identity.describe()})
        options = {OPTION_REPORT_ERROR: "1"}
        if renew:
            options |= {OPTION_RENEW_REQUIRED: "1", OPTION_RENEW_SYNCHRONOUS: "1"}

        def mint() -> Any:
            try:
                return _off_loop(
                    lambda: sdk.get_token_sync(timeout=self.settings.call_timeout_s, options=options)
                )
            except CloudError:
                raise
            except OidcTokenError as exc:
                raise Unauthenticated(f"{self.identity.describe()}: {exc}", request) from None
            except Exception as exc:
                # Never chain the SDK exception: its context may hold credential material.
                mapped = map_exception(exc, request)
                if type(mapped) is CloudError and _is_sdk_error(exc):
                    # No status from the API: the credentials themselves are unusable (an empty
                    # token file, an unreadable key). SDK errors name the problem, not the secret.
                    raise Unauthenticated(
                        f"{self.identity.describe()} cannot provide an IAM token: {exc}", request
                    ) from None
                refused = isinstance(mapped, Unauthenticated | PermissionDenied)
                if self.identity.kind == "federated" and refused:
                    raise type(mapped)(
                        f"the token exchange refused {self.identity.describe()}: {mapped.message}. Check "
                        "the account's federated credentials (issuer, subject) and the token's audience",
                        request,
                    ) from None
                raise mapped from None

        token = self._retrier.read(mint, request)
        if token.is_empty():
            raise Unauthenticated(f"{self.identity.describe()} yields an empty IAM token", request)
        return token

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
            self._home_project = resp.service_account_profile.info.metadata.parent_id
            if self.identity.kind == "federated" and self._home_project:
                # A service account lives in one project of one tenant: that is the fleet's tenant
                # unless the spec names one (then it must be this one).
                tenants = [self._tenant_of_project(self._home_project)]
        else:
            raise Unauthenticated(f"{self.identity.describe()} authenticates as an anonymous account")
        tenant = require_tenant(self.identity, tenants)
        if tenants and tenant not in tenants:
            raise PermissionDenied(
                f"{subject} ({self.identity.describe()}) is not a member of tenant {tenant}",
                CloudRequest("iam.v1.ProfileService.Get"),
            )
        self._principal = Principal(
            tenant_id=tenant, profile=self.identity.profile, subject=subject, project_id=self._home_project
        )
        return self._principal

    def _tenant_of_project(self, project_id: str) -> str:
        iam = self._api("iam.v1")
        client = self._client("iam.v1", "ProjectServiceClient")
        found = self._read(
            "iam.v1.ProjectService.Get",
            {"id": project_id},
            lambda kw: client.get(iam.GetProjectRequest(id=project_id), **kw),
        )
        return str(found.metadata.parent_id)

    def home_project(self) -> str:
        """A service account's own project (federated auth: where an empty spec region comes from); "" for
        a user account."""
        self.principal()
        return self._home_project


class _NoTraceback(logging.Filter):
    """The SDK logs every failed background token renewal at error level with its traceback. The adapter
    reports a refusal itself, typed and at once (`_mint`); a traceback on stderr would only bury it (the
    CLI's contract: no traceback). One line stays, naming the error."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info, record.exc_text = None, None
        return True


_RENEWAL_LOGGER = "nebius.aio.token.renewable"


def _quiet_token_renewal_logs() -> None:
    logger = logging.getLogger(_RENEWAL_LOGGER)
    if not any(isinstance(f, _NoTraceback) for f in logger.filters):
        logger.addFilter(_NoTraceback())


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
