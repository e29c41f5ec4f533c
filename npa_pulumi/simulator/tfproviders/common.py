"""What the nebius handlers share: the local cloud they act on, cloud errors as diagnostics, the
idempotency key of a create, and waiting for an object to become ready."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from npa_pulumi.cloud.errors import CloudError, NotFound, Unavailable
from npa_pulumi.runtime.retry import call_with_retry
from npa_pulumi.simulator.simulator import LocalSimulator
from npa_pulumi.simulator.tfproviders.base import CallContext, ProviderError, State

LOCAL_CLOUD_DIR_ENV = "NPA_LOCAL_CLOUD_DIR"
_POLL_S = 0.2


def simulator(ctx: CallContext) -> LocalSimulator:
    """The local cloud named by NPA_LOCAL_CLOUD_DIR (the Go side refuses to serve without it)."""
    cached = ctx.cache.get("simulator")
    if isinstance(cached, _Retrying):
        return cast(LocalSimulator, cached)
    directory = os.environ.get(LOCAL_CLOUD_DIR_ENV)
    if not directory:
        raise ProviderError("Not on the local cloud", f"{LOCAL_CLOUD_DIR_ENV} is not set")
    sim = _Retrying(LocalSimulator(Path(directory), auto_init=False))
    ctx.cache["simulator"] = sim
    return cast(LocalSimulator, sim)


class _Retrying:
    """The local cloud as the real provider reaches Nebius: its SDK retries a call the service answered
    UNAVAILABLE, with backoff, so a transient refusal is absorbed inside one apply and only a refusal that
    outlasts every attempt reaches the user. A create is safe to repeat: it carries its idempotency key."""

    def __init__(self, sim: LocalSimulator) -> None:
        self._sim = sim

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._sim, name)
        if not callable(value) or name.startswith("_"):
            return value

        def retried(*args: Any, **kwargs: Any) -> Any:
            return call_with_retry(lambda: value(*args, **kwargs), retry_on=Unavailable, what=name)

        return retried


@contextmanager
def cloud_call(what: str) -> Iterator[None]:
    """A cloud error as the diagnostic the real provider shows: the gRPC-style code and the message."""
    try:
        yield
    except CloudError as err:
        raise ProviderError(f"{what}: {err.kind}", err.message) from None


def get_or_none(fetch: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
    """A read: None when the object is gone (Terraform then drops it from state)."""
    try:
        return fetch()
    except NotFound:
        return None


def idempotency_key(type_name: str, planned: State, caller: str | None = None) -> str:
    """The create's idempotency key: a digest of the caller and the request. The caller is the Terraform
    working directory the provider runs in (terraform starts its providers there; the bridge's is the
    cluster stack's own work dir), so the same stack repeating the identical create after a crash replays
    the object its first attempt made, while anyone else's create of that name (another stack, fleet or
    tool: another key, or none) fails AlreadyExists, as on Nebius. The real provider sends a fresh key per
    call instead, so on Nebius the retried create fails too (docs/local-cloud.md, "Faults")."""
    who = caller if caller is not None else os.getcwd()
    request = json.dumps({"type": type_name, "caller": who, "request": planned}, sort_keys=True, default=str)
    return "tf-" + hashlib.sha256(request.encode()).hexdigest()[:32]


def wait_for(
    sim: LocalSimulator, fetch: Callable[[], dict[str, Any]], ready: tuple[str, ...], label: str
) -> dict[str, Any]:
    """Poll until the record's state is one of `ready` (the provider waits for the operation)."""
    deadline = time.monotonic() + sim.wait_timeout()
    while True:
        record = fetch()
        if record.get("state") in ready:
            return record
        if time.monotonic() >= deadline:
            raise ProviderError(f"{label} is still {record.get('state')}", "the local cloud's wait timed out")
        time.sleep(_POLL_S)


def size_bytes(spec: dict[str, Any] | None, default: int | None = None) -> int | None:
    """A size given in bytes, KiB, MiB or GiB (one of them), in bytes."""
    spec = spec or {}
    for field, factor in (("size_bytes", 1), ("size_kibibytes", 1 << 10), ("size_mebibytes", 1 << 20)):
        if spec.get(field) is not None:
            return int(spec[field]) * factor
    if spec.get("size_gibibytes") is not None:
        return int(spec["size_gibibytes"]) * (1 << 30)
    return default


def labels_of(state: State) -> dict[str, str]:
    labels = state.get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()}


def no_scheme(url: str) -> str:
    """A Nebius endpoint is host[:port], no scheme."""
    return url.split("://", 1)[-1].rstrip("/")


def now_iso() -> str:
    """A create's `created_at` (RFC 3339, as the API reports it)."""
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
