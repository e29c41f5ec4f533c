"""AWS Signature Version 4 as S3 checks it, and the payload encodings signed requests carry.

* `verify`: the `Authorization: AWS4-HMAC-SHA256 …` header, or a presigned URL's `X-Amz-*` query, against
  the secret of the named access key (a callback: the simulator derives it, storage.py). The canonical
  request is S3's: the path exactly as sent (S3 neither normalises nor double-encodes it), the query's
  parameters decoded, re-encoded (RFC 3986) and sorted, the signed headers' values trimmed.
* `decode_payload`: the body by its `x-amz-content-sha256`: a hex SHA-256 (checked), `UNSIGNED-PAYLOAD`,
  or `aws-chunked` (`STREAMING-…`: the AWS SDKs' streaming uploads), whose chunk and trailer signatures
  are checked in the signed variants and whose trailing checksum (`x-amz-checksum-*`) is checked.

Nothing here logs, and no error message holds a secret or a signature.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import urllib.parse
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from npa_pulumi.cloud.sigv4 import ALGORITHM, EMPTY_SHA256, signing_key, uri_encode
from npa_pulumi.simulator.s3errors import S3Error

UNSIGNED = "UNSIGNED-PAYLOAD"
STREAMING_SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
STREAMING_SIGNED_TRAILER = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
STREAMING_UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
MAX_SKEW_S = 15 * 60  # S3 refuses a request signed further from its clock (RequestTimeTooSkewed)
MAX_PRESIGN_EXPIRES_S = 7 * 24 * 3600

# Headers: lower-case name -> the request's values of it, in order (a header may repeat).
Headers = Mapping[str, Sequence[str]]


def query_pairs(raw_query: str) -> list[tuple[str, str]]:
    """The query's parameters, percent-decoded (a `+` stays a `+`: S3 clients encode a space as %20)."""
    pairs = []
    for part in raw_query.split("&") if raw_query else []:
        if not part:
            continue
        name, _, value = part.partition("=")
        pairs.append((urllib.parse.unquote(name), urllib.parse.unquote(value)))
    return pairs


def canonical_query(pairs: Sequence[tuple[str, str]]) -> str:
    encoded = sorted((uri_encode(k, keep_slash=False), uri_encode(v, keep_slash=False)) for k, v in pairs)
    return "&".join(f"{k}={v}" for k, v in encoded)


def canonical_headers(headers: Headers, signed: Sequence[str]) -> str:
    lines = []
    for name in signed:
        values = headers.get(name, ())
        lines.append(f"{name}:{','.join(' '.join(v.strip().split()) for v in values)}\n")
    return "".join(lines)


def canonical_request(
    method: str,
    raw_path: str,
    pairs: Sequence[tuple[str, str]],
    headers: Headers,
    signed: Sequence[str],
    payload_hash: str,
) -> str:
    return "\n".join(
        [
            method.upper(),
            raw_path or "/",
            canonical_query(pairs),
            canonical_headers(headers, signed),
            ";".join(signed),
            payload_hash,
        ]
    )


def string_to_sign(amz_date: str, scope: str, canonical: str) -> str:
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return "\n".join([ALGORITHM, amz_date, scope, digest])


@dataclass(frozen=True)
class Verified:
    """A request whose signature matched: who signed it, and what a streaming body's chunks chain from."""

    access_key_id: str
    amz_date: str
    scope: str
    key: bytes  # the signing key (kept in memory only for the request's chunk signatures)
    signature: str
    payload_hash: str  # x-amz-content-sha256 as signed (a presigned request: UNSIGNED-PAYLOAD)


@dataclass(frozen=True)
class _Claim:
    access_key_id: str
    date: str
    region: str
    service: str
    signed: list[str]
    signature: str
    amz_date: str
    pairs: list[tuple[str, str]]  # the query the signature covers
    payload_hash: str


def _parse_credential(credential: str) -> tuple[str, str, str, str]:
    parts = credential.split("/")
    if len(parts) != 5 or parts[4] != "aws4_request" or not parts[0]:
        raise S3Error(
            "AuthorizationHeaderMalformed", "the Credential is not KEY/DATE/REGION/SERVICE/aws4_request"
        )
    return parts[0], parts[1], parts[2], parts[3]


def _claim_from_header(authorization: str, headers: Headers, pairs: list[tuple[str, str]]) -> _Claim:
    algorithm, _, rest = authorization.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise S3Error("InvalidArgument", f"unsupported authorization type (only {ALGORITHM})")
    fields: dict[str, str] = {}
    for item in rest.split(","):
        name, _, value = item.strip().partition("=")
        fields[name] = value
    if not {"Credential", "SignedHeaders", "Signature"} <= set(fields):
        raise S3Error("AuthorizationHeaderMalformed", "Credential, SignedHeaders and Signature are required")
    key, date, region, service = _parse_credential(fields["Credential"])
    amz_date = _first(headers, "x-amz-date")
    if not amz_date:
        raise S3Error("AccessDenied", "AWS authentication requires a valid Date or x-amz-date header")
    payload_hash = _first(headers, "x-amz-content-sha256")
    if not payload_hash:
        raise S3Error("InvalidRequest", "missing required header for this request: x-amz-content-sha256")
    signed = fields["SignedHeaders"].split(";")
    return _Claim(key, date, region, service, signed, fields["Signature"], amz_date, pairs, payload_hash)


def _claim_from_query(pairs: list[tuple[str, str]], now: datetime) -> _Claim:
    params = dict(pairs)
    if params.get("X-Amz-Algorithm") != ALGORITHM:
        raise S3Error("AuthorizationQueryParametersError", f"X-Amz-Algorithm must be {ALGORITHM}")
    missing = [
        name
        for name in (
            "X-Amz-Credential",
            "X-Amz-Date",
            "X-Amz-Expires",
            "X-Amz-SignedHeaders",
            "X-Amz-Signature",
        )
        if not params.get(name)
    ]
    if missing:
        raise S3Error("AuthorizationQueryParametersError", f"missing {', '.join(missing)}")
    key, date, region, service = _parse_credential(params["X-Amz-Credential"])
    try:
        expires = int(params["X-Amz-Expires"])
    except ValueError:
        raise S3Error("AuthorizationQueryParametersError", "X-Amz-Expires must be a number") from None
    if not 0 < expires <= MAX_PRESIGN_EXPIRES_S:
        raise S3Error("AuthorizationQueryParametersError", "X-Amz-Expires must be 1 to 604800 seconds")
    signed_at = _parse_amz_date(params["X-Amz-Date"])
    if (now - signed_at).total_seconds() > expires:
        raise S3Error("AccessDenied", "Request has expired")
    covered = [(k, v) for k, v in pairs if k != "X-Amz-Signature"]
    return _Claim(
        key,
        date,
        region,
        service,
        params["X-Amz-SignedHeaders"].split(";"),
        params["X-Amz-Signature"],
        params["X-Amz-Date"],
        covered,
        UNSIGNED,
    )


def _first(headers: Headers, name: str) -> str:
    values = headers.get(name) or ()
    return values[0].strip() if values else ""


def _parse_amz_date(text: str) -> datetime:
    try:
        return datetime.strptime(text, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise S3Error("AccessDenied", "x-amz-date is not an ISO 8601 basic timestamp") from None


def verify(
    method: str,
    raw_path: str,
    raw_query: str,
    headers: Headers,
    secret_for: Callable[[str], str],
    *,
    now: datetime | None = None,
) -> Verified:
    """Check the request's SigV4 signature. `headers` has lower-case names; `secret_for(access_key_id)`
    returns the key's secret or raises S3Error (InvalidAccessKeyId, AccessDenied). Raises S3Error:
    AccessDenied (anonymous, expired), SignatureDoesNotMatch, RequestTimeTooSkewed, malformed headers."""
    now = now or datetime.now(UTC)
    pairs = query_pairs(raw_query)
    authorization = _first(headers, "authorization")
    if authorization:
        claim = _claim_from_header(authorization, headers, pairs)
    elif any(k == "X-Amz-Signature" for k, _ in pairs):
        claim = _claim_from_query(pairs, now)
    else:
        raise S3Error("AccessDenied", "Access Denied (anonymous requests are not allowed)")
    if claim.service != "s3":
        raise S3Error(
            "AuthorizationHeaderMalformed", f"the credential's service must be s3, not {claim.service!r}"
        )
    signed_at = _parse_amz_date(claim.amz_date)
    if claim.amz_date[:8] != claim.date:
        raise S3Error("AuthorizationHeaderMalformed", "the credential's date is not the request's date")
    if authorization and abs((now - signed_at).total_seconds()) > MAX_SKEW_S:
        raise S3Error(
            "RequestTimeTooSkewed",
            "The difference between the request time and the current time is too large.",
        )
    if "host" not in claim.signed:
        raise S3Error("AccessDenied", "the host header must be signed")
    secret = secret_for(claim.access_key_id)
    scope = f"{claim.date}/{claim.region}/{claim.service}/aws4_request"
    canonical = canonical_request(method, raw_path, claim.pairs, headers, claim.signed, claim.payload_hash)
    key = signing_key(secret, claim.date, claim.region, claim.service)
    expected = hmac.new(
        key, string_to_sign(claim.amz_date, scope, canonical).encode(), hashlib.sha256
    ).hexdigest()
    if not hmac.compare_digest(expected, claim.signature.strip().lower()):
        raise S3Error(
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided. "
            "Check your key and signing method.",
            AWSAccessKeyId=claim.access_key_id,
        )
    return Verified(claim.access_key_id, claim.amz_date, scope, key, expected, claim.payload_hash)


# ------------------------------------------------------------------------------------------ payloads


def _chunk_signature(auth: Verified, previous: str, data: bytes) -> str:
    text = "\n".join(
        [
            "AWS4-HMAC-SHA256-PAYLOAD",
            auth.amz_date,
            auth.scope,
            previous,
            EMPTY_SHA256,
            hashlib.sha256(data).hexdigest(),
        ]
    )
    return hmac.new(auth.key, text.encode(), hashlib.sha256).hexdigest()


def _trailer_signature(auth: Verified, previous: str, trailer: bytes) -> str:
    text = "\n".join(
        ["AWS4-HMAC-SHA256-TRAILER", auth.amz_date, auth.scope, previous, hashlib.sha256(trailer).hexdigest()]
    )
    return hmac.new(auth.key, text.encode(), hashlib.sha256).hexdigest()


def decode_aws_chunked(body: bytes, auth: Verified | None) -> tuple[bytes, dict[str, str]]:
    """The data and trailing headers of an `aws-chunked` body. With `auth` (a signed streaming upload)
    every chunk's signature must chain from the request's, and a trailer's signature must match too."""
    out = bytearray()
    trailers: dict[str, str] = {}
    previous = auth.signature if auth else ""
    pos = 0
    while True:
        end = body.find(b"\r\n", pos)
        if end < 0:
            raise S3Error("IncompleteBody", "the aws-chunked body ends inside a chunk header")
        header = body[pos:end].decode("latin-1")
        size_text, _, extension = header.partition(";")
        try:
            size = int(size_text.strip(), 16)
        except ValueError:
            raise S3Error("InvalidRequest", "malformed aws-chunked chunk header") from None
        start = end + 2
        data = body[start : start + size]
        if len(data) != size:
            raise S3Error("IncompleteBody", "the aws-chunked body ends inside a chunk")
        if auth is not None:
            name, _, signature = extension.strip().partition("=")
            if name != "chunk-signature" or not hmac.compare_digest(
                signature, _chunk_signature(auth, previous, data)
            ):
                raise S3Error(
                    "SignatureDoesNotMatch",
                    "The request signature we calculated does not match the signature you provided.",
                )
            previous = signature
        out += data
        pos = start + size
        if size == 0:
            break
        if body[pos : pos + 2] != b"\r\n":
            raise S3Error("IncompleteBody", "an aws-chunked chunk is not followed by CRLF")
        pos += 2
    # Trailing headers, then an empty line (a body may also just end after the last chunk's CRLF).
    trailer_text = bytearray()
    signature = ""
    while pos < len(body):
        end = body.find(b"\r\n", pos)
        if end < 0:
            end = len(body)
        line = body[pos:end]
        pos = end + 2
        if not line:
            break
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "x-amz-trailer-signature":
            signature = value.strip()
        else:
            trailers[name.strip().lower()] = value.strip()
            trailer_text += line.strip() + b"\n"
    signed_trailer = auth is not None and auth.payload_hash == STREAMING_SIGNED_TRAILER and trailers
    if signed_trailer and auth is not None:
        expected = _trailer_signature(auth, previous, bytes(trailer_text))
        if not signature or not hmac.compare_digest(signature, expected):
            raise S3Error(
                "SignatureDoesNotMatch",
                "The trailer signature we calculated does not match the one you provided.",
            )
    return bytes(out), trailers


def check_checksums(data: bytes, headers: Mapping[str, str]) -> None:
    """`Content-MD5` and the `x-amz-checksum-*` S3 can check here (crc32, sha1, sha256; others, such as
    crc32c, are accepted unchecked): BadDigest on a mismatch."""
    digests: dict[str, Callable[[bytes], bytes]] = {
        "content-md5": lambda b: hashlib.md5(b, usedforsecurity=False).digest(),
        "x-amz-checksum-crc32": lambda b: zlib.crc32(b).to_bytes(4, "big"),
        "x-amz-checksum-sha1": lambda b: hashlib.sha1(b, usedforsecurity=False).digest(),
        "x-amz-checksum-sha256": lambda b: hashlib.sha256(b).digest(),
    }
    for name, digest in digests.items():
        given = headers.get(name)
        if given and base64.b64encode(digest(data)).decode() != given.strip():
            raise S3Error("BadDigest", f"The {name} you specified did not match the calculated checksum.")


def crc32_checksum(data: bytes) -> str:
    """`x-amz-checksum-crc32` of `data` (base64 of the big-endian CRC), as S3 returns it."""
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def decode_payload(body: bytes, headers: Headers, auth: Verified) -> bytes:
    """The object data of a verified request's body, by how its payload was signed; checks what can be
    checked (the signed SHA-256, chunk signatures, decoded length, checksums)."""
    mode = auth.payload_hash
    trailers: dict[str, str] = {}
    if mode.startswith("STREAMING-"):
        if mode not in (STREAMING_SIGNED, STREAMING_SIGNED_TRAILER, STREAMING_UNSIGNED_TRAILER):
            raise S3Error("NotImplemented", f"x-amz-content-sha256 {mode} is not supported")
        data, trailers = decode_aws_chunked(body, None if mode == STREAMING_UNSIGNED_TRAILER else auth)
        declared = _first(headers, "x-amz-decoded-content-length")
        if declared and declared != str(len(data)):
            raise S3Error("IncompleteBody", "the body's length is not x-amz-decoded-content-length")
    elif mode == UNSIGNED:
        data = body
    else:
        if not hmac.compare_digest(hashlib.sha256(body).hexdigest(), mode.lower()):
            raise S3Error(
                "XAmzContentSHA256Mismatch",
                "The provided 'x-amz-content-sha256' header does not match what was computed.",
            )
        data = body
    flat = {name: values[0] for name, values in headers.items() if values}
    check_checksums(data, {**flat, **trailers})
    return data
