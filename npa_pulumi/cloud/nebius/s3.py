"""A small AWS Signature Version 4 client for Nebius Object Storage (S3-compatible), stdlib only.

It serves the bucket probe that must write, read back and delete an object with the fleet's own access
key before storage counts as ready, and the reads of an s3:// state backend's objects
(engine/automation/diy_backend.py), where a fleet-wide command sends several requests per stack: boto3
would be a large dependency for either. Path-style addressing (`<endpoint>/<bucket>/<key>`) works on
every S3-compatible endpoint.

A client keeps its connections open between requests (HTTP keep-alive; `_Connections`): a new connection
per request (what urllib does) costed a fleet-wide read a socket, a name lookup and a TCP handshake, and
on https a TLS handshake, per request, on both sides.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ssl
import threading
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


# Idle connections a client keeps for reuse: a fleet-wide read runs `-j` readers at once (8 by default).
MAX_IDLE_CONNECTIONS = 16
# Methods sent again on a fresh connection when a reused one turns out closed by the server before it
# answered (an idle keep-alive connection may be dropped at any time): repeating them changes nothing.
_REPEATABLE = frozenset({"GET", "HEAD", "PUT", "DELETE"})


class _Connections:
    """The open connections of one client to its endpoint, each used by one request at a time."""

    def __init__(self, scheme: str, host: str, timeout_s: float, context: ssl.SSLContext | None) -> None:
        self._scheme, self._host, self._timeout_s = scheme, host, timeout_s
        # One context for every https connection (urllib builds one, loading the CA store, per request).
        self._context = context if context is not None or scheme != "https" else ssl.create_default_context()
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def take(self) -> tuple[http.client.HTTPConnection, bool]:
        """An idle connection (True: it served a request before) or a new one (not yet connected)."""
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        if self._scheme == "https":
            secure = http.client.HTTPSConnection(self._host, timeout=self._timeout_s, context=self._context)
            return secure, False
        return http.client.HTTPConnection(self._host, timeout=self._timeout_s), False

    def give_back(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE_CONNECTIONS:
                self._idle.append(connection)
                return
        connection.close()

    def send(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes, dict[str, str]]:
        """One request, its whole answer read; OSError (as urllib raised) when there was none."""
        connection, reused = self.take()
        try:
            try:
                return self._exchange(connection, method, target, body, headers)
            except (ConnectionError, http.client.BadStatusLine):
                if not reused or method not in _REPEATABLE:
                    raise
                connection.close()  # the server closed it while it was idle: once more on a new one
                return self._exchange(connection, method, target, body, headers)
        except http.client.HTTPException as err:  # a torn answer, an invalid status line
            connection.close()
            raise ConnectionError(f"{type(err).__name__}: {err}") from None
        except BaseException:
            connection.close()
            raise
        finally:
            if connection.sock is not None:  # still open: it read its whole answer, the server keeps it
                self.give_back(connection)

    @staticmethod
    def _exchange(
        connection: http.client.HTTPConnection,
        method: str,
        target: str,
        body: bytes | None,
        headers: dict[str, str],
    ) -> tuple[int, bytes, dict[str, str]]:
        connection.request(method, target, body=body, headers=headers)
        response = connection.getresponse()
        # http.client closes the connection itself when the answer says so (`Connection: close`).
        return response.status, response.read(), dict(response.getheaders())


class S3Client:
    """Signed path-style requests against one endpoint and region, over connections it keeps open (safe
    to share between threads). Never logs or reprs the secret."""

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
        _ = parsed.port  # a port that is not a number: ValueError here, not an error at the first request
        self._scheme, self._host, self._base = parsed.scheme, parsed.netloc, parsed.path.rstrip("/")
        self.region = region
        self._access_key_id = access_key_id
        self._secret = secret
        self._timeout_s = timeout_s
        self._ssl = ssl_context
        self._clock = clock
        # A proxy named in the environment for this endpoint: urllib's handlers speak to it (a request
        # each); otherwise kept-open connections straight to the endpoint.
        proxy = parsed.scheme in urllib.request.getproxies()
        proxied = proxy and not urllib.request.proxy_bypass(parsed.netloc)
        self._connections = (
            None if proxied else _Connections(parsed.scheme, parsed.netloc, timeout_s, ssl_context)
        )

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
        conditions: Mapping[str, str] | None = None,
    ) -> S3Response:
        """`query` is a subresource such as `versioning` (bucket settings), signed as S3 expects;
        `conditions` headers such as `If-None-Match` (signed too);
        `content_type` that of an object written (without one urllib sends form data's, and an S3
        implementation may parse the body as a form and store an empty object)."""
        path = self._base + "/" + uri_encode(bucket, keep_slash=False)
        if key:
            path += "/" + uri_encode(key, keep_slash=True)
        payload_sha = hashlib.sha256(body).hexdigest()
        amz_date = self._clock.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        headers = {"host": self._host, "x-amz-date": amz_date, "x-amz-content-sha256": payload_sha}
        headers.update({name.lower(): value for name, value in (conditions or {}).items()})
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
        target = path + (f"?{query}" if query else "")
        data = body if method in ("PUT", "POST") else None
        if self._connections is not None:
            status, answer, answer_headers = self._connections.send(
                method, target, data, {**headers, "Authorization": signed.authorization}
            )
            return S3Response(status, answer, answer_headers)
        req = urllib.request.Request(
            f"{self._scheme}://{self._host}{target}",
            data=data,
            method=method,
            headers={**headers, "Authorization": signed.authorization},
        )
        try:
            with urllib.request.urlopen(req, timeout=self._timeout_s, context=self._ssl) as resp:
                return S3Response(resp.status, resp.read(), dict(resp.headers.items()))
        except urllib.error.HTTPError as err:
            return S3Response(err.code, err.read(), dict(err.headers.items()) if err.headers else {})
