"""`--shard K/N`: two shards of one fleet deploy side by side through an S3 backend (two processes, two
HOMEs, as two CI jobs), each exactly the clusters it owns, sharing the project stack single-flight."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import CLI, REPO, inventory, npa, write_spec
from s3_support import S3Server

from npa_pulumi.plan.shards import shard_of

pytestmark = pytest.mark.integration

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


@pytest.mark.long
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
    for job, (out, err) in zip(jobs, outputs, strict=True):
        assert job.returncode == 0, err[-3000:] + out[-3000:]
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


def _job_env(tmp_path: Path, name: str) -> dict[str, str]:
    """A CI job of its own: a HOME (npa home, engine home) nobody else uses."""
    home = tmp_path / name
    home.mkdir()
    return {
        "HOME": str(home),
        "NPA_PULUMI_HOME": str(home / ".npa-pulumi"),
        "PULUMI_HOME": str(home / ".pulumi"),
    }


def _parallel(tmp_path: Path, runs: list[list[str]]) -> list[dict[str, Any]]:
    """Each argument list as its own process and HOME, side by side (a CI matrix); their JSON documents."""
    jobs = [
        subprocess.Popen(
            [*CLI, *args],
            cwd=REPO,
            env={**os.environ, **_job_env(tmp_path, f"job-{uuid.uuid4().hex[:8]}")},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args in runs
    ]
    outputs = [job.communicate(timeout=900) for job in jobs]
    documents = []
    for job, (out, err) in zip(jobs, outputs, strict=True):
        assert job.returncode in (0, 1), err[-3000:]
        document = json.loads(out)  # one JSON document on stdout, whatever the outcome
        assert job.returncode == 0, err[-3000:]
        documents.append(document)
    return documents


def test_project_stage_then_sharded_cluster_stage_equal_one_full_deploy(
    isolated_home: Path, tmp_path: Path, s3_backend: tuple[S3Server, str, str]
) -> None:
    """The CI matrix's sequence: the clusters stage refuses before the project stage ran (nothing made);
    the project stage deploys only the project stack; two cluster-stage shards deploy the rest side by
    side. Together they are one full deploy: an unsharded `up` finds every stack unchanged (each one's
    fingerprint is what a full deploy records, its live objects run). Destroy goes clusters stage first;
    the projects stage keeps a project whose clusters remain."""
    server, bucket, backend = s3_backend
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    passphrase = tmp_path / "passphrase"
    passphrase.write_text(uuid.uuid4().hex + "\n")
    passphrase.chmod(0o600)
    npa("local-cloud", "init", check=True)
    common = ["--spec", str(spec), "--backend", backend, "--passphrase-file", str(passphrase)]
    up = ["up", *common, "--yes", "--no-preflight", "--output", "json"]

    early = npa(*up, "--stage", "clusters", "--shard", "1/2")
    assert early.code == 1, early.stderr[-3000:]
    assert "not deployed" in early.json()["error"] and "--stage projects" in early.json()["error"]
    assert early.json()["stacks"] == []
    assert inventory()["mk8s_clusters"] == []
    assert server.keys(bucket, ".pulumi/stacks/") == []  # not even an empty stack was made
    bad = npa(*up, "--stage", "projects", "--shard", "1/2")
    assert bad.code == 2 and "cannot be combined with --shard" in bad.json()["error"]["message"]

    projects = npa(*up, "--stage", "projects")
    assert projects.code == 0, projects.stderr[-3000:]
    assert {s["stack"]: s["status"] for s in projects.json()["stacks"]} == {PROJECT_STACK: "deployed"}
    assert inventory()["mk8s_clusters"] == []

    shards = _parallel(tmp_path, [[*up, "--stage", "clusters", "--shard", f"{k}/2"] for k in (1, 2)])
    owners = {name: shard_of(_stack(name), 2) for name in CLUSTERS}
    for k, document in enumerate(shards, start=1):
        statuses = {s["stack"]: s["status"] for s in document["stacks"]}
        assert statuses == {_stack(n): "deployed" for n, owner in owners.items() if owner == k}
    assert sorted(c["name"] for c in inventory()["mk8s_clusters"]) == sorted(CLUSTERS)

    full = npa(*up)
    assert full.code == 0, full.stderr[-3000:]
    assert {s["stack"]: s["status"] for s in full.json()["stacks"]} == {
        PROJECT_STACK: "unchanged",
        **{_stack(n): "unchanged" for n in CLUSTERS},
    }
    status = npa("status", *common, "--output", "json")
    assert {c["stack"]: c["status"] for c in status.json()["clusters"]} == {
        _stack(n): "deployed" for n in CLUSTERS
    }
    project_id = full.json()["projects"][0]["project_id"]
    assert {c["project_id"] for c in status.json()["clusters"]} == {project_id}
    # status --shard: exactly the shard's clusters.
    one = npa("status", *common, "--shard", "1/2", "--output", "json")
    assert {c["cluster_name"] for c in one.json()["clusters"]} == {n for n, o in owners.items() if o == 1}
    # refresh --shard: the shard's cluster stacks only; the shared project stack is left to --stage projects.
    refreshed = npa("refresh", *common, "--shard", "2/2", "--output", "json")
    assert refreshed.code == 0, refreshed.stderr[-3000:]
    assert {s["stack"] for s in refreshed.json()["stacks"]} == {
        _stack(n) for n, o in owners.items() if o == 2
    }
    assert any("refresh --stage projects" in w for w in refreshed.json()["warnings"])

    destroy = ["destroy", *common, "--yes", "--output", "json"]
    kept = npa(*destroy, "--stage", "projects")
    assert kept.code == 0, kept.stderr[-3000:]
    assert kept.json()["stacks"] == []
    network = next(p for p in kept.json()["phases"] if p["phase"] == "network")
    assert network["status"] == "retained" and "--stage clusters" in network["reason"]
    for k in (1, 2):
        gone = npa(*destroy, "--stage", "clusters", "--shard", f"{k}/2")
        assert gone.code == 0, gone.stderr[-3000:]
        assert {s["status"] for s in gone.json()["stacks"]} == {"destroyed"}
    assert inventory()["mk8s_clusters"] == []
    last = npa(*destroy, "--stage", "projects")
    assert last.code == 0, last.stderr[-3000:]
    assert {s["stack"]: s["status"] for s in last.json()["stacks"]} == {PROJECT_STACK: "destroyed"}
    # The engine keeps `.bak` copies of removed checkpoints; no stack is left.
    assert [k for k in server.keys(bucket, ".pulumi/stacks/") if k.endswith(".json")] == []


def test_merged_sharded_previews_equal_an_unsharded_preview(
    isolated_home: Path, tmp_path: Path, s3_backend: tuple[S3Server, str, str]
) -> None:
    """Shards' `preview --output json` documents merged by `preview-merge` give the unsharded preview's
    JSON stacks (same order, statuses, changes, diffs, Terraform plans) and the very same markdown comment."""
    _server, _bucket, backend = s3_backend
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    passphrase = tmp_path / "passphrase"
    passphrase.write_text(uuid.uuid4().hex + "\n")
    passphrase.chmod(0o600)
    npa("local-cloud", "init", check=True)
    common = ["--spec", str(spec), "--backend", backend, "--passphrase-file", str(passphrase)]
    deployed = npa(
        "up", *common, "--yes", "--no-preflight", "--only-clusters", "alpha,bravo", "--output", "json"
    )
    assert deployed.code == 0, deployed.stderr[-3000:]
    # A change to review: bigger CPU pools for the deployed clusters, two clusters still to create.
    write_spec(spec, SPEC.replace("count: 1", "count: 2"))

    preview = ["preview", *common, "--no-preflight"]
    full_md, full_json = tmp_path / "full.md", tmp_path / "full.json"
    unsharded = npa(*preview, "--output", "markdown", "--out", str(full_md), "--json-out", str(full_json))
    assert unsharded.code == 0, unsharded.stderr[-3000:]
    shard_files = []
    for k in (1, 2):
        path = tmp_path / f"preview-{k}.json"
        result = npa(*preview, "--shard", f"{k}/2", "--output", "json", "--out", str(path))
        assert result.code == 0, result.stderr[-3000:]
        assert json.loads(path.read_text())["shard"] == f"{k}/2"
        shard_files.append(str(path))

    merged_md = tmp_path / "merged.md"
    merged = npa(
        "preview-merge",
        *reversed(shard_files),
        "--spec",
        str(spec),
        "--output",
        "markdown",
        "--out",
        str(merged_md),
        "--json-out",
        str(tmp_path / "merged.json"),
    )
    assert merged.code == 0, merged.stderr[-3000:]
    full, combined = json.loads(full_json.read_text()), json.loads((tmp_path / "merged.json").read_text())

    def content(document: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [
            (s["stack"], s["kind"], s["status"], s["changes"], s["diff"], s["policy"], s["terraform"])
            for s in document["stacks"]
        ]

    # Something to compare: every cluster changes (two resized, two new); the project stack does not.
    assert [s[2] for s in content(full) if s[1] == "cluster"] == ["changes"] * len(CLUSTERS)
    assert content(combined) == content(full)
    assert (combined["totals"], combined["ok"], "shard" in combined) == (full["totals"], full["ok"], False)
    assert merged_md.read_text() == full_md.read_text()

    # A missing shard is refused by name, nothing written; so is a document that is no preview.
    partial = npa("preview-merge", shard_files[0], "--output", "json")
    assert partial.code == 2 and "shard(s) 2/2 missing" in partial.json()["error"]["message"]
    not_preview = npa("preview-merge", str(full_json), str(tmp_path / "fleet.yaml"), "--output", "json")
    assert not_preview.code == 2 and "not JSON" in not_preview.json()["error"]["message"]
    assert "Traceback" not in partial.stderr + not_preview.stderr
