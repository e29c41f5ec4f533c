"""The local cloud's S3 endpoint: the simulator's buckets over S3's HTTP API, on 127.0.0.1.

    python -m npa_pulumi.simulator.s3wire --cloud-dir DIR [--port N]

Run as a detached daemon of the local cloud (s3daemon.py starts, finds and stops it). Buckets are the
simulator's bucket rows, objects live in its database (objects.py); this module reads a request, checks
its signature and hands it to its route (s3routes.py, the listings in s3listings.py), whose `Response` it
sends. Every request is authenticated with
AWS Signature V4 (s3auth.py) against the simulator's access keys: an unknown or deleted key is refused
(InvalidAccessKeyId), a key of another tenant (AccessDenied), a wrong secret (SignatureDoesNotMatch).

What it serves is what the Pulumi engine's DIY backend (gocloud.dev s3blob on the AWS SDK for Go v2,
path-style) and npa-pulumi's own S3 client send: ListBuckets; HeadBucket, CreateBucket, DeleteBucket,
GetBucketAcl, GetBucketLocation, Get/PutBucketVersioning (kept as S3 keeps it, objects.py: every
overwritten state checkpoint stays readable by its version id), ListObjectVersions; ListObjectsV2; Get
(with Range), Head, Put (plain, `aws-chunked` streaming with signed chunks or trailing checksums), Copy
(also of a version), Delete and DeleteObjects (also of versions);
multipart uploads (Create, UploadPart, Complete, Abort: the SDK's transfer manager uploads objects above
16 MiB in parts). Anything else answers NotImplemented. Virtual-hosted-style addressing is not served.

It holds `s3/server.lock` for its whole life, records its pid and port, and exits when asked (SIGTERM),
or when the local cloud's database is gone or emptied. Its log names requests (method, path, status),
never headers, queries or bodies: no Authorization, signature or secret reaches it.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
import threading
import time
import urllib.parse
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.locks import FileLock
from npa_pulumi.simulator import db, s3auth
from npa_pulumi.simulator.objects import AccessKey, S3Objects
from npa_pulumi.simulator.s3buckets import S3Buckets
from npa_pulumi.simulator.s3daemon import recorded_port, s3_dir
from npa_pulumi.simulator.s3errors import S3Error
from npa_pulumi.simulator.s3routes import S3Request, S3Routes
from npa_pulumi.simulator.s3uploads import S3Uploads
from npa_pulumi.simulator.s3xml import Response
from npa_pulumi.simulator.storage import Buckets
from npa_pulumi.simulator.store import Store

S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
MAX_BODY_BYTES = 5 * 1024**3 + 64 * 1024**2  # S3's largest single PUT (5 GiB) plus aws-chunked framing
POLL_S = 1.0
# Query parameters that select an operation this server does not implement.
UNSUPPORTED = frozenset(
    {
        "accelerate", "analytics", "cors", "encryption", "intelligent-tiering", "inventory", "lifecycle",
        "logging", "metrics", "notification", "object-lock", "ownershipControls", "policy", "policyStatus",
        "publicAccessBlock", "replication", "requestPayment", "restore", "retention", "legal-hold", "select",
        "tagging", "torrent", "website", "attributes",
    }
)  # fmt: skip


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


class S3WireServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], cloud_dir: Path) -> None:
        super().__init__(address, S3Handler)
        self.cloud_dir = cloud_dir
        store = Store(cloud_dir, auto_init=False)
        self.buckets = S3Buckets(store, Buckets(store))
        self.routes = S3Routes(self.buckets, S3Objects(store), S3Uploads(store))


class S3Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "NpaLocalS3/1"
    server: S3WireServer

    # ------------------------------------------------------------------ plumbing

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request line holds the query (a presigned URL's signature): `_log` writes what is safe

    def _log(self, status: int) -> None:
        path = self.path.partition("?")[0]
        log(f"{self.command} {path} {status}")

    def do_GET(self) -> None:
        self._handle()

    def do_HEAD(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _headers_map(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for name, value in self.headers.items():
            found.setdefault(name.lower(), []).append(value)
        return found

    def _header(self, name: str) -> str:
        return (self.headers.get(name) or "").strip()

    def _read_body(self) -> bytes:
        if self._header("Transfer-Encoding").lower() == "chunked":
            return self._read_http_chunked()
        length_text = self._header("Content-Length")
        if not length_text:
            return b""
        try:
            length = int(length_text)
        except ValueError:
            self.close_connection = True
            raise S3Error("InvalidArgument", "Content-Length is not a number") from None
        if length > MAX_BODY_BYTES:
            self.close_connection = True  # the body is not read: the connection cannot carry on
            raise S3Error("EntityTooLarge", "Your proposed upload exceeds the maximum allowed object size.")
        data = self.rfile.read(length)
        if len(data) != length:
            self.close_connection = True
            raise S3Error(
                "IncompleteBody", "You did not provide the number of bytes specified by Content-Length"
            )
        return data

    def _read_http_chunked(self) -> bytes:
        out = bytearray()
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                self.close_connection = True
                raise S3Error("IncompleteBody", "malformed chunked transfer encoding") from None
            if size == 0:
                while self.rfile.readline(8192) not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(out)
            if len(out) + size > MAX_BODY_BYTES:
                self.close_connection = True
                raise S3Error(
                    "EntityTooLarge", "Your proposed upload exceeds the maximum allowed object size."
                )
            out += self.rfile.read(size)
            self.rfile.readline(8)

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        """Answer with `status`, `body` (never for a HEAD) and `headers`, plus what every answer has."""
        self.send_response(status)
        self.send_header("x-amz-request-id", self.request_id)
        self.send_header("Date", formatdate(usegmt=True))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if body and "Content-Type" not in (headers or {}):
            self.send_header("Content-Type", "application/xml")
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)
        self._log(status)

    def _error(self, err: S3Error, resource: str) -> None:
        body = b"" if self.command == "HEAD" else err.xml(resource, self.request_id)
        self._send(err.status, body)

    def _handle(self) -> None:
        self.request_id = secrets.token_hex(8).upper()
        raw_path, _, raw_query = self.path.partition("?")
        resource = urllib.parse.unquote(raw_path)
        try:
            body = self._read_body()
            self._send(*self._route(raw_path, raw_query, body))
        except S3Error as err:
            self._error(err, resource)
        except Exception as err:  # never a traceback to the client; the type only in the log
            log(f"internal error on {self.command} {raw_path}: {type(err).__name__}")
            self._error(
                S3Error("InternalError", "We encountered an internal error. Please try again."), resource
            )

    # ------------------------------------------------------------------ authentication

    def _authenticate(self, raw_path: str, raw_query: str) -> tuple[AccessKey, s3auth.Verified]:
        server = self.server
        found: list[AccessKey] = []

        def secret_for(access_key_id: str) -> str:
            key = server.buckets.access_key(access_key_id)
            if key is None:
                raise S3Error(
                    "InvalidAccessKeyId",
                    "The AWS Access Key Id you provided does not exist in our records.",
                    AWSAccessKeyId=access_key_id,
                )
            if not key.derivable:
                raise S3Error(
                    "AccessDenied",
                    "this access key was minted before the local cloud served S3 and its secret cannot be "
                    "checked; create a new access key",
                )
            found.append(key)
            return server.buckets.secret(key)

        verified = s3auth.verify(self.command, raw_path, raw_query, self._headers_map(), secret_for)
        return found[0], verified

    # ------------------------------------------------------------------ routing (s3routes.py)

    def _route(self, raw_path: str, raw_query: str, body: bytes) -> Response:
        if not raw_path.startswith("/"):
            raise S3Error("InvalidRequest", "the request path must be absolute")
        key, auth = self._authenticate(raw_path, raw_query)
        params = dict(s3auth.query_pairs(raw_query))
        unsupported = sorted(UNSUPPORTED & set(params))
        if unsupported:
            raise S3Error("NotImplemented", f"?{unsupported[0]} is not implemented by the local cloud's S3")
        bucket_name, _, object_key = urllib.parse.unquote(raw_path[1:]).partition("/")
        routes = self.server.routes
        if not bucket_name:
            if self.command != "GET":
                raise S3Error(
                    "MethodNotAllowed", "The specified method is not allowed against this resource."
                )
            return routes.service(key)
        body = s3auth.decode_payload(body, self._headers_map(), auth)
        request = S3Request(self.command, key, params, body, self.headers)
        if not object_key:
            return routes.bucket(request, bucket_name)
        return routes.object(request, bucket_name, object_key)


# ------------------------------------------------------------------------------------------ the daemon


def _cloud_gone(cloud_dir: Path) -> bool:
    path = db.db_path(cloud_dir)
    try:
        return not db.is_initialised(path)
    except Exception:  # a database being reset or locked: not gone
        return not path.is_file()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m npa_pulumi.simulator.s3wire")
    parser.add_argument("--cloud-dir", required=True, type=Path)
    parser.add_argument("--port", type=int, default=0, help="0: the recorded port, else a free one")
    args = parser.parse_args(argv)
    home = s3_dir(args.cloud_dir)
    home.mkdir(parents=True, exist_ok=True)
    lock = FileLock(home / "server.lock")  # held for the server's whole life; the kernel drops it at exit
    if not lock.acquire(blocking=False):
        return 0  # another server runs for this cloud
    write_atomically(home / "server.pid", f"{os.getpid()}\n")
    (home / "ready").unlink(missing_ok=True)
    (home / "failed").unlink(missing_ok=True)
    port = args.port or recorded_port(args.cloud_dir) or 0
    try:
        server = S3WireServer(("127.0.0.1", port), args.cloud_dir)
    except OSError as err:
        (home / "failed").write_text(f"cannot listen on 127.0.0.1:{port}: {err.strerror or err}\n")
        log(f"cannot listen on 127.0.0.1:{port}: {err}")
        return 1
    port = int(server.server_address[1])
    write_atomically(home / "port", f"{port}\n")  # stable from now on: backend URLs name it
    stopping = threading.Event()

    def stop(_signum: int, _frame: Any) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    thread = threading.Thread(target=server.serve_forever, name="s3wire", daemon=True)
    thread.start()
    (home / "ready").write_text(f"{port}\n")
    log(f"serving the local cloud {args.cloud_dir} at http://127.0.0.1:{port} (pid {os.getpid()})")
    while not stopping.wait(POLL_S):
        if _cloud_gone(args.cloud_dir):
            log("the local cloud's database is gone: stopping")
            break
    server.shutdown()
    server.server_close()
    (home / "ready").unlink(missing_ok=True)
    log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
