"""Crash recovery: `up` killed with SIGKILL at random moments, 3 times quick and 20 times long, alternating
the CLI's process group (as CI cancels a job: the engine dies, its plugin hosts - dynamic providers with
their terraform, policy analyzers - live in process groups of their own and must stop by themselves) and
the whole session (a crashed machine: everything dies at once).

Each trial starts from where the previous one left the fleet and changes the spec (a node group resized,
so replaced; now and then a new cluster), kills `up` at a random moment within the time such an `up`
takes, then runs `up` again. After every trial:
* the second `up` succeeds, and every stale lock and pending operation the kill left was cleared
  automatically and reported as such (a live lock would have been reported with the exact command);
* the simulator holds exactly what the spec asks for: no orphaned cluster, node group, filesystem, GPU
  cluster, network or project, and nothing missing;
* no Terraform state was lost: each cluster stack's Terraform state, kept in Pulumi state, records exactly
  the objects the cloud has, and the work dir holds nothing newer than it.
At the end a second machine (a fresh HOME with only the backend and the passphrase) runs `up --refresh`,
which re-applies every cluster from the Terraform state in Pulumi: it must find nothing to change.
"""

from __future__ import annotations

import json
import random
import secrets
import socket
import subprocess
import time
from pathlib import Path

import pytest
from chaos_helpers import (
    Background,
    CliResult,
    FleetShape,
    assert_converged,
    assert_no_leaks,
    inventory,
    lock_files,
    npa,
    pending_operations,
    secret_values,
)
from conftest import SEED, budget

from npa_pulumi.runtime.processes import wait_while

TRIALS = budget(quick=3, long=20)
BLOCK = "capacityblockgroup-local1"

BASE = f"""\
apiVersion: npa.fleet/v0.0.1
name: crash
region: us-central1
defaults:
  cpu_nodes: {{count: 1, platform: cpu-d3, preset: 4vcpu-16gb}}
  enable_filestore: false
projects:
  - name: crash-alpha
    clusters:
      - name: a1
        cpu_nodes: {{count: CPU_COUNT}}
      - name: a2
        enable_filestore: true
        filestore_disk_size_gibibytes: 64
EXTRA_CLUSTERS
  - project_id: project-existing1
    clusters:
      - name: e1
        gpu_nodes:
          {{count: 2, platform: gpu-rtx6000, preset: 2gpu-48vcpu-436gb, capacity_block_group: {BLOCK}}}
"""


def spec_text(cpu_count: int, extra: int) -> str:
    extras = "".join(f"      - name: x{i}\n" for i in range(extra))
    return BASE.replace("CPU_COUNT", str(cpu_count)).replace("EXTRA_CLUSTERS\n", extras)


def _up_args(spec: Path) -> list[str]:
    return ["up", "--spec", str(spec), "--yes", "-j", "3", "--output", "json"]


def test_sigkill_during_up_recovers_without_orphans_or_lost_state(
    chaos_home: Path, tmp_path: Path, rng: random.Random
) -> None:
    # Provisioning takes a moment in the simulator, so kills also land while terraform waits for a cluster.
    npa("local-cloud", "set", "provisioning-seconds", "1", check=True)
    spec = tmp_path / "fleet.yaml"
    estimate = 25.0  # seconds a full `up` of this fleet takes here; refined by every recovery run
    cpu_count, extra = 1, 0
    killed: list[str] = []
    attempts = 0
    while len(killed) < TRIALS:
        attempts += 1
        assert attempts <= 3 * TRIALS, f"could not kill {TRIALS} runs mid-way (seed {SEED}): {killed}"
        if attempts > 1:
            cpu_count = 3 - cpu_count  # 1 <-> 2: the CPU node group is replaced
            if rng.random() < 0.4 and extra < 3:
                extra += 1  # a new cluster: its stack, work dir and objects are created from nothing
        text = spec_text(cpu_count, extra)
        spec.write_text(text)
        shape = FleetShape.of(text)
        delay = rng.uniform(0.3, 0.9 * estimate)
        context = f"trial {len(killed) + 1}, kill after {delay:.1f}s, seed {SEED}"

        run = Background.start(tmp_path / "runs", *_up_args(spec))
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline and run.proc.poll() is None:
            time.sleep(0.05)
        if run.proc.poll() is not None:
            run.wait()
            estimate = max(3.0, 0.8 * delay)  # it finished first: aim earlier next time
            assert run.proc.returncode == 0, run.stderr()[-3000:]
            assert_converged(shape, f"{context}, finished before the kill")
            continue
        # Alternate the two ways a run dies: the CLI's process group (CI cancelling a job: the engine's
        # plugin hosts survive and must stop their terraform themselves) and the whole session (a crash).
        whole_session = len(killed) % 2 == 1
        running = run.kill(whole_session=whole_session)
        if not whole_session:
            alive = run.wait_for_orphans_to_stop(timeout=30)
            run.kill_leftovers()
            assert alive == [], f"{context}: plugin hosts or terraform outlived the killed run: {alive}"
        left_locks = {p.parent.name for p in lock_files()}
        left_pending = set(pending_operations())
        how = "session" if whole_session else "process group"
        killed.append(f"{delay:.1f}s ({how}): {', '.join(sorted(set(running))) or 'between processes'}")

        started = time.monotonic()
        again = npa(*_up_args(spec))
        estimate = max(estimate, time.monotonic() - started)
        assert again.code == 0, f"{context}: {again.why()}"
        statuses = {s["stack"]: s["status"] for s in again.json()["stacks"]}
        assert set(statuses.values()) <= {"deployed", "unchanged"}, f"{context}: {statuses}"
        for stack in left_locks | left_pending:
            assert f"{stack}: recovered from an interrupted run" in again.stderr, (
                f"{context}: {stack} was left locked={stack in left_locks} pending={stack in left_pending}, "
                f"and the second up did not say it recovered it:\n{again.stderr[-3000:]}"
            )
        assert_converged(shape, context)

    # A second machine: only the backend and the passphrase. `up --refresh` re-applies every cluster from
    # the Terraform state kept in Pulumi state; a lost or stale state would create or replace something.
    before = inventory()
    other = tmp_path / "second-machine"
    env = {
        "HOME": str(other),
        "NPA_PULUMI_HOME": str(other / ".npa-pulumi"),
        "PULUMI_HOME": str(other / ".pulumi"),
    }
    backend = chaos_home / ".npa-pulumi" / "state"
    passphrase = chaos_home / ".npa-pulumi" / "passphrase"
    fresh = npa(
        *_up_args(spec),
        "--refresh",
        "--backend",
        f"file://{backend}",
        "--passphrase-file",
        str(passphrase),
        env=env,
    )
    assert fresh.code == 0, fresh.why()
    changed = {s["stack"]: s["changes"] for s in fresh.json()["stacks"] if s["status"] != "unchanged"}
    assert changed == {}, f"the second machine changed {json.dumps(changed)} (seed {SEED})"
    after = inventory()
    for kind in ("mk8s_clusters", "node_groups", "filesystems", "gpu_clusters", "networks", "projects"):
        assert sorted(o["id"] for o in after[kind]) == sorted(o["id"] for o in before[kind]), kind

    print(f"\ncrash trials (seed {SEED}):\n  " + "\n  ".join(killed))
    assert_no_leaks(chaos_home, secret_values(FleetShape.of(spec.read_text()), [BLOCK]))


def test_a_stale_lock_behind_matching_outputs_is_recovered(chaos_home: Path, tmp_path: Path) -> None:
    """Found by the long campaign: a run killed after the engine wrote a stack's new outputs but before it
    released the lock leaves a fingerprint that matches the spec behind a stale lock. `up` must not skip
    that stack as unchanged (the lock would stay forever): it runs it and recovers the lock."""
    from chaos_helpers import backend_root

    spec = tmp_path / "fleet.yaml"
    text = spec_text(1, 0)
    spec.write_text(text)
    npa(*_up_args(spec), check=True)
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that no longer runs: the killed run's engine
    stack = "crash.crash-alpha.a1"
    lock_dir = backend_root() / ".pulumi" / "locks" / "organization" / "npa-fleet" / stack
    lock_dir.mkdir(parents=True, exist_ok=True)
    (lock_dir / "killed.json").write_text(
        json.dumps(
            {
                "pid": gone.pid,
                "username": "ci",
                "hostname": socket.gethostname(),
                "timestamp": "x",
            }
        )
    )
    again = npa(*_up_args(spec))
    assert again.code == 0, again.why()
    assert f"{stack}: recovered from an interrupted run" in again.stderr, again.stderr[-3000:]
    statuses = {s["stack"]: s["status"] for s in again.json()["stacks"]}
    assert statuses[stack] in ("deployed", "unchanged")
    assert {s for s, v in statuses.items() if s != stack and v != "unchanged"} == set()
    assert_converged(FleetShape.of(text), "after the stale lock behind matching outputs")


KUBE_SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: crashkube
region: us-central1
defaults:
  cpu_nodes: {count: CPU_COUNT, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
projects:
  - name: kube-alpha
    clusters:
      - name: k1
      - name: k2
"""


def _control_planes(cloud_dir: Path) -> dict[str, list[str]]:
    """cluster id -> live processes (agent, etcd, apiserver, ...) running for it, from /proc: every such
    process names its cluster's directory under the local cloud on its command line."""
    import re

    found: dict[str, list[str]] = {}
    pattern = re.compile(
        "(?:"
        + re.escape(str(cloud_dir / "kube"))
        + "/|--cloud-dir "
        + re.escape(str(cloud_dir))
        + " --cluster )"
        r"(mk8scluster-[a-z0-9]+)"
    )
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        match = pattern.search(cmdline)
        if match and state != "Z":
            found.setdefault(match.group(1), []).append(cmdline.split(" ", 1)[0].rsplit("/", 1)[-1])
    return found


def _kill_after(run: Background, delay: float, whole_session: bool, context: str) -> None:
    """SIGKILL `run` after `delay` seconds unless it finished first: its process group (the engine's plugins
    must then stop by themselves) or its whole session (a crash)."""
    deadline = time.monotonic() + delay
    while time.monotonic() < deadline and run.proc.poll() is None:
        time.sleep(0.05)
    if run.proc.poll() is not None:
        run.wait()
        return
    run.kill(whole_session=whole_session)
    if not whole_session:
        alive = run.wait_for_orphans_to_stop(timeout=30)
        run.kill_leftovers()
        assert alive == [], f"{context}: plugins outlived the killed run: {alive}"


def test_sigkill_during_up_leaves_no_orphaned_control_plane(
    chaos_home: Path, tmp_path: Path, rng: random.Random, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a Kubernetes API behind every cluster: whenever `up` dies, each control plane still running
    belongs to a cluster the cloud holds, the next `up` converges with one control plane per cluster, and
    `local-cloud reset` leaves no process behind."""
    monkeypatch.setenv("NPA_LOCAL_CLOUD_KUBERNETES_API", "1")
    cloud_dir = chaos_home / ".npa-pulumi" / "local-cloud"
    spec = tmp_path / "fleet.yaml"
    trials = budget(quick=1, long=5)
    estimate = 30.0
    for trial in range(trials):
        spec.write_text(KUBE_SPEC.replace("CPU_COUNT", str(1 + trial % 2)))
        delay = rng.uniform(2.0, 0.9 * estimate)
        context = f"kube trial {trial + 1}, kill after {delay:.1f}s, seed {SEED}"
        # First the CLI's process group (CI cancelling a job): the engine's plugins, the Go Kubernetes
        # provider among them, must stop by themselves; then the whole session (a crash).
        _kill_after(Background.start(tmp_path / "runs", *_up_args(spec)), delay, trial % 2 == 1, context)

        # An agent whose cluster a dying run rolled back notices within a poll (1 s) and then stops its
        # control plane, each process given a bounded time to exit: on a loaded machine that is seconds.
        def orphans() -> dict[str, list[str]]:
            clusters = {c["id"] for c in inventory()["mk8s_clusters"]}
            return {cid: procs for cid, procs in _control_planes(cloud_dir).items() if cid not in clusters}

        wait_while(lambda: bool(orphans()), timeout_s=30, interval_s=1)
        left = orphans()
        assert left == {}, f"{context}: control planes of clusters the cloud does not hold: {left}"

        again = npa(*_up_args(spec))
        assert again.code == 0, f"{context}: {again.why()}"
        clusters = {c["id"] for c in inventory()["mk8s_clusters"]}
        running = _control_planes(cloud_dir)
        assert set(running) == clusters, f"{context}: clusters {clusters}, control planes {sorted(running)}"
        for cid, procs in running.items():
            assert sorted(set(procs)) == sorted(procs), f"{context}: {cid} runs duplicates: {procs}"
        estimate = max(estimate, 10.0)

    npa("local-cloud", "reset", "--yes", check=True)
    assert _control_planes(cloud_dir) == {}, "local-cloud reset left control-plane processes behind"


def _stack_errors(result: CliResult) -> dict[str, str]:
    """Each failed stack's error from a run's JSON document (a lock's holder, named in full), which a
    truncated stdout in the assertion message would cut."""
    try:
        stacks = result.json().get("stacks", [])
    except ValueError:
        return {}
    return {str(s.get("stack")): str(s.get("error")) for s in stacks if s.get("error")}


S3_SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: s3crash
region: us-central1
defaults:
  cpu_nodes: {count: CPU_COUNT, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
projects:
  - project_id: project-existing1
    clusters:
      - name: s1
      - name: s2
"""


def test_sigkill_during_up_on_the_local_clouds_s3_backend(
    chaos_home: Path, tmp_path: Path, rng: random.Random
) -> None:
    """The fleet's state in the local cloud's own S3 endpoint (`backend init --cloud local`): an `up`
    killed at a random moment leaves its locks in the bucket; the next `up` clears them (their owner is
    provably gone) and converges. The S3 server belongs to the local cloud, not to the run: it outlives
    the kill (or comes back on its port for the next command), and `local-cloud reset` stops it."""
    from npa_pulumi.runtime.processes import process_alive
    from npa_pulumi.simulator import seaweed, seaweedd

    cloud_dir = chaos_home / ".npa-pulumi" / "local-cloud"
    npa("local-cloud", "set", "provisioning-seconds", "1", check=True)
    made = npa(
        "backend", "init", "--cloud", "local", "--bucket", "chaos-state", "--output", "json", check=True
    )
    backend = made.json()
    env = {"AWS_SHARED_CREDENTIALS_FILE": backend["credentials_file"], "AWS_PROFILE": backend["profile"]}
    passphrase = tmp_path / "passphrase"
    passphrase.write_text("chaos-" + secrets.token_hex(8))
    passphrase.chmod(0o600)
    spec = tmp_path / "fleet.yaml"
    common = ["--spec", str(spec), "--backend", backend["backend_url"], "--passphrase-file", str(passphrase)]
    estimate = 20.0
    for trial in range(budget(quick=1, long=4)):
        spec.write_text(S3_SPEC.replace("CPU_COUNT", str(1 + trial % 2)))
        delay = rng.uniform(1.0, 0.9 * estimate)
        context = f"s3 trial {trial + 1}, kill after {delay:.1f}s, seed {SEED}"
        run = Background.start(tmp_path / "runs", "up", *common, "--yes", "--output", "json", env=env)
        _kill_after(run, delay, trial % 2 == 1, context)
        again = npa("up", *common, "--yes", "--output", "json", env=env)
        assert again.code == 0, f"{context}: {_stack_errors(again)}\n{again.why()}"
        states = {c["stack"]: c["status"] for c in again.json()["clusters"]}
        assert set(states.values()) <= {"deployed", "unchanged"}, f"{context}: {states}"
        locks = _bucket_keys(cloud_dir, "chaos-state", ".pulumi/locks/")
        assert locks == [], f"{context}: locks left in the bucket: {locks}"
        assert seaweedd.is_running(cloud_dir)
        assert seaweed.endpoint_of(seaweed.recorded_port(cloud_dir) or 0) == backend["endpoint"]
    pid = seaweedd.status(cloud_dir).pid
    assert pid is not None and process_alive(pid)
    npa("local-cloud", "reset", "--yes", check=True)
    deadline = time.monotonic() + 10
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not process_alive(pid), "local-cloud reset left the S3 server running"


def _bucket_keys(cloud_dir: Path, bucket: str, prefix: str = "") -> list[str]:
    """The current objects of a bucket (the first 1,000 under `prefix`), as the local cloud's S3 server
    lists them to the cloud's own identity."""
    import urllib.parse
    import xml.etree.ElementTree as ET

    from npa_pulumi.simulator import seaweed

    where = seaweed.endpoints(cloud_dir)
    assert where is not None, "the local cloud's S3 server is not running"
    query = "list-type=2&max-keys=1000&prefix=" + urllib.parse.quote(prefix, safe="")
    answer = seaweed.admin_client(cloud_dir, where).request("GET", bucket, query=query)
    assert answer.status == 200, answer.error_code()
    root = ET.fromstring(answer.body)
    return sorted(e.findtext("{*}Key") or "" for e in root if e.tag.rpartition("}")[2] == "Contents")
