"""`npa-pulumi backend init`: a private, versioned S3 bucket for a team's Pulumi state, and the exact
`--backend` URL that points the engine at it.

The bucket is created (or an existing one verified) through the S3 API of the storage endpoint, with the
access key the operator exports (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY), the same key the engine will
use: a key that cannot create or read the bucket here could not hold the state either. Versioning is
switched on where the endpoint supports it (every overwritten checkpoint stays recoverable); a bucket that
grants anything to everyone is refused.

* `--cloud nebius`: Nebius Object Storage, `https://storage.<region>.nebius.cloud` (or `--endpoint`).
* `--cloud local`: the local cloud's own S3 endpoint (a SeaweedFS server, started here
  and by any command whose backend URL names it): the bucket is made through the local cloud's storage
  service, in `--project` or a dedicated state project (`npa-state`, created in the local tenant when
  missing); without exported keys a service account, granted exactly this bucket, and access key are minted
  for it and written as an AWS shared-credentials profile
  (0600, `~/.npa-pulumi/backend/<bucket>.credentials`, profile `npa-<bucket>`) that the engine and
  npa-pulumi read. `--endpoint` still names any S3-compatible server instead (SeaweedFS, MinIO).

The URL is the engine's gocloud.dev s3blob syntax (AWS SDK v2): `endpoint` with its scheme, `region`,
`s3ForcePathStyle=true` (path-style addressing works on every S3-compatible endpoint). Credentials never
appear in it, in the output or in logs: only the names of the variables to export.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from npa_pulumi.cloud.aws_credentials import (
    ACCESS_KEY_ENV,
    CREDENTIALS_FILE_ENV,
    PROFILE_ENV,
    SECRET_KEY_ENV,
    from_profile,
)
from npa_pulumi.cloud.nebius.s3 import S3Client, S3Response
from npa_pulumi.errors import NpaError, UserInputError
from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.home import npa_home

if TYPE_CHECKING:
    from npa_pulumi.cloud.port import CloudPort, Project

DEFAULT_NEBIUS_REGION = "eu-north1"
LOCAL_STATE_PROJECT = "npa-state"  # the local cloud's project for state buckets (unless --project)
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
    project_id: str | None = None  # --cloud local: the bucket's project in the local cloud
    credentials_file: str | None = None  # --cloud local without exported keys: the profile's file
    profile: str | None = None  # ... and the profile in it

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


def _check_name(bucket: str) -> None:
    if not _BUCKET.match(bucket or ""):
        raise UserInputError(
            f"bucket name {bucket!r} must be 3-63 characters of a-z, 0-9, '.' and '-', starting and ending "
            "with a letter or digit"
        )


def init_bucket(
    bucket: str, endpoint: str, region: str, credentials: tuple[str, SecretStr] | None = None
) -> BackendBucket:
    """Create (or verify) the state bucket at `endpoint`: private, versioned where supported. The key is
    `credentials`, else the one exported."""
    _check_name(bucket)
    parsed = urllib.parse.urlsplit(endpoint)
    if parsed.scheme not in ("http", "https") or not parsed.netloc or parsed.query:
        raise UserInputError(f"--endpoint {endpoint!r}: expected an http(s) URL such as https://host:port")
    endpoint = endpoint.rstrip("/")
    key, secret = credentials or _credentials()
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


# ------------------------------------------------------------------------------------ the local cloud


def local_credentials_path(bucket: str) -> Path:
    return npa_home() / "backend" / f"{bucket}.credentials"


def local_profile(bucket: str) -> str:
    return f"npa-{bucket}"


def _local_project(cloud: CloudPort, project: str | None) -> Project:
    from npa_pulumi.cloud.errors import NotFound

    if project:
        try:
            return cloud.get_project(project)
        except NotFound:
            raise UserInputError(f"--project {project}: no such project in the local cloud") from None
    tenant = cloud.principal().tenant_id
    for found in cloud.list_projects(tenant):
        if found.name == LOCAL_STATE_PROJECT:
            return found
    return cloud.create_project(
        tenant, LOCAL_STATE_PROJECT, cloud.default_region(), labels={"npa-purpose": "pulumi-state"}
    )


def _minted_key(cloud: CloudPort, project_id: str, bucket: str) -> tuple[str, SecretStr, Path, str, str]:
    """The bucket's own access key, kept in its shared-credentials profile: the one written before when
    it is still a live key of the local cloud, else a new key of the bucket's service account (its older
    keys deleted, so keys do not pile up) written there (0600); last, the account's id."""
    path, profile = local_credentials_path(bucket), local_profile(bucket)
    existing = from_profile(path, profile) if path.is_file() else None
    name = f"npa-state-{bucket}".replace(".", "-")[:63]
    found = cloud.find_service_account(project_id, name)
    if existing is not None and found is not None:
        live = {k.aws_access_key_id for k in cloud.list_access_keys(project_id, found.id)}
        if existing[0] in live:
            return existing[0], existing[1], path, profile, found.id
    account = found or cloud.create_service_account(project_id, name, labels={"npa-purpose": "pulumi-state"})
    minted = cloud.create_access_key(project_id, account.id)
    for old in cloud.list_access_keys(project_id, account.id):
        if old.id != minted.key.id:
            cloud.delete_access_key(old.id)
    key, secret = minted.key.aws_access_key_id, minted.secret
    text = (
        f"# npa-pulumi backend init --cloud local --bucket {bucket}: the state bucket's access key\n"
        f"[{profile}]\naws_access_key_id = {key}\naws_secret_access_key = {secret.get_secret_value()}\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomically(path, text, mode=0o600)
    return key, secret, path, profile, account.id


def _state_bucket(cloud: CloudPort, project_id: str, bucket: str, account_id: str | None) -> bool:
    """The bucket made through the local cloud's storage service, as on Nebius (S3 is the data plane: the
    SeaweedFS server allows a key no CreateBucket), and its own service account granted exactly it; True
    when it was created here. A name another project holds is left to S3 to refuse."""
    from npa_pulumi.cloud.errors import AlreadyExists

    found = cloud.find_bucket(project_id, bucket)
    created = False
    if found is None:
        try:
            found = cloud.create_bucket(
                project_id, bucket, "standard", 0, labels={"npa-purpose": "pulumi-state"}
            )
            created = True
        except AlreadyExists:
            return False
    if account_id is not None:
        cloud.grant_bucket_access(
            project_id, found.id, account_id, f"npa-state-{bucket}".replace(".", "-")[:63]
        )
    return created


def init_local_bucket(bucket: str, project: str | None = None) -> BackendBucket:
    """The state bucket in the local cloud, through its own S3 endpoint (started if needed): in
    `project`, else the local tenant's state project; with the exported key, else the bucket's own
    (minted and written as a shared-credentials profile)."""
    from npa_pulumi.cloud.errors import CloudError
    from npa_pulumi.cloud.factory import make_cloud

    _check_name(bucket)
    cloud = make_cloud("local")
    try:
        state_project = _local_project(cloud, project)
        endpoint = cloud.object_storage_endpoint(state_project.region)
        exported = bool(os.environ.get(ACCESS_KEY_ENV) or os.environ.get(SECRET_KEY_ENV))
        path: Path | None = None
        profile: str | None = None
        account_id: str | None = None
        if exported:
            credentials = _credentials()
        else:
            key, secret, path, profile, account_id = _minted_key(cloud, state_project.id, bucket)
            credentials = (key, secret)
        made = _state_bucket(cloud, state_project.id, bucket, account_id)
    except CloudError as err:
        raise BackendInitFailed(f"the local cloud refused: {err}") from None
    result = init_bucket(bucket, endpoint, state_project.region, credentials)
    result.created = result.created or made
    result.project_id = state_project.id
    if path is not None and profile is not None:
        result.credentials_file, result.profile = str(path), profile
        result.export = {
            "PULUMI_BACKEND_URL": result.export["PULUMI_BACKEND_URL"],
            CREDENTIALS_FILE_ENV: str(path),
            PROFILE_ENV: profile,
            "PULUMI_CONFIG_PASSPHRASE_FILE": result.export["PULUMI_CONFIG_PASSPHRASE_FILE"],
        }
    return result
