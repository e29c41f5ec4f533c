"""The S3 server killed during a sharded `up` (issue 61): the fleet's state in the local cloud's own S3
endpoint (SeaweedFS, `backend init --cloud local`); two shards of one `up` run side by side, as two CI jobs
(two HOMEs); once the engine holds a stack lock in the bucket, `weed` is SIGKILLed at a random moment.

Each shard then either finishes (its S3 work was done, or retried) or fails cleanly: exit code 1 and one
JSON document naming what failed, no traceback. The next `up` starts the server again on its port (the
backend URL stays valid) and converges: every stack deployed exactly once (one cluster per spec cluster in
the cloud, one checkpoint per stack in the bucket), no lock left. The smallest fleet that has work in both
shards: two CPU-only clusters in the existing project."""

from __future__ import annotations

import json
import os
import random
import secrets
import signal
import time
import urllib.parse
import xml.etree.ElementTree as ET
from pathlib import Path

from chaos_helpers import Background, CliResult, inventory, npa
from conftest import SEED

from npa_pulumi.plan.shards import shard_of
from npa_pulumi.runtime.processes import process_alive
from npa_pulumi.simulator import seaweed, seaweedd

FLEET, PROJECT, BUCKET = "s3kill", "project-existing1", "chaos-s3kill"
CLUSTERS = ("s1", "s2")
SPEC = f"""\
apiVersion: npa.fleet/v0.0.1
name: {FLEET}
region: us-central1
defaults:
  cpu_nodes: {{count: 1, platform: cpu-d3, preset: 4vcpu-16gb}}
  enable_filestore: false
projects:
  - project_id: {PROJECT}
    clusters:
""" + "".join(f"      - name: {name}\n" for name in CLUSTERS)
STACKS = {f"{FLEET}.{PROJECT}", *(f"{FLEET}.{PROJECT}.{name}" for name in CLUSTERS)}


def _keys(cloud_dir: Path, prefix: str) -> list[str]:
    """The bucket's keys under `prefix` as the server lists them to the cloud's own identity ([] while the
    server is down)."""
    where = seaweed.endpoints(cloud_dir)
    if where is None:
        return []
    query = "list-type=2&max-keys=1000&prefix=" + urllib.parse.quote(prefix, safe="")
    try:
        answer = seaweed.admin_client(cloud_dir, where, timeout_s=5).request("GET", BUCKET, query=query)
    except OSError:
        return []
    if answer.status != 200:
        return []
    root = ET.fromstring(answer.body)
    return sorted(e.findtext("{*}Key") or "" for e in root if e.tag.rpartition("}")[2] == "Contents")


def _job_env(tmp_path: Path, name: str, extra: dict[str, str]) -> dict[str, str]:
    """A CI job of its own (a HOME nobody else uses) on the shared local cloud and state bucket."""
    home = tmp_path / name
    home.mkdir()
    return {
        **extra,
        "HOME": str(home),
        "NPA_PULUMI_HOME": str(home / ".npa-pulumi"),
        "PULUMI_HOME": str(home / ".pulumi"),
    }


def _clean_outcome(run: Background, context: str) -> dict[str, str]:
    """A shard that lost its S3 server mid-run: done, or failed with one JSON document and no traceback."""
    code = run.wait()
    out, err = run.stdout_path.read_text(errors="replace"), run.stderr()
    assert code in (0, 1), f"{context}: exit {code}\n{err[-3000:]}"
    assert "Traceback" not in err, f"{context}: a traceback\n{err[-3000:]}"
    document = json.loads(out)  # exactly one JSON document on stdout, whatever happened
    assert document["ok"] is (code == 0), f"{context}: {document.get('ok')} with exit {code}"
    return {str(s["stack"]): str(s["status"]) for s in document.get("stacks", [])}


def test_the_s3_server_killed_during_a_sharded_up_fails_cleanly_and_the_next_up_converges(
    chaos_home: Path, tmp_path: Path, rng: random.Random
) -> None:
    assert {shard_of(f"{FLEET}.{PROJECT}.{n}", 2) for n in CLUSTERS} == {1, 2}  # both shards have work
    cloud_dir = chaos_home / ".npa-pulumi" / "local-cloud"
    made = npa("backend", "init", "--cloud", "local", "--bucket", BUCKET, "--output", "json", check=True)
    backend = made.json()
    creds = {"AWS_SHARED_CREDENTIALS_FILE": backend["credentials_file"], "AWS_PROFILE": backend["profile"]}
    passphrase = tmp_path / "passphrase"
    passphrase.write_text("s3kill-" + secrets.token_hex(8))
    passphrase.chmod(0o600)
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC)
    common = ["--spec", str(spec), "--backend", backend["backend_url"], "--passphrase-file", str(passphrase)]
    up = ["up", *common, "--yes", "--no-preflight", "--output", "json"]
    try:
        shards = [
            Background.start(
                tmp_path / f"runs-{k}", *up, "--shard", f"{k}/2", env=_job_env(tmp_path, f"job-{k}", creds)
            )
            for k in (1, 2)
        ]
        # The kill lands while the engine works in the bucket: after the first stack lock appears there.
        deadline = time.monotonic() + 300
        while not _keys(cloud_dir, ".pulumi/locks/"):
            assert time.monotonic() < deadline, "no stack lock appeared in the bucket within 300 s"
            assert any(run.proc.poll() is None for run in shards), "both shards ended before any lock"
            time.sleep(0.2)
        delay = rng.uniform(0.0, 3.0)
        time.sleep(delay)
        where = seaweed.endpoints(cloud_dir)
        assert where is not None
        context = f"weed killed {delay:.1f}s after the first lock, seed {SEED}"
        os.kill(where.weed_pid, signal.SIGKILL)
        outcomes = [_clean_outcome(run, f"{context}, shard {k}") for k, run in enumerate(shards, start=1)]
        assert not process_alive(where.weed_pid)

        again = npa(*up, env=creds)
        assert again.code == 0, f"{context}: {_errors(again)}\n{again.why()}"
        statuses = [str(s["stack"]) for s in again.json()["stacks"]]
        assert sorted(statuses) == sorted(STACKS), f"{context}: {statuses} (after {outcomes})"
        assert {s["status"] for s in again.json()["stacks"]} <= {"deployed", "unchanged"}, context
        assert seaweedd.is_running(cloud_dir)
        assert seaweed.endpoint_of(seaweed.recorded_port(cloud_dir) or 0) == backend["endpoint"]
        clusters = sorted(c["name"] for c in inventory()["mk8s_clusters"])
        assert clusters == sorted(CLUSTERS), f"{context}: the cloud holds {clusters}"  # none twice
        checkpoints = _keys(cloud_dir, ".pulumi/stacks/npa-fleet/")
        assert sorted(
            k.rsplit("/", 1)[1].removesuffix(".json") for k in checkpoints if k.endswith(".json")
        ) == (sorted(STACKS)), f"{context}: {checkpoints}"
        assert _keys(cloud_dir, ".pulumi/locks/") == [], f"{context}: a lock left in the bucket"
    finally:
        npa("local-cloud", "reset", "--yes")  # stops the S3 server and its weed


def _errors(result: CliResult) -> dict[str, str]:
    try:
        stacks = result.json().get("stacks", [])
    except ValueError:
        return {}
    return {str(s.get("stack")): str(s.get("error")) for s in stacks if s.get("error")}
