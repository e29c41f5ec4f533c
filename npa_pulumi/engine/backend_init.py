"""`npa-pulumi backend init`: a private, versioned S3 bucket for a team's Pulumi state, and the exact
`--backend` URL that points the engine at it.

The bucket is created (or an existing one verified) through the S3 API of the storage endpoint, with the
access key the operator exports (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY), the same key the engine will
use: a key that cannot create or read the bucket here could not hold the state either. Versioning is
switched on where the endpoint supports it (every overwritten checkpoint stays recoverable); a bucket that
grants anything to everyone is refused.

* `--cloud nebius`: Nebius Object Storage, `https://storage.<region>.nebius.cloud` (or `--endpoint`).
* `--cloud local`: the embedded simulator keeps its buckets in SQLite and serves no S3 endpoint, so there
  is nothing the engine could write to; `--endpoint` names an S3-compatible server to use instead (MinIO,
  moto_server), and without it the command says so and points at the default file:// backend.

The URL is the engine's gocloud.dev s3blob syntax (AWS SDK v2): `endpoint` with its scheme, `region`,
`s3ForcePathStyle=true` (path-style addressing works on every S3-compatible endpoint). Credentials never
appear in it, in the output or in logs: only the names of the variables to export.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import SecretStr

from npa_pulumi.cloud.nebius.s3 import S3Client, S3Response
from npa_pulumi.errors import NpaError, UserInputError

ACCESS_KEY_ENV = "AWS_ACCESS_KEY_ID"
SECRET_KEY_ENV = "AWS_SECRET_ACCESS_KEY"
DEFAULT_NEBIUS_REGION = "eu-north1"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
_PUBLIC_GRANTEES = ("http://acs.amazonaws.com/groups/global/AllUsers", "AuthenticatedUsers")


class BackendInitFailed(NpaError):
    kind = "backend-init"


@dataclass
class BackendBucket:
    bucket: str
    endpoint: str
    region: str
    backend_url: str
    created: bool
    versioning: str  # "enabled" | "unsupported" (the endpoint refused the setting)
    export: dict[str, str] = field(default_factory=dict)  # variable -> what to set it to (never a value)

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, **asdict(self)}


def backend_url(bucket: str, endpoint: str, region: str) -> str:
    query = urllib.parse.urlencode(
        {"endpoint": endpoint, "region": region, "s3ForcePathStyle": "true"}, safe=":/"
    )
    return f"s3://{bucket}?{query}"


def _credentials() -> tuple[str, SecretStr]:
    key, secret = os.environ.get(ACCESS_KEY_ENV, ""), os.environ.get(SECRET_KEY_ENV, "")
    missing = [name for name, value in ((ACCESS_KEY_ENV, key), (SECRET_KEY_ENV, secret)) if not value]
    if missing:
        raise UserInputError(
            f"{' and '.join(missing)} not set: export the storage access key (an access key of a service "
            "account allowed to create and write the bucket) first; it is read from the environment only"
        )
    return key, SecretStr(secret)


def _fail(what: str, response: S3Response) -> BackendInitFailed:
    code = response.error_code() or f"HTTP {response.status}"
    return BackendInitFailed(f"{what}: {code}")


def _versioning_body() -> bytes:
    return (
        f'<VersioningConfiguration xmlns="{_S3_NS}"><Status>Enabled</Status></VersioningConfiguration>'
    ).encode()


def _create_body(region: str) -> bytes:
    if region == "us-east-1":  # S3's default location takes no configuration
        return b""
    return (
        f'<CreateBucketConfiguration xmlns="{_S3_NS}"><LocationConstraint>{region}</LocationConstraint>'
        "</CreateBucketConfiguration>"
    ).encode()


def init_bucket(bucket: str, endpoint: str, region: str) -> BackendBucket:
    """Create (or verify) the state bucket at `endpoint`: private, versioned where supported."""
    if not _BUCKET.match(bucket or ""):
        raise UserInputError(
            f"bucket name {bucket!r} must be 3-63 characters of a-z, 0-9, '.' and '-', starting and ending "
            "with a letter or digit"
        )
    parsed = urllib.parse.urlsplit(endpoint)
    if parsed.scheme not in ("http", "https") or not parsed.netloc or parsed.query:
        raise UserInputError(f"--endpoint {endpoint!r}: expected an http(s) URL such as https://host:port")
    endpoint = endpoint.rstrip("/")
    key, secret = _credentials()
    client = S3Client(endpoint, region, key, secret)
    try:
        head = client.request("HEAD", bucket)
        created = False
        if head.status == 404:
            made = client.request("PUT", bucket, body=_create_body(region))
            if made.status not in (200, 204) and made.error_code() not in ("BucketAlreadyOwnedByYou",):
                raise _fail(f"could not create bucket {bucket} at {endpoint}", made)
            created = made.status in (200, 204)
        elif head.status in (401, 403):
            raise BackendInitFailed(
                f"bucket {bucket} at {endpoint} exists but this access key may not use it (HTTP "
                f"{head.status}): bucket names are global; choose another, or use a key of its owner"
            )
        elif head.status != 200:
            raise _fail(f"could not read bucket {bucket} at {endpoint}", head)
        acl = client.request("GET", bucket, query="acl")
        if acl.status == 200 and any(g in acl.body.decode("utf-8", "replace") for g in _PUBLIC_GRANTEES):
            raise BackendInitFailed(
                f"bucket {bucket} grants access to everyone (its ACL names a public group): Pulumi state "
                "holds encrypted secrets and infrastructure facts; make it private first"
            )
        versioning = "enabled"
        put = client.request("PUT", bucket, body=_versioning_body(), query="versioning")
        if put.status not in (200, 204):
            if put.status in (400, 501) or put.error_code() in ("NotImplemented", "InvalidRequest"):
                versioning = "unsupported"
            else:
                raise _fail(f"could not enable versioning on bucket {bucket}", put)
        else:
            state = client.request("GET", bucket, query="versioning")
            if state.status != 200 or b"<Status>Enabled</Status>" not in state.body:
                raise _fail(f"versioning on bucket {bucket} did not read back as Enabled", state)
    except OSError as err:  # connection refused, DNS, TLS: urllib's errors are OSErrors
        raise BackendInitFailed(f"could not reach the storage endpoint {endpoint}: {err}") from None
    return BackendBucket(
        bucket=bucket,
        endpoint=endpoint,
        region=region,
        backend_url=backend_url(bucket, endpoint, region),
        created=created,
        versioning=versioning,
        export={
            "PULUMI_BACKEND_URL": "the backend URL above (or pass it as --backend)",
            ACCESS_KEY_ENV: "the storage access key id",
            SECRET_KEY_ENV: "the storage access key secret",
            "PULUMI_CONFIG_PASSPHRASE_FILE": "a file holding the team's passphrase (or --passphrase-file)",
        },
    )
