"""`--secrets-provider`: stacks created with a key service instead of the passphrase (issue 31 item 2).

A real KMS API holds the key: moto_server's, on 127.0.0.1 (SeaweedFS, the tests' S3 server, has no key
service). The fleet's stacks are created with it: each stack's settings name the provider and keep its data
key encrypted by the key service (no passphrase salt), the checkpoint's secrets are ciphertext, and every
later command opens the stacks through the key service: with the passphrase file replaced by another one,
`status`, a no-op `up` and `destroy` still work. A provider the
engine does not offer is refused before anything is created.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fleet_helpers import npa, write_spec
from s3_support import REGION, S3Server

from npa_pulumi.errors import EXIT_INVALID_INPUT

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: vaulted
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
projects:
  - name: alpha
    object_storage: {enabled: true, storage_class: standard, size_gibibytes: 16}
    clusters:
      - name: one
"""
STACKS = ("vaulted.alpha", "vaulted.alpha.one")


def _kms_url(server: S3Server) -> str:
    import boto3  # type: ignore[import-untyped]

    kms = boto3.client(
        "kms",
        endpoint_url=server.endpoint,
        region_name=REGION,
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
    )
    key_id = kms.create_key(Description="npa-pulumi state")["KeyMetadata"]["KeyId"]
    return f"awskms://{key_id}?region={REGION}&endpoint={server.endpoint}"


def test_stacks_made_with_a_key_service_open_without_the_passphrase(
    isolated_home: Path, kms_server: S3Server, tmp_path: Path
) -> None:
    spec = str(write_spec(tmp_path / "fleet.yaml", SPEC))
    npa("local-cloud", "init", check=True)
    provider = _kms_url(kms_server)

    refused = npa("up", "--spec", spec, "--yes", "--secrets-provider", "vault://nope")
    assert refused.code == EXIT_INVALID_INPUT, refused.stderr
    assert "awskms://" in refused.stderr and "Traceback" not in refused.stderr
    state = isolated_home / ".npa-pulumi" / "state" / ".pulumi" / "stacks" / "npa-fleet"
    assert not state.exists() or not list(state.glob("*.json")), "a refused provider created a stack"

    up = npa("up", "--spec", spec, "--yes", "--secrets-provider", provider, "--output", "json", check=True)
    assert {s["status"] for s in up.json()["stacks"]} == {"deployed"}

    workspace = isolated_home / ".npa-pulumi" / "workspace"
    for stack in STACKS:
        settings = (workspace / f"Pulumi.{stack}.yaml").read_text()
        assert f"secretsprovider: {provider}" in settings and "encryptedkey:" in settings, settings
        assert "encryptionsalt" not in settings  # no passphrase-derived key
        checkpoint = json.loads((state / f"{stack}.json").read_text())
        providers = checkpoint["checkpoint"]["latest"]["secrets_providers"]
        assert providers["type"] == "cloud" and providers["state"]["url"] == provider
    project_checkpoint = (state / "vaulted.alpha.json").read_text()
    assert "storage_secret_access_key" in project_checkpoint and "ciphertext" in project_checkpoint

    # Another passphrase from here on: the stacks open through the key service, not the passphrase.
    passphrase = isolated_home / ".npa-pulumi" / "passphrase"
    passphrase.write_text("not-the-one-the-stacks-were-made-with\n")
    status = npa("status", "--spec", spec, "--output", "json", check=True)
    assert {c["status"] for c in status.json()["clusters"]} == {"deployed"}
    again = npa("up", "--spec", spec, "--yes", "--output", "json", check=True)
    assert {s["status"] for s in again.json()["stacks"]} == {"unchanged"}
    destroyed = npa("destroy", "--spec", spec, "--yes", "--output", "json")
    assert destroyed.code == 0, destroyed.stderr[-4000:]
