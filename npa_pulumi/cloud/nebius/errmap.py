"""Translate SDK / gRPC failures into the port's typed errors, keeping the request that failed.

Codes are compared by name so this module needs neither grpc nor the SDK at import time.
"""

from __future__ import annotations

from typing import Any

from ..errors import (
    AlreadyExists,
    CloudError,
    CloudRequest,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    QuotaExceeded,
    Unauthenticated,
    Unavailable,
)

CODE_TO_ERROR: dict[str, type[CloudError]] = {
    "NOT_FOUND": NotFound,
    "ALREADY_EXISTS": AlreadyExists,
    "PERMISSION_DENIED": PermissionDenied,
    "RESOURCE_EXHAUSTED": QuotaExceeded,
    "FAILED_PRECONDITION": FailedPrecondition,
    "INVALID_ARGUMENT": InvalidArgument,
    "OUT_OF_RANGE": InvalidArgument,
    "UNAVAILABLE": Unavailable,
    # A single attempt running out of time is as transient as an unreachable service. A whole
    # operation running out of time is OperationTimeout, raised by the waiter, not here.
    "DEADLINE_EXCEEDED": Unavailable,
    "UNAUTHENTICATED": Unauthenticated,
}


def code_name(code: Any) -> str:
    """`StatusCode.NOT_FOUND` / an int / a string -> "NOT_FOUND"."""
    name = getattr(code, "name", None)
    if isinstance(name, str):
        return name
    if isinstance(code, int):
        from grpc import StatusCode

        for member in StatusCode:
            if member.value[0] == code:
                return member.name
        return "UNKNOWN"
    return str(code).rsplit(".", 1)[-1].upper()


def error_for_code(code: Any, message: str, request: CloudRequest | None) -> CloudError:
    name = code_name(code)
    cls = CODE_TO_ERROR.get(name, CloudError)
    text = message or name.lower().replace("_", " ")
    if cls is CloudError:
        text = f"{name}: {text}"
    return cls(text, request)


def _quota_detail(status: Any) -> str:
    """The SDK parks structured ServiceError details on the status; QuotaFailure ones name the quota."""
    parts: list[str] = []
    for err in getattr(status, "service_errors", None) or []:
        details = getattr(err, "details", None)
        if details is None or getattr(details, "field", "") != "quota_failure":
            continue
        for v in details.value.violations:
            parts.append(f"{v.quota}: requested {v.requested}, limit {v.limit}")
    return "; ".join(parts)


def error_from_status(status: Any, request: CloudRequest | None) -> CloudError:
    """An SDK RequestStatus (of a failed call or a failed operation) -> a CloudError."""
    message = getattr(status, "message", None) or ""
    quota = _quota_detail(status)
    if quota:
        message = f"{message} ({quota})" if message else quota
    return error_for_code(status.code, message, request)


def map_exception(exc: BaseException, request: CloudRequest | None) -> CloudError:
    """Any exception from an SDK call -> a CloudError. CloudErrors pass through unchanged."""
    if isinstance(exc, CloudError):
        return exc
    status = getattr(exc, "status", None)
    if status is not None and hasattr(status, "code"):
        return error_from_status(status, request)
    code_fn = getattr(exc, "code", None)
    details_fn = getattr(exc, "details", None)
    if callable(code_fn) and callable(details_fn):  # a raw grpc.RpcError that escaped the SDK
        return error_for_code(code_fn(), str(details_fn() or ""), request)
    if isinstance(exc, TimeoutError):
        return Unavailable(f"no answer in time ({exc or 'timed out'})", request)
    if isinstance(exc, ConnectionError):
        return Unavailable(f"connection failed: {exc}", request)
    return CloudError(f"{type(exc).__name__}: {exc}", request)
