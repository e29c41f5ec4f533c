"""A team's s3:// backend in the local cloud's own buckets: `backend init --cloud local` (no --endpoint, no
AWS_* exported) starts the simulator's S3 server, makes the bucket and a key for it, and prints the URL and
the shared-credentials profile; the fleet then runs through that URL (the engine and npa-pulumi both sign
with the profile), its checkpoints are objects in the cloud's SeaweedFS, a wrong secret is refused as S3
refuses it, and `local-cloud reset` leaves no server behind."""

from __future__ import annotations

import configparser
import json
import os
import subprocess
import time
import urllib.parse
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from fleet_helpers import REPO, CliResult, npa, write_spec
from pydantic import SecretStr

from npa_pulumi.cloud.nebius.s3 import S3Client
from npa_pulumi.runtime.processes import process_alive
from npa_pulumi.runtime.toolchain import find_pulumi

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: team
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - project_id: project-existing1
    clusters:
      - name: c1
"""
CLUSTER = "team.project-existing1.c1"
PROJECT_STACK = "team.project-existing1"
BUCKET = "team-state"


def _clear_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)


def _keys(client: S3Client, bucket: str) -> list[str]:
    """The bucket's object keys, listed over S3 (whichever server serves the local cloud)."""
    keys: list[str] = []
    token = ""
    while True:
        query = "list-type=2" + (f"&continuation-token={urllib.parse.quote(token, safe='')}" if token else "")
        listed = client.request("GET", bucket, query=query)
        assert listed.status == 200, listed.body
        root = ET.fromstring(listed.body)
        keys += [e.findtext("{*}Key") or "" for e in root if _local(e.tag) == "Contents"]
        token = root.findtext("{*}NextContinuationToken") or ""
        if not token:
            return sorted(keys)


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _server_pid(cloud_dir: Path) -> int:
    return int((cloud_dir / "s3" / "server.pid").read_text().split()[0])


def test_fleet_on_the_local_clouds_own_s3_backend(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clear_aws(monkeypatch)
    cloud_dir = isolated_home / ".npa-pulumi" / "local-cloud"
    init = npa("backend", "init", "--cloud", "local", "--bucket", BUCKET, "-o", "json")
    assert init.code == 0, init.stderr
    document = init.json()
    url, endpoint = document["backend_url"], document["endpoint"]
    assert endpoint.startswith("http://127.0.0.1:")
    assert url == f"s3://{BUCKET}?endpoint={endpoint}&region=us-central1&s3ForcePathStyle=true"
    assert (document["created"], document["versioning"]) == (True, "enabled")
    credentials = Path(document["credentials_file"])
    assert credentials == isolated_home / ".npa-pulumi" / "backend" / f"{BUCKET}.credentials"
    assert document["profile"] == f"npa-{BUCKET}"
    assert credentials.stat().st_mode & 0o777 == 0o600
    assert npa("local-cloud", "s3", "status", "-o", "json", check=True).json()["server"] == "seaweedfs"
    profile = configparser.ConfigParser()
    profile.read(credentials)
    key_id = profile[f"npa-{BUCKET}"]["aws_access_key_id"]
    secret = profile[f"npa-{BUCKET}"]["aws_secret_access_key"]
    assert secret not in init.stdout + init.stderr
    # The bucket is the simulator's, in the dedicated state project.
    shown = npa("local-cloud", "show", "--output", "json", check=True).json()
    state_projects = [p for p in shown["projects"] if p["name"] == "npa-state"]
    assert len(state_projects) == 1
    assert document["project_id"] == state_projects[0]["id"]

    # Text output: the URL and the profile's file and name, never the secret.
    again = npa("backend", "init", "--cloud", "local", "--bucket", BUCKET)
    assert again.code == 0, again.stderr
    assert f"export AWS_SHARED_CREDENTIALS_FILE={credentials} AWS_PROFILE=npa-{BUCKET}" in again.stdout
    assert "exists, verified" in again.stderr
    assert secret not in again.stdout + again.stderr
    assert key_id in credentials.read_text()  # the bucket's key, reused

    passphrase = tmp_path / "passphrase"
    passphrase.write_text("correct-horse-battery-staple\n")
    passphrase.chmod(0o600)
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    env = {"AWS_SHARED_CREDENTIALS_FILE": str(credentials), "AWS_PROFILE": f"npa-{BUCKET}"}
    common = ["--spec", str(spec), "--backend", url, "--passphrase-file", str(passphrase)]
    seen: list[CliResult] = [init, again]

    # A server killed (or stopped) is replaced on the same port by the next command naming the URL.
    os.kill(_server_pid(cloud_dir), 9)
    up = npa("up", *common, "--yes", "--output", "json", env=env)
    seen.append(up)
    assert up.code == 0, up.stderr[-3000:]
    assert {c["stack"]: c["status"] for c in up.json()["clusters"]} == {CLUSTER: "deployed"}
    # The checkpoints are objects in the local cloud's bucket; nothing in the file:// default.
    state_key = S3Client(endpoint, "us-central1", key_id, SecretStr(secret))
    keys = _keys(state_key, BUCKET)
    assert {f".pulumi/stacks/npa-fleet/{s}.json" for s in (PROJECT_STACK, CLUSTER)} <= set(keys)
    assert ".pulumi/meta.yaml" in keys
    assert not any(k.startswith(".pulumi/locks/") for k in keys)
    assert not list((isolated_home / ".npa-pulumi" / "state").glob("**/*.json"))

    status = npa("status", *common, "--output", "json", env=env)
    seen.append(status)
    assert status.code == 0, status.stderr[-3000:]
    assert {c["stack"]: c["status"] for c in status.json()["clusters"]} == {CLUSTER: "deployed"}

    # The plain engine through the printed URL and profile.
    listed = subprocess.run(
        [str(find_pulumi()), "stack", "ls", "--json", "--tag", "npa:fleet=team"],
        cwd=REPO,
        env={**os.environ, **env, "PULUMI_BACKEND_URL": url, "PULUMI_SKIP_UPDATE_CHECK": "true"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert sorted(s["name"] for s in json.loads(listed.stdout)) == sorted([PROJECT_STACK, CLUSTER])

    # S3's refusals: a wrong secret, an unknown key.
    wrong = S3Client(endpoint, "us-central1", key_id, SecretStr("not-the-secret")).request(
        "GET", BUCKET, query="list-type=2"
    )
    assert (wrong.status, wrong.error_code()) == (403, "SignatureDoesNotMatch")
    unknown = S3Client(endpoint, "us-central1", "NPALOCALUNKNOWN00000", SecretStr(secret)).request(
        "GET", BUCKET
    )
    assert (unknown.status, unknown.error_code()) == (403, "InvalidAccessKeyId")
    right = state_key.request("DELETE", BUCKET)
    # the key holds its bucket's object grant: buckets go through the storage service
    assert (right.status, right.error_code()) == (403, "AccessDenied")

    destroy = npa("destroy", *common, "--yes", "--output", "json", env=env)
    seen.append(destroy)
    assert destroy.code == 0, destroy.stderr[-3000:]
    assert {s["stack"]: s["status"] for s in destroy.json()["stacks"]} == {
        CLUSTER: "destroyed",
        PROJECT_STACK: "destroyed",
    }
    left = set(_keys(state_key, BUCKET))
    assert not {f".pulumi/stacks/npa-fleet/{s}.json" for s in (PROJECT_STACK, CLUSTER)} & left, sorted(left)
    # Versioning kept every checkpoint the engine overwrote or deleted: the cluster's is recoverable.
    checkpoint = f".pulumi/stacks/npa-fleet/{CLUSTER}.json"
    listed_versions = S3Client(endpoint, "us-central1", key_id, SecretStr(secret)).request(
        "GET", BUCKET, query="versions"
    )
    assert listed_versions.status == 200
    history = ET.fromstring(listed_versions.body)
    mine = [
        (_local(e.tag), e.findtext("{*}IsLatest"))
        for e in history
        if _local(e.tag) in ("Version", "DeleteMarker") and e.findtext("{*}Key") == checkpoint
    ]
    assert mine[0] == ("DeleteMarker", "true") and ("Version", "false") in mine[1:], mine
    for result in seen:
        assert secret not in result.stdout + result.stderr
    log = "".join(p.read_text() for p in (cloud_dir / "s3").glob("*.log"))
    assert secret not in log and "Signature=" not in log and "Credential=" not in log

    # Reset stops the server: no process left.
    pid = _server_pid(cloud_dir)
    assert process_alive(pid)
    reset = npa("local-cloud", "reset", "--yes")
    assert reset.code == 0, reset.stderr
    deadline = time.monotonic() + 10
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not process_alive(pid)
    stopped = npa("local-cloud", "s3", "status", "--output", "json", check=True).json()
    assert stopped["running"] is False and stopped["endpoint"] == endpoint
