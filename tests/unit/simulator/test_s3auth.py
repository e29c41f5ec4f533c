"""SigV4 as the local cloud's S3 endpoint checks it (s3auth.py), against AWS's published examples and this
project's own signer, and the aws-chunked bodies the AWS SDKs stream."""

from __future__ import annotations

import base64
import hashlib
import zlib
from datetime import UTC, datetime

import pytest

from npa_pulumi.cloud.nebius.s3 import sign
from npa_pulumi.cloud.sigv4 import EMPTY_SHA256
from npa_pulumi.simulator import s3auth
from npa_pulumi.simulator.s3errors import S3Error

# AWS's documentation examples (Signature Version 4, "Examples"): this key, this date.
KEY_ID = "AKIAIOSFODNN7EXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
WHEN = datetime(2013, 5, 24, tzinfo=UTC)


def _secret_for(key_id: str) -> str:
    if key_id != KEY_ID:
        raise S3Error(
            "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records."
        )
    return SECRET


def _headers(**values: str) -> dict[str, list[str]]:
    return {name.replace("_", "-"): [value] for name, value in values.items()}


def test_aws_get_object_example_verifies() -> None:
    headers = _headers(
        host="examplebucket.s3.amazonaws.com",
        range="bytes=0-9",
        x_amz_content_sha256=EMPTY_SHA256,
        x_amz_date="20130524T000000Z",
        authorization=(
            f"AWS4-HMAC-SHA256 Credential={KEY_ID}/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        ),
    )
    verified = s3auth.verify("GET", "/test.txt", "", headers, _secret_for, now=WHEN)
    assert verified.access_key_id == KEY_ID
    # One changed byte anywhere the signature covers, or another secret: refused.
    with pytest.raises(S3Error) as err:
        s3auth.verify("GET", "/test.txt", "", {**headers, "range": ["bytes=0-8"]}, _secret_for, now=WHEN)
    assert err.value.code == "SignatureDoesNotMatch" and err.value.status == 403
    with pytest.raises(S3Error) as err:
        s3auth.verify("GET", "/test.txt", "", headers, lambda _: SECRET[:-1] + "X", now=WHEN)
    assert err.value.code == "SignatureDoesNotMatch"
    with pytest.raises(S3Error) as err:
        s3auth.verify("GET", "/test.txt", "", headers, _secret_for, now=datetime(2013, 5, 25, tzinfo=UTC))
    assert err.value.code == "RequestTimeTooSkewed"


def test_unknown_key_and_anonymous_requests_are_refused() -> None:
    headers = _headers(host="h", x_amz_content_sha256=EMPTY_SHA256, x_amz_date="20130524T000000Z")
    with pytest.raises(S3Error) as err:
        s3auth.verify("GET", "/b", "", headers, _secret_for, now=WHEN)
    assert err.value.code == "AccessDenied"
    headers["authorization"] = [
        "AWS4-HMAC-SHA256 Credential=NOBODY/20130524/us-east-1/s3/aws4_request,"
        "SignedHeaders=host;x-amz-date,Signature=00"
    ]
    with pytest.raises(S3Error) as err:
        s3auth.verify("GET", "/b", "", headers, _secret_for, now=WHEN)
    assert err.value.code == "InvalidAccessKeyId"


def test_this_projects_signer_with_an_encoded_key_and_query_verifies() -> None:
    """npa-pulumi's S3 client (cloud/nebius/s3.py) signs the path as sent and a sorted, encoded query."""
    path, query = "/bucket/.pulumi/stacks/npa-fleet/a%20b%2Bc.json", "list-type=2&prefix=.pulumi%2Flocks%2F"
    amz_date = "20130524T000000Z"
    base = {"host": "127.0.0.1:9000", "x-amz-date": amz_date, "x-amz-content-sha256": EMPTY_SHA256}
    signed = sign(
        method="GET",
        path=path,
        query=query,
        headers=base,
        payload_sha256=EMPTY_SHA256,
        access_key_id=KEY_ID,
        secret=SECRET,
        region="us-central1",
        service="s3",
        amz_date=amz_date,
    )
    headers = {k: [v] for k, v in base.items()} | {"authorization": [signed.authorization]}
    assert s3auth.verify("GET", path, query, headers, _secret_for, now=WHEN).scope.endswith(
        "us-central1/s3/aws4_request"
    )
    with pytest.raises(S3Error):
        s3auth.verify("GET", path, "list-type=2&prefix=other", headers, _secret_for, now=WHEN)


def _aws_streaming_request() -> tuple[dict[str, list[str]], bytes]:
    """AWS's example of a signed streaming PUT (STREAMING-AWS4-HMAC-SHA256-PAYLOAD): 65536 + 1024 bytes."""
    headers = _headers(
        host="s3.amazonaws.com",
        x_amz_date="20130524T000000Z",
        x_amz_storage_class="REDUCED_REDUNDANCY",
        x_amz_content_sha256=s3auth.STREAMING_SIGNED,
        content_encoding="aws-chunked",
        x_amz_decoded_content_length="66560",
        content_length="66824",
        authorization=(
            f"AWS4-HMAC-SHA256 Credential={KEY_ID}/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
            "x-amz-decoded-content-length;x-amz-storage-class,"
            "Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
        ),
    )
    body = (
        b"10000;chunk-signature=ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648\r\n"
        + b"a" * 65536
        + b"\r\n400;chunk-signature=0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497\r\n"
        + b"a" * 1024
        + b"\r\n0;chunk-signature=b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9\r\n\r\n"
    )
    return headers, body


def test_aws_signed_streaming_example_decodes_and_a_tampered_chunk_is_refused() -> None:
    headers, body = _aws_streaming_request()
    assert len(body) == 66824
    auth = s3auth.verify("PUT", "/examplebucket/chunkObject.txt", "", headers, _secret_for, now=WHEN)
    assert s3auth.decode_payload(body, headers, auth) == b"a" * 66560
    tampered = body.replace(b"a" * 1024, b"a" * 1023 + b"b")
    with pytest.raises(S3Error) as err:
        s3auth.decode_payload(tampered, headers, auth)
    assert err.value.code == "SignatureDoesNotMatch"
    with pytest.raises(S3Error) as err:
        s3auth.decode_payload(body[:-40], headers, auth)
    assert err.value.code in ("IncompleteBody", "SignatureDoesNotMatch")


def _unsigned_trailer_body(data: bytes, checksum: str) -> bytes:
    """What the AWS SDK for Go v2 sends for PutObject (STREAMING-UNSIGNED-PAYLOAD-TRAILER)."""
    return f"{len(data):x}\r\n".encode() + data + f"\r\n0\r\nx-amz-checksum-crc32:{checksum}\r\n\r\n".encode()


def test_unsigned_trailer_payload_checks_its_crc32_and_length() -> None:
    data = b'{"version": 3, "checkpoint": {}}'
    crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    assert crc == s3auth.crc32_checksum(data)
    auth = s3auth.Verified(KEY_ID, "20130524T000000Z", "s", b"k", "sig", s3auth.STREAMING_UNSIGNED_TRAILER)
    headers = _headers(x_amz_decoded_content_length=str(len(data)), x_amz_trailer="x-amz-checksum-crc32")
    assert s3auth.decode_payload(_unsigned_trailer_body(data, crc), headers, auth) == data
    with pytest.raises(S3Error) as err:
        s3auth.decode_payload(_unsigned_trailer_body(data, "AAAAAA=="), headers, auth)
    assert err.value.code == "BadDigest"
    with pytest.raises(S3Error) as err:
        s3auth.decode_payload(
            _unsigned_trailer_body(data, crc), _headers(x_amz_decoded_content_length="1"), auth
        )
    assert err.value.code == "IncompleteBody"


def test_plain_payload_must_match_its_signed_sha256() -> None:
    data = b"hello"
    good = s3auth.Verified(KEY_ID, "d", "s", b"k", "sig", hashlib.sha256(data).hexdigest())
    assert s3auth.decode_payload(data, {}, good) == data
    with pytest.raises(S3Error) as err:
        s3auth.decode_payload(b"hellO", {}, good)
    assert err.value.code == "XAmzContentSHA256Mismatch"
    unsigned = s3auth.Verified(KEY_ID, "d", "s", b"k", "sig", s3auth.UNSIGNED)
    assert s3auth.decode_payload(b"anything", {}, unsigned) == b"anything"
