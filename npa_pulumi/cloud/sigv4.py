"""AWS Signature Version 4's primitives, stdlib only, for the S3 client that signs (cloud/nebius/s3.py):
how a signing key is derived and a name encoded. No module of the product verifies signatures: the local
cloud's S3 server is SeaweedFS (simulator/seaweedd.py)."""

from __future__ import annotations

import hashlib
import hmac
import urllib.parse

ALGORITHM = "AWS4-HMAC-SHA256"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_UNRESERVED = "-_.~"


def hmac_sha256(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).digest()


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    """The key a request of `date` (YYYYMMDD) in `region` for `service` is signed with."""
    k_date = hmac_sha256(("AWS4" + secret).encode("utf-8"), date)
    return hmac_sha256(hmac_sha256(hmac_sha256(k_date, region), service), "aws4_request")


def uri_encode(text: str, *, keep_slash: bool) -> str:
    """RFC 3986 percent-encoding as SigV4 wants it (`/` kept in an object key's path only)."""
    return urllib.parse.quote(text, safe=_UNRESERVED + ("/" if keep_slash else ""))
