"""The local cloud's S3 operations, routed from a request the S3 server (s3wire.py) has read and
authenticated: one of ListBuckets, a bucket's operations (HeadBucket, CreateBucket, DeleteBucket,
GetBucketAcl, GetBucketLocation, Get/PutBucketVersioning, the listings, DeleteObjects) or an object's (Get
with Range, Head, Put, Copy, Delete, the multipart upload's steps). Each returns the `Response` the handler
sends; anything else is NotImplemented."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from email.message import Message
from email.utils import formatdate
from xml.sax.saxutils import escape

from npa_pulumi.simulator import s3auth, s3listings
from npa_pulumi.simulator.objects import AccessKey, BucketInfo, ObjectInfo, S3Objects
from npa_pulumi.simulator.s3buckets import S3Buckets
from npa_pulumi.simulator.s3errors import S3Error
from npa_pulumi.simulator.s3uploads import S3Uploads
from npa_pulumi.simulator.s3xml import Response, children, el, iso_time, parse_xml, text_of, xml_doc


@dataclass(frozen=True)
class S3Request:
    """What a route needs of a request: its method, the key that signed it, its query, its (decoded)
    payload and its headers."""

    method: str
    key: AccessKey
    params: dict[str, str]
    body: bytes
    headers: Message

    def header(self, name: str) -> str:
        return (self.headers.get(name) or "").strip()


class S3Routes:
    """S3's operations over the S3 services: `service` (no bucket named), `bucket` and `object`."""

    def __init__(self, buckets: S3Buckets, objects: S3Objects, uploads: S3Uploads) -> None:
        self.buckets = buckets
        self.objects = objects
        self.uploads = uploads

    def service(self, key: AccessKey) -> Response:
        return s3listings.list_buckets(self.buckets, key)

    def bucket(self, request: S3Request, name: str) -> Response:
        method, key, params, body = request.method, request.key, request.params, request.body
        if method == "PUT" and not params:
            location = ""
            if body.strip():
                location = text_of(parse_xml(body), "LocationConstraint")
            created = self.buckets.create(key, name, location)
            if not created:
                raise S3Error(
                    "BucketAlreadyOwnedByYou",
                    "Your previous request to create the named bucket succeeded and you already own it.",
                    BucketName=name,
                )
            return Response(200, headers={"Location": f"/{name}"})
        bucket = self._bucket_for(key, name)
        if method == "HEAD":
            return Response(200, headers={"x-amz-bucket-region": bucket.region})
        if method == "DELETE" and not params:
            self.buckets.delete(bucket)
            return Response(204)
        if method == "GET" and "acl" in params:
            owner = f"<Owner>{el('ID', bucket.project_id)}{el('DisplayName', bucket.project_id)}</Owner>"
            grant = (
                '<Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
                'xsi:type="CanonicalUser">'
                f"{el('ID', bucket.project_id)}{el('DisplayName', bucket.project_id)}</Grantee>"
                "<Permission>FULL_CONTROL</Permission></Grant>"
            )
            return Response(
                200, xml_doc("AccessControlPolicy", f"{owner}<AccessControlList>{grant}</AccessControlList>")
            )
        if method == "GET" and "location" in params:
            return Response(200, xml_doc("LocationConstraint", escape(bucket.region)))
        if method == "GET" and "versioning" in params:
            status = self.buckets.versioning(bucket)
            return Response(200, xml_doc("VersioningConfiguration", el("Status", status) if status else ""))
        if method == "PUT" and "versioning" in params:
            self.buckets.set_versioning(bucket, text_of(parse_xml(body), "Status"))
            return Response(200)
        if method == "GET" and "versions" in params:
            return s3listings.list_object_versions(self.objects, bucket, params)
        if method == "GET" and params.get("list-type") == "2":
            return s3listings.list_objects_v2(self.objects, bucket, params)
        if method == "POST" and "delete" in params:
            return self._delete_objects(bucket, body)
        raise S3Error(
            "NotImplemented",
            f"{method} on a bucket with {sorted(params) or 'no'} parameters is not implemented",
        )

    def object(self, request: S3Request, bucket_name: str, object_key: str) -> Response:
        method, key, params, body = request.method, request.key, request.params, request.body
        bucket = self._bucket_for(key, bucket_name)
        version_id = params.get("versionId", "")
        content_type = request.header("Content-Type") or "binary/octet-stream"
        if method == "POST" and "uploads" in params:
            upload_id = self.uploads.create(bucket, object_key, content_type)
            inner = el("Bucket", bucket.name) + el("Key", object_key) + el("UploadId", upload_id)
            return Response(200, xml_doc("InitiateMultipartUploadResult", inner))
        if method == "POST" and "uploadId" in params:
            root = parse_xml(body)
            parts = []
            for part in children(root, "Part"):
                try:
                    parts.append((int(text_of(part, "PartNumber")), text_of(part, "ETag")))
                except ValueError:
                    raise S3Error("MalformedXML", "a Part's PartNumber is not a number") from None
            done = self.uploads.complete(bucket, object_key, params["uploadId"], parts)
            inner = (
                el("Location", f"/{bucket.name}/{object_key}")
                + el("Bucket", bucket.name)
                + el("Key", object_key)
                + el("ETag", f'"{done.etag}"')
            )
            return Response(200, xml_doc("CompleteMultipartUploadResult", inner))
        if method == "PUT" and "uploadId" in params:
            if request.header("x-amz-copy-source"):
                raise S3Error("NotImplemented", "UploadPartCopy is not implemented by the local cloud's S3")
            try:
                number = int(params.get("partNumber", ""))
            except ValueError:
                raise S3Error(
                    "InvalidArgument", "Part number must be an integer between 1 and 10000"
                ) from None
            etag = self.uploads.put_part(bucket, object_key, params["uploadId"], number, body)
            return Response(200, headers={"ETag": f'"{etag}"'})
        if method == "DELETE" and "uploadId" in params:
            self.uploads.abort(bucket, object_key, params["uploadId"])
            return Response(204)
        if method == "PUT" and request.header("x-amz-copy-source"):
            return self._copy_object(request, bucket, object_key)
        if method == "PUT":
            info = self.objects.put(bucket, object_key, body, content_type)
            return Response(200, headers={"ETag": f'"{info.etag}"', **_version_header(info.version_id)})
        if method == "DELETE":
            [(version, marker)] = self.objects.delete(bucket, [(object_key, version_id)])
            headers = _version_header(version) | ({"x-amz-delete-marker": "true"} if marker else {})
            return Response(204, headers=headers)
        if method == "HEAD":
            info = self.objects.head(bucket, object_key, version_id)
            return Response(200, headers={**self._object_headers(info), "Content-Length": str(info.size)})
        if method == "GET":
            return self._get_object(request, bucket, object_key)
        raise S3Error(
            "NotImplemented",
            f"{method} on an object with {sorted(params) or 'no'} parameters is not implemented",
        )

    def _bucket_for(self, key: AccessKey, name: str) -> BucketInfo:
        bucket = self.buckets.bucket(name)
        if bucket.tenant_id != key.tenant_id:
            raise S3Error("AccessDenied", "Access Denied")
        return bucket

    def _object_headers(self, info: ObjectInfo) -> dict[str, str]:
        return {
            "ETag": f'"{info.etag}"',
            "Last-Modified": formatdate(info.modified_at, usegmt=True),
            "Content-Type": info.content_type or "binary/octet-stream",
            "Accept-Ranges": "bytes",
            **_version_header(info.version_id),
        }

    def _get_object(self, request: S3Request, bucket: BucketInfo, object_key: str) -> Response:
        params = request.params
        info, data = self.objects.get(bucket, object_key, params.get("versionId", ""))
        headers = self._object_headers(info)
        for name, header in (
            ("response-content-type", "Content-Type"),
            ("response-cache-control", "Cache-Control"),
        ):
            if params.get(name):
                headers[header] = params[name]
        wanted = request.header("Range")
        if not wanted:
            if request.header("x-amz-checksum-mode").upper() == "ENABLED" and "-" not in info.etag:
                headers["x-amz-checksum-crc32"] = s3auth.crc32_checksum(data)
            return Response(200, data, headers)
        start, end = _byte_range(wanted, len(data))
        headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        return Response(206, data[start : end + 1], headers)

    def _copy_object(self, request: S3Request, bucket: BucketInfo, object_key: str) -> Response:
        key = request.key
        raw_source, _, source_query = request.header("x-amz-copy-source").partition("?")
        source = urllib.parse.unquote(raw_source).lstrip("/")
        source_version = dict(urllib.parse.parse_qsl(source_query)).get("versionId", "")
        source_bucket_name, _, source_key = source.partition("/")
        if not source_key:
            raise S3Error(
                "InvalidArgument",
                "Copy Source must mention the source bucket and key: sourcebucket/sourcekey",
            )
        source_bucket = self._bucket_for(key, source_bucket_name)
        replace = request.header("x-amz-metadata-directive").upper() == "REPLACE"
        content_type = (request.header("Content-Type") or "binary/octet-stream") if replace else None
        if (source_bucket.id, source_key) == (bucket.id, object_key) and not replace and not source_version:
            raise S3Error(
                "InvalidRequest",
                "This copy request is illegal because it is trying to copy an object to itself without "
                "changing the object's metadata.",
            )
        info = self.objects.copy(source_bucket, source_key, bucket, object_key, content_type, source_version)
        inner = el("LastModified", iso_time(info.modified_at)) + el("ETag", f'"{info.etag}"')
        headers = _version_header(info.version_id)
        if source_version:
            headers["x-amz-copy-source-version-id"] = source_version
        return Response(200, xml_doc("CopyObjectResult", inner), headers)

    def _delete_objects(self, bucket: BucketInfo, body: bytes) -> Response:
        root = parse_xml(body)
        keys = [(text_of(obj, "Key"), text_of(obj, "VersionId")) for obj in children(root, "Object")]
        if not keys or len(keys) > 1000:
            raise S3Error("MalformedXML", "The XML you provided was not well-formed or did not validate")
        done = self.objects.delete(bucket, keys)
        quiet = text_of(root, "Quiet").strip().lower() == "true"
        inner = ""
        for (name, asked), (version, marker) in zip(keys, done, strict=True):
            if quiet:
                break
            fields = el("Key", name) + (el("VersionId", asked) if asked else "")
            if marker:
                fields += el("DeleteMarker", "true") + el("DeleteMarkerVersionId", version)
            inner += f"<Deleted>{fields}</Deleted>"
        return Response(200, xml_doc("DeleteResult", inner))


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
