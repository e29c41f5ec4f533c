"""The stdlib SigV4 signer used by the bucket probe, against AWS's published test vectors."""

from __future__ import annotations

import hashlib

from pydantic import SecretStr

from npa_pulumi.cloud.nebius.s3 import S3Client, S3Response, canonical_query, sign
from npa_pulumi.cloud.sigv4 import EMPTY_SHA256

SUITE_KEY, SUITE_SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


def suite(path: str, query: str = "") -> str:
    return sign(
        method="GET",
        path=path,
        query=query,
        headers={"Host": "example.amazonaws.com", "X-Amz-Date": "20150830T123600Z"},
        payload_sha256=EMPTY_SHA256,
        access_key_id=SUITE_KEY,
        secret=SUITE_SECRET,
        region="us-east-1",
        service="service",
        amz_date="20150830T123600Z",
    ).authorization


def test_get_vanilla() -> None:
    assert suite("/") == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        "SignedHeaders=host;x-amz-date, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
    )


def test_get_vanilla_query_order_key_case() -> None:
    assert suite("/", "Param2=value2&Param1=value1").endswith(
        "Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"
    )


def test_s3_get_object_example() -> None:
    # The worked example of the S3 documentation ("GET Object", first 10 bytes of test.txt).
    signed = sign(
        method="GET",
        path="/test.txt",
        query="",
        headers={
            "Host": "examplebucket.s3.amazonaws.com",
            "Range": "bytes=0-9",
            "x-amz-content-sha256": EMPTY_SHA256,
            "x-amz-date": "20130524T000000Z",
        },
        payload_sha256=EMPTY_SHA256,
        access_key_id="AKIAIOSFODNN7EXAMPLE",
        secret=SecretStr("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
        region="us-east-1",
        service="s3",
        amz_date="20130524T000000Z",
    )
    assert signed.signed_headers == "host;range;x-amz-content-sha256;x-amz-date"
    assert hashlib.sha256(signed.canonical_request.encode()).hexdigest() == (
        "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972"
    )
    assert signed.signature == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"


def test_canonical_query_sorts_and_encodes() -> None:
    assert canonical_query("b=2&a=1&A=0") == "A=0&a=1&b=2"
    assert canonical_query("k=a b&x=%2F") == "k=a%20b&x=%2F"


def test_client_repr_has_no_secret() -> None:
    client = S3Client("https://storage.eu-north1.nebius.cloud", "eu-north1", "NAKI1", SecretStr("hush-hush"))
    assert "hush-hush" not in repr(client)


def test_error_code_of_an_s3_error_body() -> None:
    body = b"<?xml version='1.0'?><Error><Code>NoSuchBucket</Code><Message>m</Message></Error>"
    assert S3Response(404, body).error_code() == "NoSuchBucket"
    assert S3Response(500, b"").error_code() == ""
