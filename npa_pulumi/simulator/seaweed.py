"""The local cloud's buckets and access keys, made SeaweedFS's: what its S3 server (`weed server -s3`, run by
seaweedd.py) must hold, and bringing it there.

The cloud's database stays the source of truth; SeaweedFS serves the S3 wire (signatures, listings,
versioning, multipart uploads) and keeps the objects, under the cloud directory (`s3/seaweedfs`).

* Identities: every live access key of the local IAM is a SeaweedFS identity whose secret is the key's own
  (derived again from the cloud's master key, access_keys.py), allowed exactly what its service account's
  bucket grants hold: the object roles (records.BUCKET_ROLES) on a bucket become Read, Write, List, Tagging,
  ReadAcp and PutBucketVersioning on that bucket, nothing else (no CreateBucket, no DeleteBucket: buckets
  are made and deleted through the cloud's storage service, as on Nebius). A key deleted, being deleted or
  past its expiry is no longer live: it stays in the file as a disabled identity with a random secret, so
  the server refuses it whatever a reload keeps of the identities it loaded before (SeaweedFS merges a
  reloaded static file into what it holds). The identities are a JSON file (`s3/identities.json`, 0600) the
  server reloads on SIGHUP; a sync-canary identity, new at every change, tells when a reload has taken
  effect.
* Buckets: every live bucket of the cloud is a SeaweedFS bucket, created by the cloud's own admin identity;
  a bucket deleted through the storage service goes with its data (through the filer).

`apply` makes it so, under `s3/sync.lock`: the storage and IAM services call it after every change
(`sync_if_serving`), and the daemon every half second, which is how an expiry takes effect.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from npa_pulumi.cloud.nebius.s3 import S3Client, S3Response
from npa_pulumi.errors import NpaError
from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.locks import FileLock, held_elsewhere
from npa_pulumi.simulator import db, records
from npa_pulumi.simulator.access_keys import SECRET_DERIVATION, access_key_secret
from npa_pulumi.simulator.records import gone

ADMIN_KEY_ID = "NPALOCALCLOUDADMIN00"  # the cloud's own identity: buckets, counts (never a tenant's key)
ADMIN_ACTIONS = ("Admin", "Read", "Write", "List", "Tagging", "ReadAcp", "WriteAcp", "DeleteBucket")
# An object role on one bucket: its objects, and its versioning (`backend init` turns it on with the key).
GRANT_ACTIONS = ("Read", "Write", "List", "Tagging", "ReadAcp", "PutBucketVersioning")
CANARY_NAME = "npa-sync-canary"
RELOAD_TIMEOUT_S = 15.0
ADMIN_REGION = "us-east-1"  # SeaweedFS checks signatures in any region; the admin signs in S3's default


class SeaweedSyncError(NpaError):
    """The local cloud's SeaweedFS server did not take the cloud's buckets or keys."""

    kind = "local-s3-server"


@dataclass(frozen=True)
class Endpoints:
    """Where the running server listens (recorded by seaweedd.py in `s3/endpoints.json`)."""

    s3_port: int
    filer_port: int
    weed_pid: int

    @property
    def s3(self) -> str:
        return endpoint_of(self.s3_port)


def s3_dir(cloud_dir: Path) -> Path:
    """The server's files: server.lock (held while its daemon runs), server.pid, port, ports.json,
    endpoints.json, ready/failed, identities.json, server.log and weed.log, its data (seaweedfs/)."""
    return cloud_dir / "s3"


def recorded_port(cloud_dir: Path) -> int | None:
    """The S3 port chosen once for this cloud (`s3/port`): every restart listens there again."""
    try:
        port = int((s3_dir(cloud_dir) / "port").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return port if 0 < port < 65536 else None


def endpoint_of(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def daemon_running(cloud_dir: Path) -> bool:
    """Whether the cloud's server daemon (seaweedd.py) runs: it holds `s3/server.lock` for its life."""
    return held_elsewhere(s3_dir(cloud_dir) / "server.lock")


def has_data(cloud_dir: Path) -> bool:
    """Whether a server has ever run for this cloud (its data directory exists): objects live only there."""
    return (s3_dir(cloud_dir) / "seaweedfs").is_dir()


def identities_path(cloud_dir: Path) -> Path:
    return s3_dir(cloud_dir) / "identities.json"


def endpoints(cloud_dir: Path) -> Endpoints | None:
    try:
        data = json.loads((s3_dir(cloud_dir) / "endpoints.json").read_text())
        return Endpoints(int(data["s3_port"]), int(data["filer_port"]), int(data["weed_pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def admin_client(cloud_dir: Path, where: Endpoints, timeout_s: float = 30.0) -> S3Client:
    secret = SecretStr(access_key_secret(cloud_dir, ADMIN_KEY_ID))
    return S3Client(where.s3, ADMIN_REGION, ADMIN_KEY_ID, secret, timeout_s=timeout_s)


# ------------------------------------------------------------------------------- what must be there


@dataclass(frozen=True)
class Desired:
    identities: tuple[tuple[str, tuple[str, ...]], ...]  # (key id, its actions), the live keys
    buckets: tuple[str, ...]
    retired: tuple[str, ...]  # key ids in the database that are no longer live

    def digest(self) -> str:
        return hashlib.sha256(json.dumps([self.identities, self.buckets, self.retired]).encode()).hexdigest()


def desired(cloud_dir: Path, now: float | None = None) -> Desired:
    """The buckets and live keys of the cloud's database, each key with the actions its grants allow."""
    now = time.time() if now is None else now
    path = db.db_path(cloud_dir)
    if not db.is_initialised(path):
        raise SeaweedSyncError(f"the local cloud at {cloud_dir} has no database (reset, or never used)")
    conn = db.connect(path)  # a read of the rows alone (not the store, which imports this module's users)
    try:
        rows = conn.execute(
            "SELECT * FROM resources WHERE kind IN ('bucket', 'access_key', 'service_account')"
        ).fetchall()
    finally:
        conn.close()
    buckets = {row["id"]: row["name"] for row in rows if row["kind"] == "bucket" and not gone(row)}
    accounts = {row["id"]: records.data_of(row) for row in rows if row["kind"] == "service_account"}
    live: list[tuple[str, tuple[str, ...]]] = []
    retired: list[str] = []
    for row in rows:
        if row["kind"] != "access_key":
            continue
        data = records.data_of(row)
        key_id = str(data.get("aws_access_key_id") or row["name"])
        if gone(row) or records.key_expired(data, now) or data.get("secret_derivation") != SECRET_DERIVATION:
            retired.append(key_id)
            continue
        grants = (accounts.get(row["parent_id"]) or {}).get("bucket_grants") or []
        names = sorted(
            {
                buckets[g["bucket_id"]]
                for g in grants
                if g.get("role") in records.BUCKET_ROLES and g.get("bucket_id") in buckets
            }
        )
        actions = tuple(f"{action}:{name}" for name in names for action in GRANT_ACTIONS)
        live.append((key_id, actions))
    return Desired(tuple(sorted(live)), tuple(sorted(buckets.values())), tuple(sorted(retired)))


def identities_document(cloud_dir: Path, want: Desired, canary: str, retired: set[str]) -> dict[str, Any]:
    """SeaweedFS's S3 configuration (its `-s3.config` file): the admin, the canary, the live keys, and
    every key that was ever served and is no longer live, disabled with a secret nobody holds."""

    def identity(name: str, key_id: str, secret: str, actions: list[str], **extra: Any) -> dict[str, Any]:
        return {
            "name": name,
            "credentials": [{"accessKey": key_id, "secretKey": secret, **extra}],
            "actions": actions,
        }

    found = [
        identity(
            "npa-local-cloud-admin",
            ADMIN_KEY_ID,
            access_key_secret(cloud_dir, ADMIN_KEY_ID),
            list(ADMIN_ACTIONS),
        ),
        identity(CANARY_NAME, canary, access_key_secret(cloud_dir, canary), [f"List:{CANARY_NAME}"]),
    ]
    # Named by the key id, live or retired: a reload replaces an identity by its name and its key.
    for key_id, actions in want.identities:
        found.append(identity(key_id, key_id, access_key_secret(cloud_dir, key_id), list(actions)))
    live = {key_id for key_id, _ in want.identities}
    for key_id in sorted((retired | set(want.retired)) - live):
        revoked = identity(key_id, key_id, secrets.token_urlsafe(30), [], status="Inactive")
        found.append({**revoked, "disabled": True})
    return {"identities": found}


# ------------------------------------------------------------------------------------ bringing it there


def _applied(cloud_dir: Path) -> dict[str, Any]:
    try:
        loaded = json.loads((s3_dir(cloud_dir) / "applied.json").read_text())
        return loaded if isinstance(loaded, dict) else {}
    except (OSError, ValueError):
        return {}


def write_identities(cloud_dir: Path, want: Desired, generation: int) -> tuple[str, set[str]]:
    """Write the identities file for `want`; the canary key of this generation and the retired keys."""
    previous = _applied(cloud_dir)
    retired = set(previous.get("served", [])) | set(want.retired)
    canary = f"NPASYNC{generation:013d}"
    document = identities_document(cloud_dir, want, canary, retired)
    write_atomically(identities_path(cloud_dir), json.dumps(document, indent=1) + "\n", mode=0o600)
    return canary, retired


def apply(cloud_dir: Path, *, force: bool = False, lock_timeout_s: float = 60.0) -> bool:
    """Bring the running server to the database's buckets and keys; False when no server runs or it
    already held them. Raises SeaweedSyncError when the server does not take them."""
    where = endpoints(cloud_dir)
    if where is None:
        return False
    with FileLock(s3_dir(cloud_dir) / "sync.lock", timeout_s=lock_timeout_s):
        want = desired(cloud_dir)
        previous = _applied(cloud_dir)
        if (
            not force
            and previous.get("digest") == want.digest()
            and previous.get("weed_pid") == where.weed_pid
        ):
            return False
        generation = int(previous.get("generation", 0)) + 1
        canary, retired = write_identities(cloud_dir, want, generation)
        reload(where, canary, access_key_secret(cloud_dir, canary))
        sync_buckets(cloud_dir, where, set(want.buckets))
        served = sorted(retired | {key_id for key_id, _ in want.identities})
        state = {
            "digest": want.digest(),
            "weed_pid": where.weed_pid,
            "generation": generation,
            "served": served,
        }
        write_atomically(s3_dir(cloud_dir) / "applied.json", json.dumps(state) + "\n", mode=0o600)
        return True


def reload(where: Endpoints, canary: str, canary_secret: str, timeout_s: float = RELOAD_TIMEOUT_S) -> None:
    """SIGHUP the server (it reloads its identities file) and wait until the canary key of this
    generation is known to it: the file it read is this one."""
    try:
        os.kill(where.weed_pid, signal.SIGHUP)
    except ProcessLookupError:
        raise SeaweedSyncError(f"the SeaweedFS server (pid {where.weed_pid}) is gone") from None
    probe = S3Client(where.s3, ADMIN_REGION, canary, SecretStr(canary_secret), timeout_s=5)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            answer = probe.request("GET", "")
            if answer.error_code() not in ("InvalidAccessKeyId",) and answer.status < 500:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SeaweedSyncError(
                f"the SeaweedFS server did not reload its identities within {timeout_s:g}s"
            )
        time.sleep(0.05)


def listed_buckets(client: S3Client) -> set[str]:
    answer = client.request("GET", "")
    _expect(answer, "list the buckets")
    return {
        e.text or "" for e in ET.fromstring(answer.body).iter() if e.tag.endswith("}Name") or e.tag == "Name"
    }


def sync_buckets(cloud_dir: Path, where: Endpoints, wanted: set[str]) -> None:
    client = admin_client(cloud_dir, where)
    there = listed_buckets(client)
    for name in sorted(wanted - there):
        _expect(client.request("PUT", name), f"create bucket {name}")
    for name in sorted(there - wanted):
        remove_bucket(where, name)


def remove_bucket(where: Endpoints, name: str) -> None:
    """A bucket and everything in it, through the filer (S3's DeleteBucket refuses a non-empty bucket, and
    the storage service's delete takes the data with it)."""
    url = f"http://127.0.0.1:{where.filer_port}/buckets/{name}?recursive=true&ignoreRecursiveError=true"
    request = urllib.request.Request(url, method="DELETE")
    try:
        with urllib.request.urlopen(request, timeout=30):
            pass
    except urllib.error.HTTPError as err:
        if err.code != 404:
            raise SeaweedSyncError(
                f"the local cloud's SeaweedFS filer did not delete bucket {name}: HTTP {err.code}"
            ) from None


def _expect(answer: S3Response, what: str) -> None:
    if answer.status not in (200, 204):
        code = answer.error_code() or f"HTTP {answer.status}"
        raise SeaweedSyncError(f"the local cloud's SeaweedFS server refused to {what}: {code}")


# ---------------------------------------------------------------------------- the storage service's view


def serving(cloud_dir: Path) -> bool:
    """Whether a SeaweedFS server serves this cloud now (its daemon holds the lock and is ready: until then
    it brings the server to the database itself)."""
    return (
        daemon_running(cloud_dir)
        and (s3_dir(cloud_dir) / "ready").exists()
        and endpoints(cloud_dir) is not None
    )


def sync_if_serving(cloud_dir: Path) -> None:
    """After a change to the cloud's buckets, keys or grants: the server takes it before the call returns."""
    if serving(cloud_dir):
        apply(cloud_dir)


def count_objects(cloud_dir: Path, bucket: str) -> int:
    """Every object version, delete marker and multipart upload in progress: what S3 refuses to delete a
    bucket over (the storage service's count)."""
    where = endpoints(cloud_dir)
    if where is None:
        raise SeaweedSyncError("the local cloud's SeaweedFS server is not running")
    client = admin_client(cloud_dir, where)
    count = 0
    for query, entries in (("versions", ("Version", "DeleteMarker")), ("uploads", ("Upload",))):
        marker = ""
        while True:
            answer = client.request("GET", bucket, query=query + marker)
            if answer.status == 404:
                return 0
            _expect(answer, f"list {query} of bucket {bucket}")
            root = ET.fromstring(answer.body)
            count += sum(1 for e in root if e.tag.rpartition("}")[2] in entries)
            if root.findtext("{*}IsTruncated") != "true":
                break
            next_key = root.findtext("{*}NextKeyMarker") or ""
            next_other = (
                root.findtext("{*}NextVersionIdMarker") or root.findtext("{*}NextUploadIdMarker") or ""
            )
            other = "version-id-marker" if query == "versions" else "upload-id-marker"
            marker = "&" + "&".join(
                f"{k}={urllib.parse.quote(v, safe='')}"
                for k, v in (("key-marker", next_key), (other, next_other))
                if v
            )
    return count


def put_object(cloud_dir: Path, bucket: str, key: str, body: bytes) -> None:
    where = endpoints(cloud_dir)
    if where is None:
        raise SeaweedSyncError("the local cloud's SeaweedFS server is not running")
    _expect(
        admin_client(cloud_dir, where).request(
            "PUT", bucket, key, body=body, content_type="application/octet-stream"
        ),
        f"write {bucket}/{key}",
    )


def probe(cloud_dir: Path, bucket: str, key_id: str, secret: str, object_key: str, body: bytes) -> None:
    """Write, read back and delete one object with the presented key, as its holder would: the server
    decides (a wrong secret, a key without the bucket's grant are refused there)."""
    from npa_pulumi.cloud.errors import FailedPrecondition, PermissionDenied

    where = endpoints(cloud_dir)
    if where is None:
        raise SeaweedSyncError("the local cloud's SeaweedFS server is not running")
    client = S3Client(where.s3, ADMIN_REGION, key_id, SecretStr(secret))
    put = client.request("PUT", bucket, object_key, body=body, content_type="application/octet-stream")
    if put.status in (401, 403):
        raise PermissionDenied(
            f"{put.error_code() or 'AccessDenied'}: access key {key_id} on bucket {bucket}"
        )
    _expect(put, f"write the probe object to {bucket}")
    read = client.request("GET", bucket, object_key)
    if read.status != 200 or read.body != body:
        raise FailedPrecondition(f"the probe object in bucket {bucket} did not read back intact")
    _expect(client.request("DELETE", bucket, object_key), f"delete the probe object from {bucket}")
