"""The fleet engine under failure: a cloud fault in one cluster (continue-on-error and fail-fast), the CLI
killed mid-`up`, and a fresh machine that has only the backend and the passphrase."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import CLI, REPO, by_stack, inventory, npa, write_spec

from npa_pulumi.runtime.retry import DEFAULT_ATTEMPTS

pytestmark = pytest.mark.integration

THREE_CLUSTERS = """\
apiVersion: npa.fleet/v0.0.1
name: faults
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - project_id: project-existing1
    clusters:
      - name: c1
      - name: c2
      - name: c3
"""


def _clusters(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["cluster_name"]: c for c in document["clusters"]}


def test_fault_in_one_cluster_continue_on_error(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", THREE_CLUSTERS)
    npa("local-cloud", "init", check=True)
    # The recipe's keyed creates retry `unavailable` with backoff: a fault outlasting every attempt of the
    # first cluster's create is what fails it.
    npa(
        "local-cloud",
        "fault",
        "add",
        "--op",
        "create_cluster",
        "--error",
        "unavailable",
        "--count",
        str(DEFAULT_ATTEMPTS),
        check=True,
    )

    first = npa("up", "--spec", str(spec), "--yes", "-j", "1", "--output", "json")
    assert first.code == 1, first.stderr[-3000:]
    clusters = _clusters(first.json())
    assert clusters["c1"]["status"] == "failed"
    assert "unavailable" in (clusters["c1"]["error"] or "").lower()
    assert clusters["c1"]["retry_command"].endswith(
        "--only-projects project-existing1 --only-clusters c1 --yes"
    )
    assert clusters["c2"]["status"] == clusters["c3"]["status"] == "deployed"
    assert len(inventory()["mk8s_clusters"]) == 2

    # The fault is spent: the retry deploys the failed cluster and leaves the others alone.
    second = npa("up", "--spec", str(spec), "--yes", "-j", "1", "--output", "json")
    assert second.code == 0, second.stderr[-3000:]
    clusters = _clusters(second.json())
    assert clusters["c1"]["status"] == "deployed"
    assert clusters["c2"]["status"] == clusters["c3"]["status"] == "unchanged"
    assert len(inventory()["mk8s_clusters"]) == 3


def test_fault_in_one_cluster_fail_fast(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", THREE_CLUSTERS)
    npa("local-cloud", "init", check=True)
    npa("local-cloud", "fault", "add", "--op", "create_cluster", "--error", "quota-exceeded", check=True)

    result = npa("up", "--spec", str(spec), "--yes", "-j", "1", "--fail-fast", "--output", "json")
    assert result.code == 1
    clusters = _clusters(result.json())
    assert clusters["c1"]["status"] == "failed"
    assert clusters["c2"]["status"] == clusters["c3"]["status"] == "skipped"
    assert inventory()["mk8s_clusters"] == []


def test_destroy_failure_is_incomplete_and_retryable(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", THREE_CLUSTERS.replace("      - name: c3\n", ""))
    npa("local-cloud", "init", check=True)
    assert npa("up", "--spec", str(spec), "--yes", "-j", "2", "--output", "json").code == 0
    # The provider retries `unavailable` as the SDK does: a fault outlasting every attempt of one delete.
    npa(
        "local-cloud",
        "fault",
        "add",
        "--op",
        "delete_cluster",
        "--error",
        "unavailable",
        "--count",
        str(DEFAULT_ATTEMPTS),
        check=True,
    )

    failed = npa("destroy", "--spec", str(spec), "--yes", "-j", "1", "--output", "json")
    assert failed.code == 2  # a partial cleanup (issue 18): the receipt names what is left
    assert failed.json()["outcome"] == "partial-cleanup"
    stacks = by_stack(failed.json())
    incomplete = [s for s in stacks.values() if s["status"] == "destroy-incomplete"]
    assert len(incomplete) == 1
    assert incomplete[0]["retry_command"].startswith(f"npa-pulumi destroy --spec {spec}")
    # the project stack stays while one of its clusters is still there
    assert "faults.project-existing1" not in stacks
    assert len(inventory()["mk8s_clusters"]) == 1

    retry = npa(*incomplete[0]["retry_command"].split()[1:], "--output", "json")
    assert retry.code == 0, retry.stderr[-3000:]
    assert inventory()["mk8s_clusters"] == []


def _wait_for(stream_path: Path, needle: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stream_path.exists() and needle in stream_path.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise AssertionError(
        f"{needle!r} did not appear in {stream_path} within {timeout}s:\n"
        f"{stream_path.read_text(errors='replace')[-3000:]}"
    )


def test_killed_up_recovers(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", THREE_CLUSTERS)
    npa("local-cloud", "init", check=True)
    # Slow provisioning keeps the cluster stacks busy long enough to be killed in the middle.
    npa("local-cloud", "set", "provisioning-seconds", "4", check=True)

    stderr_path = tmp_path / "up.stderr"
    with stderr_path.open("w") as stderr:
        proc = subprocess.Popen(
            [*CLI, "up", "--spec", str(spec), "--yes", "-j", "3"],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
            env=dict(os.environ),
        )
        try:
            _wait_for(stderr_path, "faults.project-existing1.c2: updating", timeout=240)
            time.sleep(3)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # the CLI, the engine and terraform: a crashed machine
            proc.wait()

    again = npa("up", "--spec", str(spec), "--yes", "-j", "3", "--output", "json")
    assert again.code == 0, again.stderr[-4000:] + again.stdout[-2000:]
    assert "recovered from an interrupted run" in again.stderr
    assert {c["status"] for c in again.json()["clusters"]} <= {"deployed", "unchanged"}

    cloud = inventory()
    names = sorted(c["name"] for c in cloud["mk8s_clusters"])
    assert names == ["c1", "c2", "c3"], f"orphaned or missing clusters: {names}"
    assert len(cloud["node_groups"]) == 3

    # No pending operations are left in any stack.
    backend = isolated_home / ".npa-pulumi" / "state"
    for checkpoint in (backend / ".pulumi" / "stacks" / "npa-fleet").glob("*.json"):
        deployment = json.loads(checkpoint.read_text()).get("checkpoint", {}).get("latest") or {}
        assert not deployment.get("pending_operations"), checkpoint.name


def test_fresh_machine_with_backend_and_passphrase(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "fleet.yaml", THREE_CLUSTERS.replace("      - name: c3\n", ""))
    backend = f"file://{tmp_path / 'team-backend'}"
    passphrase = tmp_path / "team-passphrase"
    passphrase.write_text("a-team-passphrase-kept-in-a-vault\n")
    passphrase.chmod(0o600)
    cloud_dir = isolated_home / ".npa-pulumi" / "local-cloud"
    npa("local-cloud", "init", check=True)
    common = ["--spec", str(spec), "--backend", backend, "--passphrase-file", str(passphrase)]
    deployed = npa("up", *common, "--yes", "--output", "json")
    assert deployed.code == 0, deployed.stderr[-3000:]

    # A second machine: a new HOME with no work dirs, logs or caches; the same cloud, backend, passphrase.
    other_home = tmp_path / "other-home"
    other_home.mkdir()
    env = {
        "HOME": str(other_home),
        "NPA_PULUMI_HOME": str(other_home / ".npa-pulumi"),
        "PULUMI_HOME": str(other_home / ".pulumi"),
        "NPA_LOCAL_CLOUD_DIR": str(cloud_dir),
    }
    status = npa("status", *common, "--output", "json", env=env)
    assert status.code == 0, status.stderr[-3000:]
    assert {c["status"] for c in status.json()["clusters"]} == {"deployed"}

    destroyed = npa("destroy", *common, "--yes", "--output", "json", env=env)
    assert destroyed.code == 0, destroyed.stderr[-3000:] + destroyed.stdout[-2000:]
    assert set(by_stack(destroyed.json())) == {
        "faults.project-existing1",
        "faults.project-existing1.c1",
        "faults.project-existing1.c2",
    }
    assert inventory()["mk8s_clusters"] == []
    # Nothing of the first machine's work dirs was needed: the Terraform state came from Pulumi state.
    assert (other_home / ".npa-pulumi" / "work").is_dir()
