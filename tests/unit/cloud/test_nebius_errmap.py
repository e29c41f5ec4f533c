"""gRPC / SDK failures -> the port's typed errors, keeping the request."""

from __future__ import annotations

import grpc
import pytest

from npa_pulumi.cloud import errors as e
from npa_pulumi.cloud.nebius.errmap import code_name, error_for_code, map_exception

REQ = e.CloudRequest("vpc.v1.NetworkService.Create", {"parent_id": "project-1"})


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (grpc.StatusCode.NOT_FOUND, e.NotFound),
        (grpc.StatusCode.ALREADY_EXISTS, e.AlreadyExists),
        (grpc.StatusCode.PERMISSION_DENIED, e.PermissionDenied),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, e.QuotaExceeded),
        (grpc.StatusCode.FAILED_PRECONDITION, e.FailedPrecondition),
        (grpc.StatusCode.INVALID_ARGUMENT, e.InvalidArgument),
        (grpc.StatusCode.UNAVAILABLE, e.Unavailable),
        (grpc.StatusCode.DEADLINE_EXCEEDED, e.Unavailable),
        (grpc.StatusCode.UNAUTHENTICATED, e.Unauthenticated),
    ],
)
def test_codes_map_to_typed_errors(code: grpc.StatusCode, cls: type[e.CloudError]) -> None:
    err = error_for_code(code, "why", REQ)
    assert type(err) is cls
    assert err.request is REQ and err.message == "why"


def test_unknown_codes_keep_their_name() -> None:
    err = error_for_code(grpc.StatusCode.INTERNAL, "boom", REQ)
    assert type(err) is e.CloudError and "INTERNAL" in str(err)


def test_code_name_accepts_ints_and_enums() -> None:
    assert code_name(grpc.StatusCode.NOT_FOUND) == "NOT_FOUND"
    assert code_name(5) == "NOT_FOUND"


def test_sdk_request_errors_are_mapped_with_quota_details() -> None:
    from nebius.aio.service_error import RequestError, RequestStatusExtended
    from nebius.api.nebius.common import v1 as common

    quota = common.ServiceError(
        quota_failure=common.QuotaFailure(
            violations=[common.QuotaFailure.Violation(quota="storage.bucket.count", limit="3", requested="4")]
        )
    )
    status = RequestStatusExtended(
        code=grpc.StatusCode.RESOURCE_EXHAUSTED,
        message="quota exhausted",
        details=[],
        service_errors=[quota],
        request_id="r",
        trace_id="t",
    )
    err = map_exception(RequestError(status), REQ)
    assert isinstance(err, e.QuotaExceeded)
    assert "storage.bucket.count: requested 4, limit 3" in err.message


def test_local_failures() -> None:
    assert isinstance(map_exception(TimeoutError("slow"), REQ), e.Unavailable)
    assert isinstance(map_exception(ConnectionRefusedError("no"), REQ), e.Unavailable)
    passthrough = e.NotFound("x", REQ)
    assert map_exception(passthrough, REQ) is passthrough
    other = map_exception(RuntimeError("odd"), REQ)
    assert type(other) is e.CloudError and "RuntimeError" in str(other)
