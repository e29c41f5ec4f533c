"""A running fake Nebius plus a temporary HOME whose `~/.nebius/config.yaml` points the SDK at it.

The adapter is configured only through supported configuration: a CLI profile (with a `token-file`,
`tenant-id` and `endpoint`), the documented `NPA_NEBIUS_*` variables for routing and plaintext, and
`make_cloud`. Nothing in the adapter is patched.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from npa_pulumi.cloud.factory import make_cloud
from npa_pulumi.cloud.port import CloudPort

from .fake import FakeNebius
from .oidc import PR_SUBJECT, GithubOidc, OidcIssuer, serving_github_oidc
from .s3 import S3Log, serving_s3
from .server import serving

TENANT = "tenant-e00wire"
OTHER_TENANT = "tenant-e00other"
TOKEN = "wire-token-profile-a"
OTHER_TOKEN = "wire-token-profile-b"
STALE_TOKEN = "stale-ambient-token"

# The issue-4 tenant-fixture shape, shared with the local adapter. Seven allowances so that a list
# with the fake's page size of 2 needs four pages; scopes cover tenant, project and unscoped records.
TENANT_FIXTURE: dict[str, Any] = {
    "tenant_id": TENANT,
    "regions": ["eu-north1", "us-central1"],
    "quotas": [
        {"name": "compute.instance.count", "region": "eu-north1", "limit": 100, "usage": 3, "unit": "count"},
        {"name": "compute.instance.gpu.h100", "region": "eu-north1", "limit": 0, "usage": 0, "unit": "gpu"},
        {
            "name": "compute.disk.size.network-ssd",
            "region": "eu-north1",
            "limit": 10 * 1024**4,
            "unit": "byte",
            "usage_percentage": 0.25,  # no exact usage: only the fraction is known
        },
        {"name": "storage.bucket.count", "region": "eu-north1", "limit": 3, "usage": 1, "unit": "count"},
        {"name": "vpc.network.count", "region": "eu-north1", "unit": "count"},  # unlimited
        {
            "name": "compute.instance.count",
            "region": "eu-north1",
            "limit": 10,
            "usage": 0,
            "unit": "count",
            "scope": "project",
            "parent_id": "project-e00existing",
        },
        {
            "name": "compute.instance.count",
            "region": "eu-north1",
            "limit": 5,
            "usage": 0,
            "scope": "unscoped",
        },
    ],
    "capacity_block_groups": [
        {
            "id": "capacityblockgroup-e00h100",
            "region": "eu-north1",
            "platform": "gpu-h100-sxm",
            "fabric": "fabric-3",
            "limit": 16,
            "usage": 8,
            "state": "ACTIVE",
        },
        {
            "id": "capacityblockgroup-e00rtx",
            "region": "eu-north1",
            "platform": "gpu-rtx6000",
            "fabric": "",
            "limit": 8,
            "usage_percentage": 0.5,
            "state": "ACTIVE",
        },
    ],
    "projects": [{"id": "project-e00existing", "name": "existing", "region": "eu-north1"}],
}

FAST = {
    "retry": {"initial_backoff_s": 0.01, "max_backoff_s": 0.05, "jitter": 0.0, "max_attempts": 4},
    "poll_interval_s": 0.01,
    "max_poll_interval_s": 0.05,
    "call_timeout_s": 10.0,
}


@dataclass
class WireWorld:
    fake: FakeNebius
    address: str
    s3_url: str
    s3_log: S3Log
    home: Path
    monkeypatch: pytest.MonkeyPatch
    clouds: list[Any] = field(default_factory=list)

    @property
    def tenant_id(self) -> str:
        return self.fake.tenant_id

    def write_config(self, profiles: dict[str, dict[str, Any]], default: str | None = None) -> Path:
        path = self.home / ".nebius" / "config.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        body: dict[str, Any] = {"profiles": profiles}
        if default is not None:
            body["default"] = default
        path.write_text(yaml.safe_dump(body), encoding="utf-8")
        return path

    def token_file(self, token: str, name: str) -> str:
        path = self.home / ".nebius" / f"{name}.token"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(token, encoding="utf-8")
        return str(path)

    def profile(self, token: str, tenant_id: str | None, name: str) -> dict[str, Any]:
        body: dict[str, Any] = {"endpoint": "api.nebius.cloud", "token-file": self.token_file(token, name)}
        if tenant_id is not None:
            body["tenant-id"] = tenant_id
        return body

    def cloud(self, **options: Any) -> CloudPort:
        """A `nebius` adapter built the way the product builds it, closed at teardown."""
        merged = {**FAST, **options}
        profile = merged.pop("profile", None)
        region = merged.pop("region", "eu-north1")
        cloud = make_cloud("nebius", profile=profile, region=region, **merged)
        self.clouds.append(cloud)
        return cloud

    def close(self) -> None:
        for cloud in self.clouds:
            close = getattr(cloud, "close", None)
            if close is not None:
                close()

    def service_account_credentials(self, project_id: str, name: str = "npa-ci") -> Path:
        """A service account in the fake plus a credentials JSON file for it (SDK format)."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        from .fake import common, iam, new_id

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        sa_id = new_id("serviceaccount")
        kid = new_id("publickey")
        self.fake.service_accounts[sa_id] = iam.ServiceAccount(
            metadata=common.ResourceMetadata(id=sa_id, parent_id=project_id, name=name),
            status=iam.ServiceAccountStatus(active=True),
        )
        public = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.fake.sa_public_keys[kid] = (sa_id, public)
        private = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
        path = self.home / f"{name}.credentials.json"
        path.write_text(
            json.dumps(
                {
                    "subject-credentials": {
                        "type": "JWT",
                        "alg": "RS256",
                        "private-key": private,
                        "kid": kid,
                        "iss": sa_id,
                        "sub": sa_id,
                    }
                }
            ),
            encoding="utf-8",
        )
        return path


AMBIENT = (
    "NEBIUS_IAM_TOKEN",
    "NEBIUS_PROFILE",
    "NEBIUS_ENDPOINT",
    "NPA_REUSE_IAM_TOKEN",
    "NPA_NEBIUS_AUTH",
    "NPA_NEBIUS_SERVICE_ACCOUNT_ID",
    "NPA_NEBIUS_FEDERATED_TOKEN_FILE",
    "NPA_NEBIUS_FEDERATED_AUDIENCE",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
)


@dataclass
class Federation:
    """A CI job's identity: GitHub Actions' OIDC endpoint (in the job's environment) and a service account
    in the fake whose federated credentials trust that issuer and subject."""

    issuer: OidcIssuer
    github: GithubOidc
    request_url: str
    service_account_id: str
    credentials_id: str


@contextmanager
def federation(
    world: WireWorld,
    project_id: str = "project-e00existing",
    *,
    subject: str = PR_SUBJECT,
    trusted_subject: str | None = None,
) -> Iterator[Federation]:
    """Serve GitHub's OIDC endpoint and set the job's variables (ACTIONS_ID_TOKEN_REQUEST_*,
    NPA_NEBIUS_SERVICE_ACCOUNT_ID); the account's credentials trust `trusted_subject` (default: `subject`)."""
    issuer = OidcIssuer()
    github = GithubOidc(issuer, subject=subject)
    account = world.fake.add_service_account(project_id, "npa-ci-preview")
    credentials = world.fake.add_federated_credentials(
        account, issuer.issuer, trusted_subject or subject, issuer.jwks_json()
    )
    with serving_github_oidc(github) as url:
        world.monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_URL", url)
        world.monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", github.request_token)
        world.monkeypatch.setenv("NPA_NEBIUS_SERVICE_ACCOUNT_ID", account)
        yield Federation(issuer, github, url, account, credentials)


@contextmanager
def wire_world(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fixture: dict[str, Any] | None = None,
    *,
    tls: bool = False,
) -> Iterator[WireWorld]:
    """Fake + S3 endpoint + HOME with profile `wire` (tenant TENANT) as the default profile.

    `tls`: serve gRPC over TLS with a throwaway CA passed as NPA_NEBIUS_CA_FILE instead of plaintext.
    """
    fake = FakeNebius.from_fixture(fixture or TENANT_FIXTURE)
    fake.add_tenant(OTHER_TENANT)
    fake.add_token(TOKEN, "useraccount-e00wire", {fake.tenant_id})
    fake.add_token(OTHER_TOKEN, "useraccount-e00other", {OTHER_TENANT})
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)  # may already be the `isolated_home` fixture's HOME (the same path)
    credentials = None
    if tls:
        import grpc

        from .tls import make_pki

        pki = make_pki(tmp_path)
        credentials = grpc.ssl_server_credentials([(pki.server_key, pki.server_chain)])
    with ExitStack() as stack:
        address = stack.enter_context(serving(fake, credentials=credentials))
        s3_url, s3_log = stack.enter_context(serving_s3(fake))
        for name in AMBIENT:
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("NPA_NEBIUS_ENDPOINT", address)
        if tls:
            monkeypatch.setenv("NPA_NEBIUS_CA_FILE", str(pki.ca_file))
            monkeypatch.delenv("NPA_NEBIUS_INSECURE", raising=False)
        else:
            monkeypatch.setenv("NPA_NEBIUS_INSECURE", "1")
        monkeypatch.setenv("NPA_NEBIUS_STORAGE_ENDPOINT", s3_url)
        world = WireWorld(fake, address, s3_url, s3_log, home, monkeypatch)
        # The profile's parent-id is the project whose region an empty spec region resolves to.
        default = {**world.profile(TOKEN, fake.tenant_id, "wire"), "parent-id": "project-e00existing"}
        world.write_config({"wire": default}, default="wire")
        stack.callback(world.close)
        yield world
