"""The fleet on an s3:// backend served by a real S3 server (SeaweedFS on 127.0.0.1): every command works
through it (the audit trail too: one object per mutating run in the bucket, listed by `audit` with who and
each stack's outcome), the engine's stack locks keep two operators (two HOMEs, two processes) apart on
exactly the stacks one of them holds, and a lock is only taken over when its owner is provably gone or on
--break-lock.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import CLI, REPO, CliResult, inventory, npa, write_spec
from s3_support import S3Server

from npa_pulumi.engine.automation import diy_backend
from npa_pulumi.runtime.processes import process_alive
from npa_pulumi.runtime.toolchain import find_pulumi

pytestmark = pytest.mark.integration

PROJECT = "npa-fleet"


def _spec(cpu_count: int) -> str:
    return f"""\
apiVersion: npa.fleet/v0.0.1
name: team
region: us-central1
defaults:
  cpu_nodes: {{count: {cpu_count}, platform: cpu-d3, preset: 4vcpu-16gb}}
projects:
  - project_id: project-existing1
    clusters:
      - name: c1
      - name: c2
"""


C1 = "team.project-existing1.c1"
C2 = "team.project-existing1.c2"
PROJECT_STACK = "team.project-existing1"


def _clusters(result: CliResult) -> dict[str, dict[str, Any]]:
    return {c["stack"]: c for c in result.json()["clusters"]}


def _passphrase(tmp_path: Path) -> Path:
    path = tmp_path / "passphrase"
    path.write_text("correct-horse-battery-staple-" + uuid.uuid4().hex + "\n")
    path.chmod(0o600)
    return path


def _stack_ls(backend: str, *tags: str) -> list[str]:
    """Plain `pulumi stack ls` in this repository (whose Pulumi.yaml is the npa-fleet project)."""
    cmd = [str(find_pulumi()), "stack", "ls", "--json"]
    for tag in tags:
        cmd += ["--tag", tag]
    proc = subprocess.run(
        cmd,
        cwd=REPO,
        env={**os.environ, "PULUMI_BACKEND_URL": backend, "PULUMI_SKIP_UPDATE_CHECK": "true"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return sorted(s["name"] for s in json.loads(proc.stdout))


def _assert_no_secrets(texts: list[str], *secrets: str) -> None:
    for text in texts:
        for secret in secrets:
            assert secret not in text


def test_fleet_lifecycle_through_s3_backend(
    isolated_home: Path, tmp_path: Path, s3_backend: tuple[S3Server, str, str]
) -> None:
    server, bucket, backend = s3_backend
    spec = write_spec(tmp_path / "fleet.yaml", _spec(1))
    passphrase = _passphrase(tmp_path)
    common = ["--spec", str(spec), "--backend", backend, "--passphrase-file", str(passphrase)]
    npa("local-cloud", "init", check=True)
    seen: list[str] = []

    up = npa("up", *common, "--yes", "--output", "json")
    seen += [up.stdout, up.stderr]
    assert up.code == 0, up.stderr[-3000:]
    assert up.json()["backend"] == backend
    assert {s: c["status"] for s, c in _clusters(up).items()} == {C1: "deployed", C2: "deployed"}
    # The state is in the bucket, none in the default file:// backend.
    keys = server.keys(bucket, f".pulumi/stacks/{PROJECT}/")
    assert {f".pulumi/stacks/{PROJECT}/{s}.json" for s in (PROJECT_STACK, C1, C2)} <= set(keys)
    assert not list((isolated_home / ".npa-pulumi" / "state").glob("**/*.json"))
    # No lock left behind by a finished run.
    assert server.keys(bucket, ".pulumi/locks/") == []

    # The tags the engine keeps beside each checkpoint are read with a GET (status reads every stack's).
    tags = diy_backend.read_tags(backend, PROJECT, C1)
    assert isinstance(tags, dict) and tags.get("npa:fleet") == "team", tags
    assert diy_backend.read_tags(backend, PROJECT, "team.project-existing1.none") is None

    # `pulumi stack ls` through the same backend, filtered by the npa tags the run set.
    assert _stack_ls(backend, "npa:fleet=team") == sorted([PROJECT_STACK, C1, C2])
    assert _stack_ls(backend, "npa:kind=cluster") == sorted([C1, C2])
    # Listed from the bucket's keys (a LIST a page), as the engine's `stack ls` (which reads every stack).
    assert diy_backend.stack_names(backend, PROJECT) == _stack_ls(backend) == sorted([PROJECT_STACK, C1, C2])
    stacks = npa("stacks", "--backend", backend, "--fleet", "team", "--output", "json", check=True)
    assert sorted(s["name"] for s in stacks.json()["stacks"]) == sorted([PROJECT_STACK, C1, C2])

    again = npa("up", *common, "--yes", "--output", "json")
    seen += [again.stdout, again.stderr]
    assert again.code == 0, again.stderr[-3000:]
    assert {s["stack"]: s["status"] for s in again.json()["stacks"]} == {
        PROJECT_STACK: "unchanged",
        C1: "unchanged",
        C2: "unchanged",
    }

    status = npa("status", *common, "--output", "json")
    seen += [status.stdout, status.stderr]
    assert status.code == 0, status.stderr[-3000:]
    assert {s: c["status"] for s, c in _clusters(status).items()} == {C1: "deployed", C2: "deployed"}

    preview = npa("preview", *common, "--no-preflight", "--output", "json")
    seen += [preview.stdout, preview.stderr]
    assert preview.code == 0, preview.stderr[-3000:]
    assert {s["stack"]: s["status"] for s in preview.json()["stacks"]} == {
        PROJECT_STACK: "no-changes",
        C1: "no-changes",
        C2: "no-changes",
    }

    destroy = npa("destroy", *common, "--yes", "--output", "json")
    seen += [destroy.stdout, destroy.stderr]
    assert destroy.code == 0, destroy.stderr[-3000:]
    assert {s["stack"]: s["status"] for s in destroy.json()["stacks"]} == {
        C1: "destroyed",
        C2: "destroyed",
        PROJECT_STACK: "destroyed",
    }
    assert _stack_ls(backend) == [] == diy_backend.stack_names(backend, PROJECT)
    assert inventory()["mk8s_clusters"] == []

    # ---- the audit trail lives in the bucket beside the stacks: one object per run, never in file://
    audit_keys = server.keys(bucket, f".pulumi/npa-audit/{PROJECT}/team/")
    assert len(audit_keys) == 3 and all(k.endswith(".json") for k in audit_keys)
    assert not (isolated_home / ".npa-pulumi" / "state" / ".pulumi" / "npa-audit").exists()
    listed = npa("audit", "--spec", str(spec), "--backend", backend, "--output", "json")
    seen += [listed.stdout, listed.stderr]
    assert listed.code == 0, listed.stderr[-3000:]
    records = listed.json()["records"]
    assert [r["command"] for r in records] == ["up", "up", "destroy"]
    assert {r["who"]["principal"] for r in records} == {"local-cloud-user"}
    assert all(r["who"]["os_user"] and r["spec_digest"].startswith("sha256:") for r in records)
    assert [{s["stack"]: s["status"] for s in r["stacks"]} for r in records] == [
        {PROJECT_STACK: "deployed", C1: "deployed", C2: "deployed"},
        {PROJECT_STACK: "unchanged", C1: "unchanged", C2: "unchanged"},
        {C1: "destroyed", C2: "destroyed", PROJECT_STACK: "destroyed"},
    ]
    assert [r["outcome"] for r in records] == ["ok", "ok", "ok"]
    text = npa("audit", "--spec", str(spec), "--backend", backend, check=True).stdout
    assert "by local-cloud-user" in text and f"{C2}: destroyed" in text

    logs = [p.read_text() for p in (isolated_home / ".npa-pulumi" / "logs").rglob("*.log")]
    assert logs
    _assert_no_secrets(seen + logs, server.secret_key, passphrase.read_text().strip())


def _other_home(tmp_path: Path, name: str) -> dict[str, str]:
    """Another operator: a HOME of its own (npa home, engine home), the same cloud (the local cloud's
    directory stands in for the shared Nebius tenant) and the same backend."""
    home = tmp_path / name
    home.mkdir()
    return {
        "HOME": str(home),
        "NPA_PULUMI_HOME": str(home / ".npa-pulumi"),
        "PULUMI_HOME": str(home / ".pulumi"),
    }


def _engine_lock(server: S3Server, bucket: str, stack: str, *, host: str, pid: int, user: str) -> str:
    """A stack lock exactly as the engine writes one (backend/diy/lock.go) from a run on `host`."""
    key = f".pulumi/locks/organization/{PROJECT}/{stack}/{uuid.uuid4()}.json"
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    server.put_json(bucket, key, {"pid": pid, "username": user, "hostname": host, "timestamp": now})
    return key


def _gone_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_two_operators_share_a_fleet_through_s3_locks(
    isolated_home: Path, tmp_path: Path, s3_backend: tuple[S3Server, str, str]
) -> None:
    server, bucket, backend = s3_backend
    passphrase = _passphrase(tmp_path)
    operator_b = _other_home(tmp_path, "home-b")
    npa("local-cloud", "init", check=True)

    def args(cpu: int, *extra: str) -> list[str]:
        spec = write_spec(tmp_path / f"fleet-{cpu}.yaml", _spec(cpu))
        base = ["--spec", str(spec), "--backend", backend, "--passphrase-file", str(passphrase)]
        return ["up", *base, "--yes", "--no-preflight", "--output", "json", *extra]

    # A run of this host killed while the engine created two stacks (it locks a stack it creates) left
    # their locks in the bucket, and no stacks: `pulumi cancel` cannot reach those; the first run removes
    # them (their owner is provably gone) and creates the stacks.
    for stack in (PROJECT_STACK, C2):
        _engine_lock(server, bucket, stack, host=socket.gethostname(), pid=_gone_pid(), user="dave")
    first = npa(*args(1))
    assert first.code == 0, first.stderr[-3000:]
    assert first.stderr.count("recovered from an interrupted run: removed a stale lock left by pid") == 2
    assert server.keys(bucket, ".pulumi/locks/") == []

    # Non-overlapping selections of two operators run side by side, each its own process and HOME.
    run_a = subprocess.Popen(
        [*CLI, *args(2, "--only-clusters", "c1")],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    result_b = npa(*args(2, "--only-clusters", "c2"), env=operator_b)
    out_a, err_a = run_a.communicate(timeout=900)
    assert run_a.returncode == 0, err_a[-3000:]
    assert result_b.code == 0, result_b.stderr[-3000:]
    assert {c["stack"]: c["status"] for c in json.loads(out_a)["clusters"]} == {C1: "deployed"}
    assert _clusters(result_b)[C2]["status"] == "deployed"

    # Machine A was killed while updating c1: its engine lock stays in the bucket. Operator B's run fails
    # on exactly that stack, naming the holder, and deploys the other one; the lock is not touched.
    held = _engine_lock(server, bucket, C1, host="machine-a.example", pid=4242, user="alice")
    blocked = npa(*args(3), env=operator_b)
    assert blocked.code == 1, blocked.stderr[-3000:]
    clusters = _clusters(blocked)
    assert clusters[C2]["status"] == "deployed"
    assert clusters[C1]["status"] == "failed"
    error = clusters[C1]["error"]
    assert "pid 4242 on machine-a.example" in error and "user alice" in error and "--break-lock" in error
    # The retry command pastes into a shell as is: the URL's `&`s are quoted.
    retry = shlex.split(clusters[C1]["retry_command"])
    assert retry[retry.index("--backend") + 1] == backend
    assert retry[retry.index("--passphrase-file") + 1] == str(passphrase)
    assert held in server.keys(bucket, ".pulumi/locks/")

    # Only an explicit --break-lock takes it over across hosts.
    broken = npa(*args(3, "--break-lock"), env=operator_b)
    assert broken.code == 0, broken.stderr[-3000:]
    assert _clusters(broken)[C1]["status"] == "deployed"
    assert "broke the lock held by pid 4242 on machine-a.example" in broken.stderr
    assert server.keys(bucket, ".pulumi/locks/") == []

    # A lock of this host whose process is provably gone is recovered without being asked.
    _engine_lock(server, bucket, C2, host=socket.gethostname(), pid=_gone_pid(), user="bob")
    recovered = npa(*args(4), env=operator_b)
    assert recovered.code == 0, recovered.stderr[-3000:]
    assert "removed a stale lock" in recovered.stderr
    assert server.keys(bucket, ".pulumi/locks/") == []

    # A live process of this host keeps its lock, even against --break-lock.
    live = _engine_lock(server, bucket, C2, host=socket.gethostname(), pid=os.getpid(), user="carol")
    refused = npa(*args(5, "--only-clusters", "c2", "--break-lock"), env=operator_b)
    assert refused.code == 1
    assert "alive on this machine" in _clusters(refused)[C2]["error"]
    assert live in server.keys(bucket, ".pulumi/locks/")
    _assert_no_secrets([blocked.stdout, blocked.stderr, broken.stderr], server.secret_key)


def _wait_for_update_lock(
    server: S3Server, bucket: str, stack: str, run: subprocess.Popen[str]
) -> dict[str, Any]:
    """The lock `run` holds for its update of `stack` (not one of the brief ones: stack init, tags): the
    same key for 3 s. Returns the lock's content, as the engine wrote it."""
    prefix = f".pulumi/locks/organization/{PROJECT}/{stack}/"
    deadline = time.monotonic() + 180
    seen: list[list[str]] = []
    while len(seen) < 4 or not seen[-1] or any(keys != seen[-1] for keys in seen[-4:]):
        assert run.poll() is None, run.communicate()[1][-3000:]
        assert time.monotonic() < deadline, f"the run never held {stack}'s lock"
        seen.append(server.keys(bucket, prefix))
        time.sleep(1)
    [key] = seen[-1]
    body: dict[str, Any] = json.loads(server.client().get_object(Bucket=bucket, Key=key)["Body"].read())
    return body


@pytest.mark.long
def test_second_operator_fails_on_exactly_the_stack_a_live_run_holds(
    isolated_home: Path, tmp_path: Path, s3_backend: tuple[S3Server, str, str]
) -> None:
    """A real overlap: operator A's `up` is inside c1's update (the cloud is slow to create it) when
    operator B runs `up` of the whole fleet from another HOME. B fails on c1 only, naming A's engine
    process from its lock, deploys c2, and A finishes undisturbed."""
    server, bucket, backend = s3_backend
    passphrase = _passphrase(tmp_path)
    spec = write_spec(tmp_path / "fleet.yaml", _spec(1))
    common = ["--spec", str(spec), "--backend", backend, "--passphrase-file", str(passphrase)]
    npa("local-cloud", "init", check=True)
    npa("local-cloud", "fault", "add", "--op", "create_cluster", "--latency-ms", "30000", check=True)
    run_a = subprocess.Popen(
        [*CLI, "up", *common, "--only-clusters", "c1", "--yes", "--no-preflight", "--output", "json"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        holder = _wait_for_update_lock(server, bucket, C1, run_a)

        result_b = npa(
            "up", *common, "--yes", "--no-preflight", "--output", "json", env=_other_home(tmp_path, "home-b")
        )
        assert result_b.code == 1, result_b.stderr[-3000:]
        clusters = _clusters(result_b)
        assert clusters[C2]["status"] == "deployed"
        assert clusters[C1]["status"] == "failed"
        assert f"pid {holder['pid']} on {holder['hostname']}" in clusters[C1]["error"]
        assert "wait for it to finish" in clusters[C1]["error"]
        out_a, err_a = run_a.communicate(timeout=600)
    finally:
        if run_a.poll() is None:
            run_a.kill()
            run_a.wait()
    assert run_a.returncode == 0, err_a[-3000:]
    assert {c["stack"]: c["status"] for c in json.loads(out_a)["clusters"]} == {C1: "deployed"}
    assert server.keys(bucket, ".pulumi/locks/") == []
    assert sorted(c["name"] for c in inventory()["mk8s_clusters"]) == ["c1", "c2"]


def test_run_killed_mid_up_is_recovered_by_another_operator(
    isolated_home: Path, tmp_path: Path, s3_backend: tuple[S3Server, str, str]
) -> None:
    """Operator A's `up` is killed (the whole process group, as a lost CI runner) inside c1's update: its
    engine lock stays in the bucket. Operator B, on this host, finds the holder provably gone, removes the
    lock, clears the pending operations and converges c1."""
    server, bucket, backend = s3_backend
    passphrase = _passphrase(tmp_path)
    spec = write_spec(tmp_path / "fleet.yaml", _spec(1))
    common = ["--spec", str(spec), "--backend", backend, "--passphrase-file", str(passphrase)]
    npa("local-cloud", "init", check=True)
    npa("local-cloud", "fault", "add", "--op", "create_cluster", "--latency-ms", "20000", check=True)
    run_a = subprocess.Popen(
        [*CLI, "up", *common, "--only-clusters", "c1", "--yes", "--no-preflight", "--output", "json"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        holder = _wait_for_update_lock(server, bucket, C1, run_a)
    finally:
        os.killpg(run_a.pid, signal.SIGKILL)
        run_a.communicate(timeout=60)
    deadline = time.monotonic() + 60
    while process_alive(int(holder["pid"])) and time.monotonic() < deadline:
        time.sleep(0.2)  # the engine notices its parent is gone and exits (a zombie counts as gone)
    left = server.keys(bucket, f".pulumi/locks/organization/{PROJECT}/{C1}/")
    assert left, "the killed run left no lock: nothing to recover"

    recovered = npa(
        "up", *common, "--yes", "--no-preflight", "--output", "json", env=_other_home(tmp_path, "b")
    )
    assert recovered.code == 0, recovered.stderr[-3000:]
    assert {s: c["status"] for s, c in _clusters(recovered).items()} == {C1: "deployed", C2: "deployed"}
    assert f"{C1}: recovered from an interrupted run: removed a stale lock" in recovered.stderr
    assert f"pid {holder['pid']} on {holder['hostname']}" in recovered.stderr
    assert server.keys(bucket, ".pulumi/locks/") == []
    assert sorted(c["name"] for c in inventory()["mk8s_clusters"]) == ["c1", "c2"]


def test_stale_lock_behind_written_outputs_is_seen_by_the_no_op_check(
    isolated_home: Path, tmp_path: Path, s3_backend: tuple[S3Server, str, str]
) -> None:
    """A run killed after its update wrote the outputs leaves a lock in the bucket while the stack's
    fingerprint already matches the spec. The no-op check of `up` reads the lock through S3 (as it reads the
    lock file on file://): a lock of another machine fails that stack naming the holder instead of
    reporting it unchanged; a lock whose process is provably gone is removed and the stack run."""
    server, bucket, backend = s3_backend
    passphrase = _passphrase(tmp_path)
    spec = write_spec(tmp_path / "fleet.yaml", _spec(1))
    up = ["up", "--spec", str(spec), "--backend", backend, "--passphrase-file", str(passphrase)]
    up += ["--yes", "--no-preflight", "--output", "json"]
    npa("local-cloud", "init", check=True)
    first = npa(*up)
    assert first.code == 0, first.stderr[-3000:]

    foreign = _engine_lock(server, bucket, C1, host="ci-runner-7.example", pid=777, user="ci")
    held = npa(*up)
    assert held.code == 1, held.stderr[-3000:]
    statuses = {s["stack"]: s["status"] for s in held.json()["stacks"]}
    assert statuses == {PROJECT_STACK: "unchanged", C1: "failed", C2: "unchanged"}
    assert "pid 777 on ci-runner-7.example, user ci" in _clusters(held)[C1]["error"]
    assert foreign in server.keys(bucket, ".pulumi/locks/")  # never taken over silently
    server.client().delete_object(Bucket=bucket, Key=foreign)

    _engine_lock(server, bucket, C2, host=socket.gethostname(), pid=_gone_pid(), user="bob")
    recovered = npa(*up)
    assert recovered.code == 0, recovered.stderr[-3000:]
    assert _clusters(recovered)[C2]["status"] in ("deployed", "unchanged")
    assert f"{C2}: recovered from an interrupted run: removed a stale lock left by pid" in recovered.stderr
    assert server.keys(bucket, ".pulumi/locks/") == []
    # Nothing left to recover: the next run skips every stack again.
    again = npa(*up)
    assert {s["status"] for s in again.json()["stacks"]} == {"unchanged"}
    _assert_no_secrets([held.stderr, recovered.stderr], server.secret_key)
