"""A real S3 server for backend tests: moto_server (the dev extra `moto[server]`) on a free 127.0.0.1 port,
started and stopped by a fixture, with a bucket made for the Pulumi state."""

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

MOTO_SERVER = Path(sys.executable).parent / "moto_server"
REGION = "us-east-1"


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
        `endpoint` takes the scheme, `s3ForcePathStyle` is the legacy spelling of `use_path_style`; moto
        sends no response checksums, so validating them only when required keeps the SDK quiet)."""
        return (
            f"s3://{bucket}?endpoint={self.endpoint}&region={REGION}&s3ForcePathStyle=true"
            "&response_checksum_validation=when_required"
        )

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(obj["Key"] for page in pages for obj in page.get("Contents", []))

    def put_json(self, bucket: str, key: str, body: dict[str, Any]) -> None:
        self.client().put_object(Bucket=bucket, Key=key, Body=json.dumps(body).encode())


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto_server exited {proc.returncode}: {log.read_text()[-2000:]}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"moto_server did not listen on 127.0.0.1:{port} within {timeout_s}s")


@contextmanager
def _moto(tmp_path: Path) -> Iterator[str]:
    """moto_server on a free 127.0.0.1 port, stopped on the way out; yields its endpoint."""
    if not MOTO_SERVER.exists():
        pytest.fail(f"{MOTO_SERVER} is missing: install the dev extras (moto[server])")
    port = _free_port()
    log = tmp_path / "moto_server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_listening(port, proc, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def s3_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    """moto_server on 127.0.0.1 only, credentials in the environment (as a user would export them)."""
    with _moto(tmp_path) as endpoint:
        server = S3Server(endpoint, "AKIA" + secrets.token_hex(8).upper(), secrets.token_hex(20))
        for name, value in server.env.items():
            monkeypatch.setenv(name, value)
        yield server


ALLOW_ALL = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


@dataclass(frozen=True)
class KeyedS3:
    """moto_server that authenticates every request as S3 does: only an access key of one of its IAM users
    signs, and the signature is checked against that key's secret (moto's IAM access control). `server`
    signs with an administrator's key; keys of other users are made and deleted through `iam()`."""

    server: S3Server

    def iam(self) -> Any:
        import boto3

        return boto3.client(
            "iam",
            endpoint_url=self.server.endpoint,
            region_name=REGION,
            aws_access_key_id=self.server.access_key,
            aws_secret_access_key=self.server.secret_key,
        )

    def add_user(self, name: str, bucket: str) -> None:
        """A user whose keys may do anything in `bucket` only (what a Nebius storage role on it grants)."""
        self.iam().create_user(UserName=name)
        self.grant(name, bucket)

    def grant(self, user: str, bucket: str) -> None:
        """The user's keys may do anything in `bucket`, and nothing elsewhere (replaces an earlier grant)."""
        policy = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": "s3:*",
                    "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
                }
            ],
        }
        self.iam().put_user_policy(UserName=user, PolicyName="bucket", PolicyDocument=json.dumps(policy))

    def new_key(self, user: str) -> tuple[str, str]:
        made = self.iam().create_access_key(UserName=user)["AccessKey"]
        return str(made["AccessKeyId"]), str(made["SecretAccessKey"])

    def delete_key(self, user: str, key_id: str) -> None:
        self.iam().delete_access_key(UserName=user, AccessKeyId=key_id)

    def keys_of(self, user: str) -> list[str]:
        listed = self.iam().list_access_keys(UserName=user)["AccessKeyMetadata"]
        return sorted(str(k["AccessKeyId"]) for k in listed)

    def client_with(self, key_id: str, secret: str) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.server.endpoint,
            region_name=REGION,
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
        )


@pytest.fixture
def keyed_s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KeyedS3]:
    """moto_server with authentication on (see KeyedS3), and no AWS credentials in the environment."""
    import boto3

    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_SHARED_CREDENTIALS_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    with _moto(tmp_path) as endpoint:
        # Until authentication is switched on, moto takes any signature: the administrator is made then.
        bootstrap = boto3.client(
            "iam", endpoint_url=endpoint, region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
        )
        bootstrap.create_user(UserName="admin")
        bootstrap.put_user_policy(UserName="admin", PolicyName="all", PolicyDocument=json.dumps(ALLOW_ALL))
        made = bootstrap.create_access_key(UserName="admin")["AccessKey"]
        switch = urllib.request.Request(
            f"{endpoint}/moto-api/reset-auth",
            data=b"0",  # the count of requests still let through unchecked; not a form (moto reads the body)
            headers={"Content-Type": "application/octet-stream"},
            method="POST",
        )
        with urllib.request.urlopen(switch, timeout=10) as answer:  # from now on every request is checked
            assert answer.status == 200
        yield KeyedS3(S3Server(endpoint, str(made["AccessKeyId"]), str(made["SecretAccessKey"])))


@pytest.fixture
def s3_backend(s3_server: S3Server) -> tuple[S3Server, str, str]:
    """A fresh state bucket on the server: (server, bucket, the --backend URL)."""
    bucket = "npa-state-" + secrets.token_hex(4)
    s3_server.client().create_bucket(Bucket=bucket)
    return s3_server, bucket, s3_server.backend_url(bucket)
