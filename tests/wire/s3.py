"""A tiny S3-compatible HTTP endpoint for the bucket probe, backed by the same FakeNebius.

It verifies AWS Signature Version 4 independently of the adapter's signer (it rebuilds the canonical
request from what actually arrived on the wire, and derives the key from the secret the fake issued
for that access key), checks the credential scope's region against the bucket's, and serves
path-style PUT / GET / DELETE of objects in buckets that exist and are ACTIVE.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .fake import FakeNebius


def _error(code: str, message: str) -> bytes:
    return f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>{message}</Message></Error>".encode()


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def _canonical_query(query: str) -> str:
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    enc = sorted((urllib.parse.quote(k, safe="-_.~"), urllib.parse.quote(v, safe="-_.~")) for k, v in pairs)
    return "&".join(f"{k}={v}" for k, v in enc)


@dataclass
class S3Log:
    requests: list[tuple[str, str, int]] = field(default_factory=list)  # method, path, status


def verify_sigv4(
    method: str, raw_path: str, headers: dict[str, str], body: bytes, secret_lookup: object
) -> tuple[str, str]:
    """Returns (access key id, region) or raises ValueError(<S3 error code>)."""
    auth = headers.get("authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        raise ValueError("AccessDenied")
    fields = dict(part.strip().split("=", 1) for part in auth[len("AWS4-HMAC-SHA256 ") :].split(","))
    key_id, date, region, service, terminal = fields["Credential"].split("/")
    if service != "s3" or terminal != "aws4_request":
        raise ValueError("AuthorizationHeaderMalformed")
    secret = secret_lookup(key_id)  # type: ignore[operator]
    if secret is None:
        raise ValueError("InvalidAccessKeyId")
    payload_hash = headers.get("x-amz-content-sha256", "")
    if payload_hash != hashlib.sha256(body).hexdigest():
        raise ValueError("XAmzContentSHA256Mismatch")
    signed = fields["SignedHeaders"].split(";")
    if "host" not in signed or "x-amz-date" not in signed:
        raise ValueError("AuthorizationHeaderMalformed")
    amz_date = headers.get("x-amz-date", "")
    if amz_date[:8] != date:
        raise ValueError("AuthorizationHeaderMalformed")
    path, _, query = raw_path.partition("?")
    canonical_headers = "".join(f"{n}:{' '.join(headers.get(n, '').split())}\n" for n in signed)
    canonical = "\n".join(
        [method, path, _canonical_query(query), canonical_headers, ";".join(signed), payload_hash]
    )
    scope = f"{date}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    k = _hmac(_hmac(_hmac(_hmac(("AWS4" + secret).encode(), date), region), "s3"), "aws4_request")
    expected = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, fields["Signature"]):
        raise ValueError("SignatureDoesNotMatch")
    return key_id, region


def make_handler(fake: FakeNebius, log: S3Log) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            return

        def _reply(self, status: int, body: bytes = b"") -> None:
            log.requests.append((self.command, self.path, status))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                key_id, region = verify_sigv4(self.command, self.path, headers, body, fake.secret_for)
            except ValueError as err:
                self._reply(403, _error(str(err), "request refused"))
                return
            path = urllib.parse.unquote(self.path.partition("?")[0])
            bucket_name, _, key = path.lstrip("/").partition("/")
            bucket = fake.bucket_by_name(bucket_name)
            if bucket is None:
                self._reply(404, _error("NoSuchBucket", bucket_name))
                return
            if bucket.status.region != region:
                self._reply(
                    400, _error("AuthorizationHeaderMalformed", f"bucket is in {bucket.status.region}")
                )
                return
            if fake.s3_require_grants and not fake.key_may_use_bucket(key_id, bucket):
                self._reply(403, _error("AccessDenied", f"no access permit on bucket {bucket_name}"))
                return
            with fake.lock:
                objects = fake.objects.setdefault(bucket_name, {})
                if self.command == "PUT":
                    objects[key] = body
                    self._reply(200)
                elif self.command == "GET":
                    if key in objects:
                        self._reply(200, b"corrupted" if fake.s3_corrupt_reads else objects[key])
                    else:
                        self._reply(404, _error("NoSuchKey", key))
                elif self.command == "DELETE":
                    if not fake.s3_ignore_deletes:
                        objects.pop(key, None)
                    self._reply(204)
                else:
                    self._reply(405, _error("MethodNotAllowed", self.command))

        do_PUT = do_GET = do_DELETE = _handle

    return Handler


@contextmanager
def serving_s3(fake: FakeNebius) -> Iterator[tuple[str, S3Log]]:
    """Yields (`http://127.0.0.1:<port>`, request log)."""
    log = S3Log()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(fake, log))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", log
    finally:
        server.shutdown()
        server.server_close()
