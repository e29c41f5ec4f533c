"""`--shard K/N`: two shards of one fleet deploy side by side through an S3 backend (two processes, two
HOMEs, as two CI jobs), each exactly the clusters it owns, sharing the project stack single-flight."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from fleet_helpers import CLI, REPO, inventory, npa, write_spec
from s3_support import S3Server

from npa_pulumi.plan.shards import shard_of

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CLUSTERS = ["alpha", "bravo", "charlie", "delta"]
SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: sharded
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - project_id: project-existing1
    clusters:
""" + "".join(f"      - name: {name}\n" for name in CLUSTERS)
PROJECT_STACK = "sharded.project-existing1"


def _stack(cluster: str) -> str:
    return f"{PROJECT_STACK}.{cluster}"


def test_bad_shard_is_rejected_before_anything(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    for bad in ("3/2", "x", "0/1"):
        result = npa("up", "--spec", str(spec), "--shard", bad, "--yes", "--output", "json")
        assert result.code == 2, result.stderr
        assert result.json()["error"]["kind"] == "invalid-shard"
        assert "Traceback" not in result.stderr
    both = npa("destroy", "--spec", str(spec), "--shard", "1/2", "--break-lock", "--yes", "--output", "json")
    assert both.code == 2
    assert "--break-lock cannot be combined with --shard" in both.json()["error"]["message"]


def test_two_shards_deploy_one_fleet_in_parallel(
    isolated_home: Path, tmp_path: Path, s3_backend: tuple[S3Server, str, str]
) -> None:
    server, bucket, backend = s3_backend
    owners = {name: shard_of(_stack(name), 2) for name in CLUSTERS}
    assert set(owners.values()) == {1, 2}, owners  # both shards have work (fixed by the names)
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    passphrase = tmp_path / "passphrase"
    passphrase.write_text(uuid.uuid4().hex + "\n")
    passphrase.chmod(0o600)
    npa("local-cloud", "init", check=True)
    common = ["--spec", str(spec), "--backend", backend, "--passphrase-file", str(passphrase)]

    def shard_env(k: int) -> dict[str, str]:
        home = tmp_path / f"ci-job-{k}"
        home.mkdir()
        return {
            "HOME": str(home),
            "NPA_PULUMI_HOME": str(home / ".npa-pulumi"),
            "PULUMI_HOME": str(home / ".pulumi"),
        }

    jobs = [
        subprocess.Popen(
            [*CLI, "up", *common, "--shard", f"{k}/2", "--yes", "--no-preflight", "--output", "json"],
            cwd=REPO,
            env={**os.environ, **shard_env(k)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in (1, 2)
    ]
    outputs = [job.communicate(timeout=900) for job in jobs]
    for job, (_out, err) in zip(jobs, outputs, strict=True):
        assert job.returncode == 0, err[-3000:]
    documents = [json.loads(out) for out, _err in outputs]
    for k, document in enumerate(documents, start=1):
        mine = {c["cluster_name"]: c["status"] for c in document["clusters"]}
        assert mine == {name: "deployed" for name, owner in owners.items() if owner == k}
        # Both shards needed the project stack; whichever came second found it done (or deployed it
        # first), never failed on the other's lock.
        [project] = [s for s in document["stacks"] if s["kind"] == "project"]
        assert project["status"] in ("deployed", "unchanged")
    assert sorted(c["name"] for c in inventory()["mk8s_clusters"]) == sorted(CLUSTERS)
    assert server.keys(bucket, ".pulumi/locks/") == []

    # Sharded destroy removes each shard's clusters and keeps the project stack; the final unsharded
    # destroy removes it.
    for k in (1, 2):
        destroyed = npa("destroy", *common, "--shard", f"{k}/2", "--yes", "--output", "json")
        assert destroyed.code == 0, destroyed.stderr[-3000:]
        statuses = {s["stack"]: s["status"] for s in destroyed.json()["stacks"]}
        assert statuses == {_stack(n): "destroyed" for n, owner in owners.items() if owner == k}
        assert any("project stacks are kept" in w for w in destroyed.json()["warnings"])
    assert inventory()["mk8s_clusters"] == []
    assert f".pulumi/stacks/npa-fleet/{PROJECT_STACK}.json" in server.keys(bucket, ".pulumi/stacks/")
    final = npa("destroy", *common, "--yes", "--output", "json")
    assert final.code == 0, final.stderr[-3000:]
    assert {s["stack"]: s["status"] for s in final.json()["stacks"]}[PROJECT_STACK] == "destroyed"


def test_a_shard_that_owns_nothing_prints_one_empty_document(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    count = 16
    empty = next(k for k in range(1, count + 1) if all(shard_of(_stack(n), count) != k for n in CLUSTERS))
    for command in ("up", "destroy", "preview"):
        extra = ["--yes"] if command != "preview" else []
        result = npa(command, "--spec", str(spec), "--shard", f"{empty}/{count}", *extra, "--output", "json")
        assert result.code == 0, result.stderr
        document = result.json()  # exactly one JSON document on stdout
        assert (document["command"], document["stacks"], document["ok"]) == (command, [], True)
        assert f"shard {empty}/{count} owns no cluster" in result.stderr
