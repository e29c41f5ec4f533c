"""`npa-pulumi backend init` against a real S3 server (moto_server): a private, versioned bucket, the exact
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
