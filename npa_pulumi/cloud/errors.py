"""The small, typed set of errors every cloud adapter maps its failures onto.

The fleet engine never sees gRPC status codes, HTTP errors or SQLite exceptions: each adapter translates
them into one of these, keeping the request that failed so messages can say exactly what was asked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CloudRequest:
    """What was asked of the cloud: the service method and its (non-secret) arguments."""

    method: str
    params: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(self.params.items()))
        return f"{self.method}({args})"


class CloudError(Exception):
    """Base class of every cloud failure. `retryable` says whether an identical retry may succeed."""

    kind = "cloud-error"
    retryable = False

    def __init__(self, message: str, request: CloudRequest | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.request = request

    def __str__(self) -> str:
        if self.request is None:
            return f"{self.kind}: {self.message}"
        return f"{self.kind}: {self.message} (request: {self.request.describe()})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message": self.message,
            "request": None if self.request is None else self.request.describe(),
        }


class NotFound(CloudError):
    kind = "not-found"


class AlreadyExists(CloudError):
    kind = "already-exists"


class PermissionDenied(CloudError):
    kind = "permission-denied"


class QuotaExceeded(CloudError):
    """RESOURCE_EXHAUSTED: a quota or capacity limit refused the request."""

    kind = "quota-exceeded"


# The gRPC name for the same condition; both names are part of the public surface.
ResourceExhausted = QuotaExceeded


class FailedPrecondition(CloudError):
    kind = "failed-precondition"


class InvalidArgument(CloudError):
    kind = "invalid-argument"


class Unavailable(CloudError):
    """The service could not be reached or answered UNAVAILABLE; safe to retry reads, and
    mutations only when they carry an idempotency key."""

    kind = "unavailable"
    retryable = True


class Unauthenticated(CloudError):
    kind = "unauthenticated"


class OperationTimeout(CloudError):
    """A long-running operation did not finish within the caller's timeout. The operation may still
    complete later, so this is not retryable blindly."""

    kind = "operation-timeout"


ERROR_KINDS: dict[str, type[CloudError]] = {
    cls.kind: cls
    for cls in (
        NotFound,
        AlreadyExists,
        PermissionDenied,
        QuotaExceeded,
        FailedPrecondition,
        InvalidArgument,
        Unavailable,
        Unauthenticated,
        OperationTimeout,
    )
}


def error_from_kind(kind: str, message: str, request: CloudRequest | None = None) -> CloudError:
    """Rebuild a typed error from its kind name (used where errors cross a process boundary)."""
    return ERROR_KINDS.get(kind, CloudError)(message, request)
