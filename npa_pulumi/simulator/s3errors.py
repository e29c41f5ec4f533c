"""The errors the local cloud's S3 wire answers with: S3's codes, HTTP statuses and XML error documents."""

from __future__ import annotations


def escape(text: str) -> str:
    """XML character data: `&`, `<` and `>` escaped (xml.sax.saxutils.escape, without importing urllib)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# S3's HTTP status for each error code this server uses.
STATUS: dict[str, int] = {
    "AccessDenied": 403,
    "AuthorizationHeaderMalformed": 400,
    "AuthorizationQueryParametersError": 400,
    "BadDigest": 400,
    "BucketAlreadyExists": 409,
    "BucketAlreadyOwnedByYou": 409,
    "BucketNotEmpty": 409,
    "EntityTooLarge": 400,
    "EntityTooSmall": 400,
    "IllegalLocationConstraintException": 400,
    "IncompleteBody": 400,
    "InternalError": 500,
    "InvalidAccessKeyId": 403,
    "InvalidArgument": 400,
    "InvalidBucketName": 400,
    "InvalidPart": 400,
    "InvalidPartOrder": 400,
    "InvalidRange": 416,
    "InvalidRequest": 400,
    "MalformedXML": 400,
    "MethodNotAllowed": 405,
    "MissingContentLength": 411,
    "NoSuchBucket": 404,
    "NoSuchKey": 404,
    "NoSuchUpload": 404,
    "NoSuchVersion": 404,
    "NotImplemented": 501,
    "QuotaExceeded": 403,
    "RequestTimeTooSkewed": 403,
    "ServiceUnavailable": 503,
    "SignatureDoesNotMatch": 403,
    "XAmzContentSHA256Mismatch": 400,
}


class S3Error(Exception):
    """An S3 error response: `code` (S3's), a message, and extra elements of the XML document
    (`BucketName`, `Key`, ...). Messages never hold a secret or a signature."""

    def __init__(self, code: str, message: str, **extra: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.extra = extra

    @property
    def status(self) -> int:
        return STATUS.get(self.code, 400)

    def xml(self, resource: str, request_id: str) -> bytes:
        fields = "".join(f"<{k}>{escape(v)}</{k}>" for k, v in self.extra.items())
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{self.code}</Code><Message>{escape(self.message)}</Message>{fields}"
            f"<Resource>{escape(resource)}</Resource><RequestId>{request_id}</RequestId></Error>"
        ).encode()
