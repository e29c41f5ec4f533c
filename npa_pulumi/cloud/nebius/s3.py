"""A small AWS Signature Version 4 client for Nebius Object Storage (S3-compatible), stdlib only.

It exists for one job: the bucket probe that must write, read back and delete an object with the
fleet's own access key before storage counts as ready. boto3 would be a large dependency for three
requests. Path-style addressing (`<endpoint>/<bucket>/<key>`) works on every S3-compatible endpoint.
"""

from __future__ import annotations

import hashlib
import hmac
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pydantic import SecretStr

from npa_pulumi.cloud.sigv4 import ALGORITHM, signing_key, uri_encode


def canonical_query(query: str) -> str:
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    encoded = sorted((uri_encode(k, keep_slash=False), uri_encode(v, keep_slash=False)) for k, v in pairs)
    return "&".join(f"{k}={v}" for k, v in encoded)


@dataclass(frozen=True)
class SignedRequest:
    authorization: str
    canonical_request: str
    string_to_sign: str
    signature: str
    signed_headers: str


def sign(
    *,
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    payload_sha256: str,
    access_key_id: str,
    secret: SecretStr | str,
    region: str,
    service: str,
    amz_date: str,
) -> SignedRequest:
    """Sign a request whose headers already include `host` and `x-amz-date` (= amz_date).

    `path` is the already URI-encoded absolute path; S3 signs it as sent (no double encoding).
    """
    secret_text = secret.get_secret_value() if isinstance(secret, SecretStr) else secret
    lowered = {k.strip().lower(): " ".join(str(v).strip().split()) for k, v in headers.items()}
    names = sorted(lowered)
    canonical_headers = "".join(f"{n}:{lowered[n]}\n" for n in names)
    signed_headers = ";".join(names)
    canonical_request = "\n".join(
        [
            method.upper(),
            path or "/",
            canonical_query(query),
            canonical_headers,
            signed_headers,
            payload_sha256,
        ]
    )
    date = amz_date[:8]
    scope = f"{date}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join(
        [ALGORITHM, amz_date, scope, hashlib.sha256(canonical_request.encode("utf-8")).hexdigest()]
    )
    signature = hmac.new(
        signing_key(secret_text, date, region, service), string_to_sign.encode("utf-8"), hashlib.sha256
    ).hexdigest()
    authorization = (
        f"{ALGORITHM} Credential={access_key_id}/{scope}, "
        f"SignedHeaders={signed_headers}, Signature={signature}"
    )
    return SignedRequest(authorization, canonical_request, string_to_sign, signature, signed_headers)


@dataclass(frozen=True)
class S3Response:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)

    def error_code(self) -> str:
        """The `<Code>` of an S3 XML error body, if any."""
        text = self.body.decode("utf-8", "replace")
        start, end = text.find("<Code>"), text.find("</Code>")
        return text[start + 6 : end] if 0 <= start < end else ""


class S3Client:
    """Signed path-style requests against one endpoint and region. Never logs or reprs the secret."""

    def __init__(
        self,
        endpoint: str,
        region: str,
        access_key_id: str,
        secret: SecretStr,
        *,
        timeout_s: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
        clock: type[datetime] = datetime,
    ) -> None:
        parsed = urllib.parse.urlsplit(endpoint)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"storage endpoint must be an http(s) URL, got {endpoint!r}")
        self._scheme, self._host, self._base = parsed.scheme, parsed.netloc, parsed.path.rstrip("/")
        self.region = region
        self._access_key_id = access_key_id
        self._secret = secret
        self._timeout_s = timeout_s
        self._ssl = ssl_context
        self._clock = clock

    def __repr__(self) -> str:
        return f"S3Client({self._scheme}://{self._host}, region={self.region!r}, key={self._access_key_id!r})"

    def request(
        self,
        method: str,
        bucket: str,
        key: str = "",
        body: bytes = b"",
        query: str = "",
        content_type: str | None = None,
    ) -> S3Response:
        """`query` is a subresource such as `versioning` (bucket settings), signed as S3 expects;
        `content_type` that of an object written (without one urllib sends form data's, and an S3
        implementation may parse the body as a form and store an empty object)."""
        path = self._base + "/" + uri_encode(bucket, keep_slash=False)
        if key:
            path += "/" + uri_encode(key, keep_slash=True)
        payload_sha = hashlib.sha256(body).hexdigest()
        amz_date = self._clock.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        headers = {"host": self._host, "x-amz-date": amz_date, "x-amz-content-sha256": payload_sha}
        if content_type:
            headers["content-type"] = content_type
        elif query and body:
            # A settings document (versioning ...): without a type urllib calls it form data, which some
            # S3 implementations then parse as a form instead of routing it.
            headers["content-type"] = "application/xml"
        signed = sign(
            method=method,
            path=path,
            query=query,
            headers=headers,
            payload_sha256=payload_sha,
            access_key_id=self._access_key_id,
            secret=self._secret,
            region=self.region,
            service="s3",
            amz_date=amz_date,
        )
        req = urllib.request.Request(
            f"{self._scheme}://{self._host}{path}" + (f"?{query}" if query else ""),
            data=body if method in ("PUT", "POST") else None,
            method=method,
            headers={**headers, "Authorization": signed.authorization},
        )
        try:
            with urllib.request.urlopen(req, timeout=self._timeout_s, context=self._ssl) as resp:
                return S3Response(resp.status, resp.read(), dict(resp.headers.items()))
        except urllib.error.HTTPError as err:
            return S3Response(err.code, err.read(), dict(err.headers.items()) if err.headers else {})
