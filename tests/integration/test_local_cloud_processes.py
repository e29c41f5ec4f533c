"""The local cloud shared by several processes at once, as the CLI, Pulumi's dynamic-provider host and
terraform's local-exec provisioners share it: distinct IDs, consistent quota, faults armed in one process
and felt in another, and a waiting node group started by capacity another process frees."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from npa_pulumi.simulator import LocalSimulator

pytestmark = pytest.mark.integration

TIGHT = Path(__file__).resolve().parents[1] / "fixtures" / "local_cloud" / "tight-tenant.yaml"
TENANT = "tenant-local"

# A worker: wait for the start signal, then run `body` with `sim` bound; print one JSON line of results.
WORKER = """
import json, os, sys, time
from pathlib import Path
from npa_pulumi.cloud.errors import CloudError
from npa_pulumi.simulator import LocalSimulator
go = Path(os.environ["START_SIGNAL"])
while not go.exists():
    time.sleep(0.005)
sim = LocalSimulator()
results = []
{body}
print(json.dumps(results))
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {
        **os.environ,
        "HOME": str(home),
        "NPA_LOCAL_CLOUD_DIR": str(tmp_path / "cloud"),
        "START_SIGNAL": str(tmp_path / "go"),
    }


def _start(env: dict[str, str], body: str) -> subprocess.Popen[str]:
    code = WORKER.format(body=textwrap.indent(textwrap.dedent(body), ""))
    return subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _run_together(env: dict[str, str], *bodies: str) -> list[tuple[list[object], str]]:
    workers = [_start(env, body) for body in bodies]
    time.sleep(0.3)  # let every interpreter get to the start line
    Path(env["START_SIGNAL"]).touch()
    outcomes = []
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        outcomes.append((json.loads(out.strip().splitlines()[-1]), err))
    return outcomes


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "npa_pulumi.cli.main", "local-cloud", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _api(env: dict[str, str], operation: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "npa_pulumi.simulator.api", operation, "--args", json.dumps(kwargs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _usage(sim: LocalSimulator, name: str, region: str = "us-central1") -> int | None:
    (record,) = [
        q
        for q in sim.list_quota_allowances(TENANT)
        if q["name"] == name and q["region"] == region and q["scope"] == "tenant"
    ]
    usage: int | None = record["usage"]
    return usage


def test_first_use_by_several_processes_seeds_the_database_once(env: dict[str, str]) -> None:
    body = """
    results.append([p["id"] for p in sim.list_projects("tenant-local")])
    """
    outcomes = _run_together(env, body, body, body, body)
    assert all(result == [["project-existing1"]] for result, _ in outcomes)
    announcements = [err for _, err in outcomes if "initialised" in err]
    assert len(announcements) == 1


def test_two_processes_creating_projects_concurrently(env: dict[str, str]) -> None:
    body = """
    for index in range(20):
        project = sim.create_project("tenant-local", f"{name}-{{index}}", "us-central1")
        results.append(project["id"])
    """
    (first, _), (second, _) = _run_together(env, body.format(name="alpha"), body.format(name="beta"))
    assert len(first) == len(second) == 20
    assert len(set(first) | set(second)) == 40  # distinct IDs
    assert all(str(project_id).startswith("project-e00") for project_id in [*first, *second])
    sim = LocalSimulator(Path(env["NPA_LOCAL_CLOUD_DIR"]))
    listed = {p["id"] for p in sim.list_projects(TENANT)}
    assert listed == {*first, *second, "project-existing1"}
    assert _usage(sim, "iam.project.count") == 40


def test_concurrent_creates_never_overrun_a_quota(env: dict[str, str]) -> None:
    LocalSimulator(Path(env["NPA_LOCAL_CLOUD_DIR"])).initialise(TIGHT)  # iam.project.count limit 3
    body = """
    for index in range(5):
        try:
            sim.create_project("tenant-local", f"{name}-{{index}}", "us-central1")
            results.append("created")
        except CloudError as err:
            results.append(err.kind)
    """
    outcomes = _run_together(env, body.format(name="a"), body.format(name="b"), body.format(name="c"))
    kinds = [kind for result, _ in outcomes for kind in result]
    assert kinds.count("created") == 3
    assert kinds.count("quota-exceeded") == 12
    sim = LocalSimulator(Path(env["NPA_LOCAL_CLOUD_DIR"]))
    assert _usage(sim, "iam.project.count") == 3
    assert len(sim.list_projects(TENANT)) == 4  # the three plus the seeded project


def test_a_fault_armed_by_the_cli_hits_another_process(env: dict[str, str]) -> None:
    armed = _cli(env, "fault", "add", "--op", "create_project", "--error", "unavailable", "--count", "2")
    assert armed.returncode == 0, armed.stderr
    args = {"tenant_id": TENANT, "name": "flaky", "region": "us-central1"}
    for _ in range(2):
        refused = _api(env, "create_project", **args)
        assert refused.returncode == 1
        assert json.loads(refused.stdout)["error"]["kind"] == "unavailable"
        assert "create_project(" in refused.stderr  # the request it came from
    created = _api(env, "create_project", **args)
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["result"]["name"] == "flaky"
    listed = _cli(env, "fault", "list", "--output", "json")
    assert json.loads(listed.stdout) == []


def test_injected_latency_applies_in_another_process(env: dict[str, str]) -> None:
    armed = _cli(env, "fault", "add", "--op", "get_project", "--latency-ms", "400", "--count", "1")
    assert armed.returncode == 0, armed.stderr
    started = time.monotonic()
    slow = _api(env, "get_project", project_id="project-existing1")
    assert slow.returncode == 0
    assert time.monotonic() - started >= 0.4


def test_a_waiting_node_group_starts_when_another_process_frees_quota(env: dict[str, str]) -> None:
    sim = LocalSimulator(Path(env["NPA_LOCAL_CLOUD_DIR"]))
    sim.initialise(TIGHT)  # compute.instance.gpu.h200 limit 8: one 8-GPU node
    subnet = sim.list_subnets("project-existing1")[0]["id"]
    cluster = sim.create_cluster("project-existing1", "c1", subnet)
    blocker = sim.create_node_group(cluster["id"], "blocker", 1, "gpu-h200-sxm", "8gpu-128vcpu-1600gb")
    assert blocker["state"] == "RUNNING"
    request = {
        "cluster_id": cluster["id"],
        "name": "waiting",
        "node_count": 1,
        "platform": "gpu-h200-sxm",
        "preset": "8gpu-128vcpu-1600gb",
        "wait": True,
        "wait_timeout_s": 60,
    }
    waiter = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "npa_pulumi.simulator.api",
            "create_node_group",
            "--args",
            json.dumps(request),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not [g for g in sim.list_node_groups(cluster["id"]) if g["name"] == "waiting"]:
        assert time.monotonic() < deadline, "the waiting node group never appeared"
        time.sleep(0.05)
    (waiting,) = [g for g in sim.list_node_groups(cluster["id"]) if g["name"] == "waiting"]
    assert waiting["state"] == "PROVISIONING"
    assert waiting["conditions"][0]["quota"] == "compute.instance.gpu.h200"
    assert waiter.poll() is None  # still waiting
    deleted = _api(env, "delete_node_group", node_group_id=blocker["id"])
    assert deleted.returncode == 0, deleted.stderr
    out, err = waiter.communicate(timeout=60)
    assert waiter.returncode == 0, err
    assert json.loads(out)["result"]["state"] == "RUNNING"
    assert _usage(sim, "compute.instance.gpu.h200") == 8


def _weed_pid(cloud_dir: Path) -> int:
    from npa_pulumi.simulator import seaweed

    where = seaweed.endpoints(cloud_dir)
    assert where is not None, "no weed recorded for the local cloud's S3 server"
    return where.weed_pid


def _gone(pid: int, timeout_s: float = 20.0) -> bool:
    from npa_pulumi.runtime.processes import process_alive

    deadline = time.monotonic() + timeout_s
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not process_alive(pid)


def test_the_s3_server_outlives_its_starter_and_no_weed_outlives_the_server(env: dict[str, str]) -> None:
    """The S3 server (SeaweedFS's `weed` under its daemon, seaweedd.py) belongs to the cloud, not to the
    process that started it; its daemon killed outright takes its `weed` with it, and the next user
    starts it again on the same port with the data; `local-cloud reset` from another process stops both;
    a server whose cloud is deleted stops by itself."""
    import signal

    from npa_pulumi.simulator import db, seaweedd

    cloud_dir = Path(env["NPA_LOCAL_CLOUD_DIR"])
    try:
        started = _cli(env, "s3", "start", "--output", "json")
        assert started.returncode == 0, started.stderr
        state = json.loads(started.stdout)
        assert (state["running"], state["server"]) == (True, "seaweedfs")
        endpoint, daemon, weed = state["endpoint"], state["pid"], _weed_pid(cloud_dir)
        assert seaweedd.is_running(cloud_dir)  # the CLI process is gone; the server is not

        sim = LocalSimulator(cloud_dir)
        bucket = sim.create_bucket("project-existing1", "kept-bucket", "standard", 0)
        sim.put_object(bucket["id"], "kept.txt", "still here")
        os.kill(daemon, signal.SIGKILL)
        assert _gone(weed), "weed outlived its daemon"
        assert seaweedd.ensure_running(cloud_dir) == endpoint  # the same port: backend URLs stay valid
        assert sim.count_bucket_objects(bucket["id"]) == 1

        weed, daemon = _weed_pid(cloud_dir), seaweedd.status(cloud_dir).pid
        reset = _cli(env, "reset", "--yes")
        assert reset.returncode == 0, reset.stderr
        assert not seaweedd.is_running(cloud_dir)
        assert daemon is not None and _gone(daemon) and _gone(weed)

        # the cloud's database deleted under a running server: it notices and stops, its weed with it
        LocalSimulator(cloud_dir).principal()
        seaweedd.ensure_running(cloud_dir)
        weed, daemon = _weed_pid(cloud_dir), seaweedd.status(cloud_dir).pid
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db.db_path(cloud_dir)}{suffix}").unlink(missing_ok=True)
        assert daemon is not None and _gone(daemon) and _gone(weed)
    finally:
        seaweedd.stop(cloud_dir)  # whatever failed, no server outlives the test
