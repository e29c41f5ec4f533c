"""`npa-pulumi backend init` against a real S3 server (SeaweedFS): a private, versioned bucket, the exact
`--backend` URL (which the engine then accepts), and clear refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_helpers import npa
from s3_support import S3Server

pytestmark = pytest.mark.integration


def test_backend_init_creates_a_versioned_bucket_the_engine_accepts(
    isolated_home: Path, s3_server: S3Server
) -> None:
    first = npa("backend", "init", "--bucket", "team-state", "--endpoint", s3_server.endpoint, "-o", "json")
    assert first.code == 0, first.stderr
    document = first.json()
    url = f"s3://team-state?endpoint={s3_server.endpoint}&region=us-east-1&s3ForcePathStyle=true"
    assert document["backend_url"] == url
    assert (document["created"], document["versioning"]) == (True, "enabled")
    assert set(document["export"]) >= {"PULUMI_BACKEND_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
    client = s3_server.client()
    assert client.get_bucket_versioning(Bucket="team-state")["Status"] == "Enabled"
    grants = client.get_bucket_acl(Bucket="team-state")["Grants"]
    assert all("URI" not in g["Grantee"] for g in grants)  # no group (public) grantee

    again = npa("backend", "init", "--bucket", "team-state", "--endpoint", s3_server.endpoint)
    assert again.code == 0, again.stderr
    assert f"--backend '{url}'" in again.stdout
    assert "exists, verified" in again.stderr
    for result in (first, again):
        assert s3_server.secret_key not in result.stdout + result.stderr
        assert s3_server.access_key not in result.stdout + result.stderr

    # The printed URL is one the engine opens: the (empty) fleet listing works through it.
    listed = npa("stacks", "--backend", url, "--output", "json")
    assert listed.code == 0, listed.stderr
    assert listed.json() == {"stacks": []}


def test_backend_init_refusals(
    isolated_home: Path, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = npa(
        "backend", "init", "--bucket", "team-state", "--cloud", "local", "--region", "x", "-o", "json"
    )
    assert local.code == 2
    assert "project's region" in local.json()["error"]["message"]

    bad_name = npa("backend", "init", "--bucket", "Bad_Name", "--endpoint", s3_server.endpoint, "-o", "json")
    assert bad_name.code == 2 and "bucket name" in bad_name.json()["error"]["message"]

    s3_server.client().create_bucket(Bucket="open-bucket", ACL="public-read")
    public = npa("backend", "init", "--bucket", "open-bucket", "--endpoint", s3_server.endpoint, "-o", "json")
    assert public.code == 1
    assert "grants access to everyone" in public.json()["error"]["message"]

    no_keys = npa(
        "backend",
        "init",
        "--bucket",
        "team-state",
        "--endpoint",
        s3_server.endpoint,
        "-o",
        "json",
        env={"AWS_SECRET_ACCESS_KEY": ""},
    )
    assert no_keys.code == 2
    assert "AWS_SECRET_ACCESS_KEY not set" in no_keys.json()["error"]["message"]
    for result in (local, bad_name, public, no_keys):
        assert "Traceback" not in result.stderr


def test_backend_init_prints_what_keyless_ci_needs(isolated_home: Path, s3_server: S3Server) -> None:
    base = [
        "backend",
        "init",
        "--cloud",
        "nebius",
        "--bucket",
        "team-state",
        "--endpoint",
        s3_server.endpoint,
    ]
    text = npa(*base, "--region", "us-east-1", "--ci-repository", "acme/gpu-fleet")
    assert text.code == 0, text.stderr
    out = text.stdout
    assert "--backend 's3://team-state?" in out  # the bucket's part is unchanged
    assert 'resource "nebius_iam_v1_federated_credentials" "npa_ci_preview"' in out
    assert 'federated_subject_id = "repo:acme/gpu-fleet:pull_request"' in out
    assert 'federated_subject_id = "repo:acme/gpu-fleet:environment:fleet-production"' in out
    assert 'issuer_url = "https://token.actions.githubusercontent.com"' in out
    assert 'name      = "viewers"' in out and 'name      = "editors"' in out
    assert "NEBIUS_PREVIEW_SERVICE_ACCOUNT_ID" in out and "NEBIUS_DEPLOY_SERVICE_ACCOUNT_ID" in out
    assert "id-token: write" in out
    # Each account mints its run's key to the state bucket: admin on a project of its own, the bucket's role.
    for role in ("preview", "deploy"):
        assert f'resource "nebius_iam_v1_access_permit" "npa_ci_{role}_own_keys"' in out
        assert f'resource_id = var.{role}_project_id\n  role        = "admin"' in out
        assert f'resource "nebius_iam_v1_access_permit" "npa_ci_{role}_state"' in out
        assert f"-var {role}_project_id=..." in out
    assert 'resource_id = var.state_bucket_id\n  role        = "storage.object-editor"' in out
    assert "no storage key in GitHub" in out

    document = npa(*base, "--region", "us-east-1", "--ci-repository", "acme/gpu-fleet", "-o", "json")
    assert document.code == 0, document.stderr
    ci = document.json()["ci"]
    assert [a["group"] for a in ci["accounts"]] == ["viewers", "editors"]
    assert ci["environment"] == "fleet-production" and "nebius_iam_v1_group_membership" in ci["terraform"]
    assert [a["project_variable"] for a in ci["accounts"]] == ["preview_project_id", "deploy_project_id"]
    assert "nebius_iam_v1_access_permit" in ci["terraform"]
    for result in (text, document):
        assert s3_server.secret_key not in result.stdout + result.stderr


def test_backend_init_refuses_bad_ci_flags_before_the_bucket(
    isolated_home: Path, s3_server: S3Server
) -> None:
    base = ["backend", "init", "--bucket", "never-made", "--endpoint", s3_server.endpoint, "-o", "json"]
    local = npa(*base, "--ci-repository", "acme/gpu-fleet")
    assert local.code == 2 and "need --cloud nebius" in local.json()["error"]["message"]
    bad = npa(*base, "--cloud", "nebius", "--region", "us-east-1", "--ci-repository", "not-a-repo")
    assert bad.code == 2 and "OWNER/REPO" in bad.json()["error"]["message"]
    names = [b["Name"] for b in s3_server.client().list_buckets().get("Buckets", [])]
    assert "never-made" not in names  # nothing was created
