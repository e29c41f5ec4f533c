"""S3's listings as the local cloud's S3 server answers them: ListBuckets, ListObjectsV2 (prefixes,
delimiters, continuation tokens, URL encoding) and ListObjectVersions (pages that end at a key boundary)."""

from __future__ import annotations

import urllib.parse

from npa_pulumi.simulator.objects import AccessKey, BucketInfo, ObjectInfo, S3Objects
from npa_pulumi.simulator.s3buckets import S3Buckets
from npa_pulumi.simulator.s3errors import S3Error
from npa_pulumi.simulator.s3xml import Response, el, iso_time, xml_doc

MAX_KEYS = 1000


def list_buckets(buckets: S3Buckets, key: AccessKey) -> Response:
    items = "".join(
        "<Bucket>"
        + el("Name", b.name)
        + el("CreationDate", iso_time(b.created_at))
        + el("BucketRegion", b.region)
        + "</Bucket>"
        for b in buckets.owned_by(key.tenant_id)
    )
    owner = f"<Owner>{el('ID', key.tenant_id)}{el('DisplayName', key.tenant_id)}</Owner>"
    return Response(200, xml_doc("ListAllMyBucketsResult", f"{owner}<Buckets>{items}</Buckets>"))


def list_objects_v2(objects: S3Objects, bucket: BucketInfo, params: dict[str, str]) -> Response:
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
        raise S3Error("InvalidArgument", "Provided max-keys not an integer or within integer range") from None
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
    for info in objects.list_objects(bucket, prefix, after):
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

    inner = el("Name", bucket.name) + el("Prefix", enc(prefix))
    if delimiter:
        inner += el("Delimiter", enc(delimiter))
    inner += el("MaxKeys", max_keys) + el("KeyCount", len(contents) + len(prefixes))
    inner += el("IsTruncated", "true" if truncated else "false")
    if url_encoded:
        inner += el("EncodingType", "url")
    if token is not None:
        inner += el("ContinuationToken", token)
    if truncated:
        inner += el("NextContinuationToken", last.encode().hex())
    if start_after:
        inner += el("StartAfter", enc(start_after))
    for info in contents:
        inner += (
            "<Contents>"
            + el("Key", enc(info.key))
            + el("LastModified", iso_time(info.modified_at))
            + el("ETag", f'"{info.etag}"')
            + el("Size", info.size)
            + el("StorageClass", "STANDARD")
            + "</Contents>"
        )
    for common in prefixes:
        inner += f"<CommonPrefixes>{el('Prefix', enc(common))}</CommonPrefixes>"
    return Response(200, xml_doc("ListBucketResult", inner))


def list_object_versions(objects: S3Objects, bucket: BucketInfo, params: dict[str, str]) -> Response:
    """ListObjectVersions: by key, newest first; pages end at a key boundary (`key-marker`)."""
    if params.get("delimiter"):
        raise S3Error("NotImplemented", "ListObjectVersions with a delimiter is not implemented")
    prefix, key_marker = params.get("prefix", ""), params.get("key-marker", "")
    try:
        max_keys = min(int(params.get("max-keys", MAX_KEYS)), MAX_KEYS)
    except ValueError:
        raise S3Error("InvalidArgument", "max-keys must be an integer") from None
    found = objects.list_versions(bucket, prefix, key_marker)
    page, truncated = found, False
    if len(found) > max_keys:
        last_key = found[max_keys - 1].key
        page = [v for v in found if v.key <= last_key]
        truncated = len(page) < len(found)
    items = ""
    for v in page:
        common = (
            el("Key", v.key)
            + el("VersionId", v.version_id)
            + el("IsLatest", "true" if v.is_latest else "false")
            + el("LastModified", iso_time(v.modified_at))
        )
        if v.delete_marker:
            items += f"<DeleteMarker>{common}</DeleteMarker>"
        else:
            sizes = el("ETag", f'"{v.etag}"') + el("Size", v.size) + el("StorageClass", "STANDARD")
            items += f"<Version>{common}{sizes}</Version>"
    inner = (
        el("Name", bucket.name)
        + el("Prefix", prefix)
        + el("KeyMarker", key_marker)
        + el("MaxKeys", max_keys)
        + el("IsTruncated", "true" if truncated else "false")
        + (el("NextKeyMarker", page[-1].key) if truncated else "")
        + items
    )
    return Response(200, xml_doc("ListVersionsResult", inner))
