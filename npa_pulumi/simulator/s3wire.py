"""The local cloud's S3 endpoint: the simulator's buckets over S3's HTTP API, on 127.0.0.1.

    python -m npa_pulumi.simulator.s3wire --cloud-dir DIR [--port N]

Run as a detached daemon of the local cloud (s3daemon.py starts, finds and stops it). Buckets are the
simulator's bucket rows, objects live in its database (objects.py); every request is authenticated with
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
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.locks import FileLock
from npa_pulumi.simulator import db, s3auth
from npa_pulumi.simulator.objects import AccessKey, BucketInfo, ObjectInfo, S3Objects
from npa_pulumi.simulator.s3buckets import S3Buckets
from npa_pulumi.simulator.s3daemon import s3_dir
from npa_pulumi.simulator.s3errors import S3Error
from npa_pulumi.simulator.s3uploads import S3Uploads
from npa_pulumi.simulator.storage import Buckets
from npa_pulumi.simulator.store import Store

S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
MAX_BODY_BYTES = 5 * 1024**3 + 64 * 1024**2  # S3's largest single PUT (5 GiB) plus aws-chunked framing
MAX_KEYS = 1000
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


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(ts * 1000) % 1000:03d}Z"


def _xml(root: str, inner: str) -> bytes:
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<{root} xmlns="{S3_NS}">{inner}</{root}>'.encode()


def _el(name: str, value: str | int) -> str:
    return f"<{name}>{escape(str(value))}</{name}>"


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _parse_xml(body: bytes) -> ET.Element:
    if b"<!DOCTYPE" in body or b"<!ENTITY" in body:
        raise S3Error("MalformedXML", "The XML you provided was not well-formed or did not validate")
    try:
        return ET.fromstring(body)
    except ET.ParseError:
        raise S3Error(
            "MalformedXML", "The XML you provided was not well-formed or did not validate"
        ) from None


def _children(element: ET.Element, name: str) -> list[ET.Element]:
    return [child for child in element if _local(child.tag) == name]


def _text(element: ET.Element, name: str) -> str:
    found = _children(element, name)
    return (found[0].text or "") if found else ""


class S3WireServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], cloud_dir: Path) -> None:
        super().__init__(address, S3Handler)
        self.cloud_dir = cloud_dir
        store = Store(cloud_dir, auto_init=False)
        self.buckets = S3Buckets(store, Buckets(store))
        self.objects = S3Objects(store)
        self.uploads = S3Uploads(store)


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
            self._route(raw_path, raw_query, body)
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

    def _bucket_for(self, key: AccessKey, name: str) -> BucketInfo:
        bucket = self.server.buckets.bucket(name)
        if bucket.tenant_id != key.tenant_id:
            raise S3Error("AccessDenied", "Access Denied")
        return bucket

    # ------------------------------------------------------------------ routing

    def _route(self, raw_path: str, raw_query: str, body: bytes) -> None:
        if not raw_path.startswith("/"):
            raise S3Error("InvalidRequest", "the request path must be absolute")
        key, auth = self._authenticate(raw_path, raw_query)
        params = dict(s3auth.query_pairs(raw_query))
        unsupported = sorted(UNSUPPORTED & set(params))
        if unsupported:
            raise S3Error("NotImplemented", f"?{unsupported[0]} is not implemented by the local cloud's S3")
        bucket_name, _, object_key = urllib.parse.unquote(raw_path[1:]).partition("/")
        method = self.command
        if not bucket_name:
            if method != "GET":
                raise S3Error(
                    "MethodNotAllowed", "The specified method is not allowed against this resource."
                )
            return self._list_buckets(key)
        body = s3auth.decode_payload(body, self._headers_map(), auth)
        if not object_key:
            return self._bucket_operation(key, bucket_name, params, body)
        return self._object_operation(key, bucket_name, object_key, params, body)

    def _bucket_operation(self, key: AccessKey, name: str, params: dict[str, str], body: bytes) -> None:
        method = self.command
        if method == "PUT" and not params:
            location = ""
            if body.strip():
                location = _text(_parse_xml(body), "LocationConstraint")
            created = self.server.buckets.create(key, name, location)
            if not created:
                raise S3Error(
                    "BucketAlreadyOwnedByYou",
                    "Your previous request to create the named bucket succeeded and you already own it.",
                    BucketName=name,
                )
            return self._send(200, headers={"Location": f"/{name}"})
        bucket = self._bucket_for(key, name)
        if method == "HEAD":
            return self._send(200, headers={"x-amz-bucket-region": bucket.region})
        if method == "DELETE" and not params:
            self.server.buckets.delete(bucket)
            return self._send(204)
        if method == "GET" and "acl" in params:
            owner = f"<Owner>{_el('ID', bucket.project_id)}{_el('DisplayName', bucket.project_id)}</Owner>"
            grant = (
                '<Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
                'xsi:type="CanonicalUser">'
                f"{_el('ID', bucket.project_id)}{_el('DisplayName', bucket.project_id)}</Grantee>"
                "<Permission>FULL_CONTROL</Permission></Grant>"
            )
            return self._send(
                200, _xml("AccessControlPolicy", f"{owner}<AccessControlList>{grant}</AccessControlList>")
            )
        if method == "GET" and "location" in params:
            return self._send(200, _xml("LocationConstraint", escape(bucket.region)))
        if method == "GET" and "versioning" in params:
            status = self.server.buckets.versioning(bucket)
            return self._send(200, _xml("VersioningConfiguration", _el("Status", status) if status else ""))
        if method == "PUT" and "versioning" in params:
            self.server.buckets.set_versioning(bucket, _text(_parse_xml(body), "Status"))
            return self._send(200)
        if method == "GET" and "versions" in params:
            return self._list_object_versions(bucket, params)
        if method == "GET" and params.get("list-type") == "2":
            return self._list_objects_v2(bucket, params)
        if method == "POST" and "delete" in params:
            return self._delete_objects(bucket, body)
        raise S3Error(
            "NotImplemented",
            f"{method} on a bucket with {sorted(params) or 'no'} parameters is not implemented",
        )

    def _object_operation(
        self, key: AccessKey, bucket_name: str, object_key: str, params: dict[str, str], body: bytes
    ) -> None:
        method = self.command
        bucket = self._bucket_for(key, bucket_name)
        version_id = params.get("versionId", "")
        content_type = self._header("Content-Type") or "binary/octet-stream"
        if method == "POST" and "uploads" in params:
            upload_id = self.server.uploads.create(bucket, object_key, content_type)
            inner = _el("Bucket", bucket.name) + _el("Key", object_key) + _el("UploadId", upload_id)
            return self._send(200, _xml("InitiateMultipartUploadResult", inner))
        if method == "POST" and "uploadId" in params:
            root = _parse_xml(body)
            parts = []
            for part in _children(root, "Part"):
                try:
                    parts.append((int(_text(part, "PartNumber")), _text(part, "ETag")))
                except ValueError:
                    raise S3Error("MalformedXML", "a Part's PartNumber is not a number") from None
            done = self.server.uploads.complete(bucket, object_key, params["uploadId"], parts)
            inner = (
                _el("Location", f"/{bucket.name}/{object_key}")
                + _el("Bucket", bucket.name)
                + _el("Key", object_key)
                + _el("ETag", f'"{done.etag}"')
            )
            return self._send(200, _xml("CompleteMultipartUploadResult", inner))
        if method == "PUT" and "uploadId" in params:
            if self._header("x-amz-copy-source"):
                raise S3Error("NotImplemented", "UploadPartCopy is not implemented by the local cloud's S3")
            try:
                number = int(params.get("partNumber", ""))
            except ValueError:
                raise S3Error(
                    "InvalidArgument", "Part number must be an integer between 1 and 10000"
                ) from None
            etag = self.server.uploads.put_part(bucket, object_key, params["uploadId"], number, body)
            return self._send(200, headers={"ETag": f'"{etag}"'})
        if method == "DELETE" and "uploadId" in params:
            self.server.uploads.abort(bucket, object_key, params["uploadId"])
            return self._send(204)
        if method == "PUT" and self._header("x-amz-copy-source"):
            return self._copy_object(key, bucket, object_key)
        if method == "PUT":
            info = self.server.objects.put(bucket, object_key, body, content_type)
            return self._send(200, headers={"ETag": f'"{info.etag}"', **_version_header(info.version_id)})
        if method == "DELETE":
            [(version, marker)] = self.server.objects.delete(bucket, [(object_key, version_id)])
            headers = _version_header(version) | ({"x-amz-delete-marker": "true"} if marker else {})
            return self._send(204, headers=headers)
        if method == "HEAD":
            info = self.server.objects.head(bucket, object_key, version_id)
            return self._send(200, headers={**self._object_headers(info), "Content-Length": str(info.size)})
        if method == "GET":
            return self._get_object(bucket, object_key, params)
        raise S3Error(
            "NotImplemented",
            f"{method} on an object with {sorted(params) or 'no'} parameters is not implemented",
        )

    # ------------------------------------------------------------------ operations

    def _object_headers(self, info: ObjectInfo) -> dict[str, str]:
        return {
            "ETag": f'"{info.etag}"',
            "Last-Modified": formatdate(info.modified_at, usegmt=True),
            "Content-Type": info.content_type or "binary/octet-stream",
            "Accept-Ranges": "bytes",
            **_version_header(info.version_id),
        }

    def _get_object(self, bucket: BucketInfo, object_key: str, params: dict[str, str]) -> None:
        info, data = self.server.objects.get(bucket, object_key, params.get("versionId", ""))
        headers = self._object_headers(info)
        for name, header in (
            ("response-content-type", "Content-Type"),
            ("response-cache-control", "Cache-Control"),
        ):
            if params.get(name):
                headers[header] = params[name]
        wanted = self._header("Range")
        if not wanted:
            if self._header("x-amz-checksum-mode").upper() == "ENABLED" and "-" not in info.etag:
                headers["x-amz-checksum-crc32"] = s3auth.crc32_checksum(data)
            return self._send(200, data, headers)
        start, end = _byte_range(wanted, len(data))
        headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        return self._send(206, data[start : end + 1], headers)

    def _copy_object(self, key: AccessKey, bucket: BucketInfo, object_key: str) -> None:
        raw_source, _, source_query = self._header("x-amz-copy-source").partition("?")
        source = urllib.parse.unquote(raw_source).lstrip("/")
        source_version = dict(urllib.parse.parse_qsl(source_query)).get("versionId", "")
        source_bucket_name, _, source_key = source.partition("/")
        if not source_key:
            raise S3Error(
                "InvalidArgument",
                "Copy Source must mention the source bucket and key: sourcebucket/sourcekey",
            )
        source_bucket = self._bucket_for(key, source_bucket_name)
        replace = self._header("x-amz-metadata-directive").upper() == "REPLACE"
        content_type = (self._header("Content-Type") or "binary/octet-stream") if replace else None
        if (source_bucket.id, source_key) == (bucket.id, object_key) and not replace and not source_version:
            raise S3Error(
                "InvalidRequest",
                "This copy request is illegal because it is trying to copy an object to itself without "
                "changing the object's metadata.",
            )
        info = self.server.objects.copy(
            source_bucket, source_key, bucket, object_key, content_type, source_version
        )
        inner = _el("LastModified", _iso(info.modified_at)) + _el("ETag", f'"{info.etag}"')
        headers = _version_header(info.version_id)
        if source_version:
            headers["x-amz-copy-source-version-id"] = source_version
        return self._send(200, _xml("CopyObjectResult", inner), headers)

    def _delete_objects(self, bucket: BucketInfo, body: bytes) -> None:
        root = _parse_xml(body)
        keys = [(_text(obj, "Key"), _text(obj, "VersionId")) for obj in _children(root, "Object")]
        if not keys or len(keys) > 1000:
            raise S3Error("MalformedXML", "The XML you provided was not well-formed or did not validate")
        done = self.server.objects.delete(bucket, keys)
        quiet = _text(root, "Quiet").strip().lower() == "true"
        inner = ""
        for (name, asked), (version, marker) in zip(keys, done, strict=True):
            if quiet:
                break
            fields = _el("Key", name) + (_el("VersionId", asked) if asked else "")
            if marker:
                fields += _el("DeleteMarker", "true") + _el("DeleteMarkerVersionId", version)
            inner += f"<Deleted>{fields}</Deleted>"
        return self._send(200, _xml("DeleteResult", inner))

    def _list_object_versions(self, bucket: BucketInfo, params: dict[str, str]) -> None:
        """ListObjectVersions: by key, newest first; pages end at a key boundary (`key-marker`)."""
        if params.get("delimiter"):
            raise S3Error("NotImplemented", "ListObjectVersions with a delimiter is not implemented")
        prefix, key_marker = params.get("prefix", ""), params.get("key-marker", "")
        try:
            max_keys = min(int(params.get("max-keys", MAX_KEYS)), MAX_KEYS)
        except ValueError:
            raise S3Error("InvalidArgument", "max-keys must be an integer") from None
        found = self.server.objects.list_versions(bucket, prefix, key_marker)
        page, truncated = found, False
        if len(found) > max_keys:
            last_key = found[max_keys - 1].key
            page = [v for v in found if v.key <= last_key]
            truncated = len(page) < len(found)
        items = ""
        for v in page:
            common = (
                _el("Key", v.key)
                + _el("VersionId", v.version_id)
                + _el("IsLatest", "true" if v.is_latest else "false")
                + _el("LastModified", _iso(v.modified_at))
            )
            if v.delete_marker:
                items += f"<DeleteMarker>{common}</DeleteMarker>"
            else:
                sizes = _el("ETag", f'"{v.etag}"') + _el("Size", v.size) + _el("StorageClass", "STANDARD")
                items += f"<Version>{common}{sizes}</Version>"
        inner = (
            _el("Name", bucket.name)
            + _el("Prefix", prefix)
            + _el("KeyMarker", key_marker)
            + _el("MaxKeys", max_keys)
            + _el("IsTruncated", "true" if truncated else "false")
            + (_el("NextKeyMarker", page[-1].key) if truncated else "")
            + items
        )
        return self._send(200, _xml("ListVersionsResult", inner))

    def _list_buckets(self, key: AccessKey) -> None:
        buckets = self.server.buckets.owned_by(key.tenant_id)
        items = "".join(
            "<Bucket>"
            + _el("Name", b.name)
            + _el("CreationDate", _iso(b.created_at))
            + _el("BucketRegion", b.region)
            + "</Bucket>"
            for b in buckets
        )
        owner = f"<Owner>{_el('ID', key.tenant_id)}{_el('DisplayName', key.tenant_id)}</Owner>"
        return self._send(200, _xml("ListAllMyBucketsResult", f"{owner}<Buckets>{items}</Buckets>"))

    def _list_objects_v2(self, bucket: BucketInfo, params: dict[str, str]) -> None:
        prefix = params.get("prefix", "")
        delimiter = params.get("delimiter", "")
        start_after = params.get("start-after", "")
        token = params.get("continuation-token")
        url_encoded = params.get("encoding-type", "") == "url"
        if params.get("encoding-type") not in (None, "url"):
            raise S3Error("InvalidArgument", "Invalid Encoding Method specified in Request")
        try:
            max_keys = min(int(params.get("max-keys", MAX_KEYS)), MAX_KEYS)
        except ValueError:
            raise S3Error(
                "InvalidArgument", "Provided max-keys not an integer or within integer range"
            ) from None
        if max_keys < 0:
            raise S3Error("InvalidArgument", "max-keys must be non-negative")
        resume = ""
        if token is not None:
            try:
                resume = bytes.fromhex(token).decode("utf-8")  # the last key or prefix returned
            except ValueError:
                raise S3Error("InvalidArgument", "The continuation token provided is incorrect") from None
        after = max(start_after, resume)
        contents: list[ObjectInfo] = []
        prefixes: list[str] = []
        last = ""
        truncated = False
        for info in self.server.objects.list_objects(bucket, prefix, after):
            entry = info.key
            if delimiter:
                cut = info.key.find(delimiter, len(prefix))
                if cut >= 0:
                    entry = info.key[: cut + len(delimiter)]
            if entry <= resume or (prefixes and entry == prefixes[-1]):
                continue  # a common prefix already returned (on this page or an earlier one)
            if len(contents) + len(prefixes) >= max_keys:
                truncated = True
                break
            if entry == info.key:
                contents.append(info)
            else:
                prefixes.append(entry)
            last = entry

        def enc(text: str) -> str:
            return urllib.parse.quote(text, safe="/") if url_encoded else text

        inner = _el("Name", bucket.name) + _el("Prefix", enc(prefix))
        if delimiter:
            inner += _el("Delimiter", enc(delimiter))
        inner += _el("MaxKeys", max_keys) + _el("KeyCount", len(contents) + len(prefixes))
        inner += _el("IsTruncated", "true" if truncated else "false")
        if url_encoded:
            inner += _el("EncodingType", "url")
        if token is not None:
            inner += _el("ContinuationToken", token)
        if truncated:
            inner += _el("NextContinuationToken", last.encode().hex())
        if start_after:
            inner += _el("StartAfter", enc(start_after))
        for info in contents:
            inner += (
                "<Contents>"
                + _el("Key", enc(info.key))
                + _el("LastModified", _iso(info.modified_at))
                + _el("ETag", f'"{info.etag}"')
                + _el("Size", info.size)
                + _el("StorageClass", "STANDARD")
                + "</Contents>"
            )
        for common in prefixes:
            inner += f"<CommonPrefixes>{_el('Prefix', enc(common))}</CommonPrefixes>"
        return self._send(200, _xml("ListBucketResult", inner))


def _version_header(version_id: str) -> dict[str, str]:
    """S3 names the version a request wrote or read, except the `null` one of an unversioned bucket."""
    return {"x-amz-version-id": version_id} if version_id and version_id != "null" else {}


def _byte_range(header: str, size: int) -> tuple[int, int]:
    """The inclusive byte range of a `Range: bytes=…` header (one range, as S3 serves)."""
    unit, _, spec = header.partition("=")
    first, _, last = spec.strip().partition("-")
    try:
        if unit.strip() != "bytes" or "," in spec or not (first or last):
            raise ValueError
        if not first:  # the last N bytes
            count = int(last)
            if count <= 0:
                raise ValueError
            return max(size - count, 0), size - 1
        start = int(first)
        end = min(int(last), size - 1) if last else size - 1
    except ValueError:
        raise S3Error("InvalidArgument", "Invalid Range header") from None
    if start >= size or end < start:
        raise S3Error("InvalidRange", "The requested range is not satisfiable", RangeRequested=header)
    return start, end


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
    port = args.port or _recorded_port(home) or 0
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


def _recorded_port(home: Path) -> int | None:
    try:
        port = int((home / "port").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return port if 0 < port < 65536 else None


if __name__ == "__main__":
    sys.exit(main())
