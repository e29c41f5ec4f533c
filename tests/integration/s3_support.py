"""A real S3 server for backend tests: SeaweedFS (`weed server -s3`, built by `make tools`) on 127.0.0.1, one
per test worker (it takes ~10 s to start), emptied for every test: its buckets deleted and its identities
back to one administrator, whose key a test exports as a user would (`s3_server`) or keeps to itself while
it makes keys allowed one bucket only (`keyed_s3`). The local cloud's own S3 server is another SeaweedFS
(npa_pulumi/simulator/seaweedd.py); this one has no cloud behind it."""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from npa_pulumi.simulator.seaweedd import Standalone, identity, revoked

REGION = "us-east-1"
BUCKET_ACTIONS = ("Read", "Write", "List", "Tagging", "ReadAcp", "WriteAcp", "PutBucketVersioning")


@dataclass(frozen=True)
class S3Server:
    endpoint: str  # http://127.0.0.1:PORT
    access_key: str
    secret_key: str

    @property
    def env(self) -> dict[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": REGION,
        }

    def client(self) -> Any:
        import boto3  # type: ignore[import-untyped]

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
        )

    def backend_url(self, bucket: str) -> str:
        """The Pulumi engine's s3:// URL for this server (gocloud.dev's s3blob with the AWS SDK v2:
        `endpoint` takes the scheme, `s3ForcePathStyle` is the legacy spelling of `use_path_style`)."""
        return f"s3://{bucket}?endpoint={self.endpoint}&region={REGION}&s3ForcePathStyle=true"

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(obj["Key"] for page in pages for obj in page.get("Contents", []))

    def put_json(self, bucket: str, key: str, body: dict[str, Any]) -> None:
        self.client().put_object(Bucket=bucket, Key=key, Body=json.dumps(body).encode())


@dataclass
class Worker:
    """This worker's SeaweedFS server, its administrator's key, and every key it ever served (a reload
    does not forget one left out: each stays, revoked)."""

    server: Standalone
    admin: tuple[str, str]
    served: set[str] = field(default_factory=set)

    def reset(self) -> None:
        """No bucket, and no identity but the administrator's: a test starts on an empty server."""
        self.set_identities([])
        for name in S3Server(self.server.endpoint, *self.admin).client().list_buckets().get("Buckets", []):
            url = (
                f"http://127.0.0.1:{self.server.where.filer_port}/buckets/{name['Name']}"
                "?recursive=true&ignoreRecursiveError=true"
            )
            with urllib.request.urlopen(urllib.request.Request(url, method="DELETE"), timeout=30):
                pass

    def set_identities(self, live: list[dict[str, Any]]) -> None:
        keys = {entry["credentials"][0]["accessKey"] for entry in live}
        self.server.set_identities(self.admin, [*live, *(revoked(k) for k in sorted(self.served - keys))])
        self.served |= keys


@pytest.fixture(scope="session")
def _seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    admin = ("NPATESTADMIN" + secrets.token_hex(4).upper(), secrets.token_urlsafe(30))
    server = Standalone.start(tmp_path_factory.mktemp("seaweedfs"), admin)
    try:
        yield Worker(server, admin)
    finally:
        server.stop()


@pytest.fixture
def s3_server(_seaweedfs: Worker, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The worker's SeaweedFS, emptied; its administrator's credentials in the environment (as a user
    would export them)."""
    _seaweedfs.reset()
    server = S3Server(_seaweedfs.server.endpoint, *_seaweedfs.admin)
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)
    return server


@dataclass(frozen=True)
class KeyedS3:
    """The S3 server with keys the test makes: each user's keys may do anything in its one bucket and
    nothing elsewhere (what a Nebius storage role on a bucket grants); a deleted key is refused. `server`
    signs with the administrator's key."""

    server: S3Server
    worker: Worker
    users: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)  # user: (bucket, keys)

    def add_user(self, name: str, bucket: str) -> None:
        """A user whose keys may do anything in `bucket` only."""
        self.users[name] = (bucket, {})

    def grant(self, user: str, bucket: str) -> None:
        """The user's keys may do anything in `bucket`, and nothing elsewhere (replaces an earlier grant)."""
        self.users[user] = (bucket, self.users[user][1])
        self._apply()

    def new_key(self, user: str) -> tuple[str, str]:
        key_id, secret = "NPATEST" + secrets.token_hex(6).upper(), secrets.token_urlsafe(30)
        self.users[user][1][key_id] = secret
        self._apply()
        return key_id, secret

    def delete_key(self, user: str, key_id: str) -> None:
        del self.users[user][1][key_id]
        self._apply()

    def keys_of(self, user: str) -> list[str]:
        return sorted(self.users[user][1])

    def client_with(self, key_id: str, secret: str) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.server.endpoint,
            region_name=REGION,
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
        )

    def _apply(self) -> None:
        live = [
            identity(key_id, key_id, secret, [f"{action}:{bucket}" for action in BUCKET_ACTIONS])
            for bucket, keys in self.users.values()
            for key_id, secret in keys.items()
        ]
        self.worker.set_identities(live)


@pytest.fixture
def keyed_s3(_seaweedfs: Worker, monkeypatch: pytest.MonkeyPatch) -> KeyedS3:
    """The worker's SeaweedFS, emptied (see KeyedS3), and no AWS credentials in the environment."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_SHARED_CREDENTIALS_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    _seaweedfs.reset()
    return KeyedS3(S3Server(_seaweedfs.server.endpoint, *_seaweedfs.admin), _seaweedfs)


@pytest.fixture
def s3_backend(s3_server: S3Server) -> tuple[S3Server, str, str]:
    """A fresh state bucket on the server: (server, bucket, the --backend URL)."""
    bucket = "npa-state-" + secrets.token_hex(4)
    s3_server.client().create_bucket(Bucket=bucket)
    return s3_server, bucket, s3_server.backend_url(bucket)


# ------------------------------------------------------------------------------------- a key service

MOTO_SERVER = Path(sys.executable).parent / "moto_server"


@contextmanager
def _moto(tmp_path: Path) -> Iterator[str]:
    """moto_server on a free 127.0.0.1 port, stopped on the way out; yields its endpoint."""
    if not MOTO_SERVER.exists():
        pytest.fail(f"{MOTO_SERVER} is missing: install the dev extras (moto[server])")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    log = tmp_path / "moto_server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"moto_server exited {proc.returncode}: {log.read_text()[-2000:]}")
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"moto_server did not listen on 127.0.0.1:{port} within 60 s")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def kms_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    """A key service (AWS KMS's API) for `--secrets-provider awskms://`, credentials in the environment:
    moto_server's KMS, the one thing moto stays for (SeaweedFS serves S3, not a key service)."""
    with _moto(tmp_path) as endpoint:
        server = S3Server(endpoint, "AKIA" + secrets.token_hex(8).upper(), secrets.token_hex(20))
        for name, value in server.env.items():
            monkeypatch.setenv(name, value)
        yield server
