"""The local nebius provider killed mid-apply, on the default recipe (issue 56): upstream k8s-training applied
by terraform against the local cloud's providers.

`up` is started with a provisioning time per object, so terraform's create of the cluster waits inside the
nebius provider (the Go shim `terraform-provider-nebius` and its Python worker) while the cluster already
exists in the cloud. The test waits until the cloud holds the cluster, then SIGKILLs every nebius provider
process serving this test's local cloud (found under /proc by the cloud directory in its environment), as an
OOM kill or a crashed provider would. Terraform answers "Plugin did not respond", records nothing for the
cluster (the create never returned) and `up` fails. Then:

* nothing is orphaned: no provider, worker or terraform process of the run is left (the worker dies with its
  provider through PDEATHSIG; terraform and the engine end with the failed run);
* the next `up` is killed the same way while it creates the node group (the cluster's create is retried first,
  since terraform's state lacks it), and the `up` after that converges.

What the retried creates get: the local provider sends an idempotency key derived from the caller (the
terraform working directory, i.e. this stack's) and the request, so the same stack repeating the identical
create after a crash is answered with the object its first attempt made (a replay), while anyone else's
create of that name fails AlreadyExists (`test_upstream_journey`). So the fleet converges with exactly one
cluster, the one the first, killed `up` created, and exactly the node group the spec asks for. (The real
provider sends a fresh key per call, so on Nebius the retried create fails AlreadyExists: docs/local-cloud.md,
"Faults", says what the local cloud cannot show there.)
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from chaos_helpers import (
    Background,
    inventory,
    lock_files,
    npa,
    pending_operations,
    terraform_state_of,
    tf_resource_addresses,
)

from npa_pulumi.simulator import LocalSimulator

PROJECT = "project-existing1"
STACK = "crashup.project-existing1.c1"
SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: crashup
region: us-central1
projects:
  - project_id: project-existing1
    clusters:
      - name: c1
        cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
"""
# Long enough for the poll below to see the object while its create still waits in the provider.
PROVISIONING_S = 5
PROVIDER = "terraform-provider-nebius"
WORKER = "npa_pulumi.simulator.tfproviders"


def _cloud_dir() -> Path:
    return Path(os.environ["NPA_LOCAL_CLOUD_DIR"])


def _ours(pid: int) -> bool:
    """Whether the process acts on this test's local cloud (other runs share the machine)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"NPA_LOCAL_CLOUD_DIR={_cloud_dir()}".encode() in environ


def _processes(marker: str) -> list[int]:
    """Live processes of this test's local cloud whose command line contains `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and _ours(int(entry.name)):
            found.append(int(entry.name))
    return found


def _leftovers() -> list[str]:
    """Every provider, worker or terraform process still acting on this test's local cloud."""
    left = []
    for marker in ("terraform-provider-", WORKER, "terraform apply", "terraform plan"):
        left += [f"{pid}: {marker}" for pid in _processes(marker)]
    return sorted(left)


def _wait_for(what: str, found: Callable[[], object], run: Background, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not found():
        if run.proc.poll() is not None:
            pytest.fail(f"`up` ended before {what}: exit {run.proc.returncode}\n{run.stderr()[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout:g} s\n{run.stderr()[-3000:]}")
        time.sleep(0.1)


def _kill_the_nebius_provider(run: Background, what: str) -> None:
    """SIGKILL every nebius provider process serving this cloud while `up` creates `what`."""
    sim = LocalSimulator(_cloud_dir(), auto_init=False)
    if what == "cluster":
        _wait_for("cluster in the cloud", lambda: sim.list_clusters(PROJECT), run)
    else:
        _wait_for(
            "node group in the cloud",
            lambda: any(sim.list_node_groups(c["id"]) for c in sim.list_clusters(PROJECT)),
            run,
        )
    providers = _processes(PROVIDER)
    assert providers, f"no {PROVIDER} process of this cloud while its {what} is created"
    assert _processes(WORKER), "the nebius provider runs no worker while it creates"
    for pid in providers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _failed_up(tmp_path: Path, spec: Path, what: str) -> None:
    run = Background.start(tmp_path / "runs", "up", "--spec", str(spec), "--yes", "--output", "json")
    _kill_the_nebius_provider(run, what)
    code = run.wait(timeout=600)
    assert code == 1, f"`up` with its provider killed while creating the {what} exited {code}"
    stacks = {s["stack"]: s["status"] for s in json.loads(run.stdout_path.read_text())["stacks"]}
    assert stacks[STACK] == "failed", stacks
    # Nothing orphaned: the run's session is empty once `up` has returned, and no provider, worker or
    # terraform of this cloud lives anywhere else (a worker reparented to init would show here).
    assert run.session_processes() == {}, f"left in the run's session: {run.session_processes()}"
    assert _leftovers() == [], f"left acting on the local cloud after the {what} kill: {_leftovers()}"


def test_a_provider_killed_mid_apply_orphans_nothing_and_the_next_up_converges_on_one_cluster(
    chaos_home: Path, upstream_recipe: Path, tmp_path: Path
) -> None:
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC)
    npa("local-cloud", "set", "provisioning-seconds", str(PROVISIONING_S), check=True, record=False)

    _failed_up(tmp_path, spec, "cluster")
    [first] = inventory()["mk8s_clusters"]  # the cluster the killed create made; terraform lost track of it
    assert first["name"] == "c1" and first["project_id"] == PROJECT
    _failed_up(tmp_path, spec, "node group")

    up = npa("up", "--spec", str(spec), "--yes", "--output", "json")
    assert up.code == 0, up.why()
    cloud = inventory()
    clusters = [c for c in cloud["mk8s_clusters"] if c["project_id"] == PROJECT and c["name"] == "c1"]
    assert [c["id"] for c in clusters] == [first["id"]], "a second cluster, or not the one first created"
    assert len(cloud["mk8s_clusters"]) == 1
    assert sorted(g["name"] for g in cloud["node_groups"]) == ["c1-ng-cpu"]
    [group] = cloud["node_groups"]
    assert group["cluster_id"] == first["id"] and group["state"] == "RUNNING"

    state = terraform_state_of(STACK)
    assert state is not None, f"{STACK} keeps no Terraform state"
    addresses = tf_resource_addresses(state)
    assert addresses.count("nebius_mk8s_v1_cluster.k8s-cluster") == 1
    assert [a for a in addresses if a.startswith("nebius_mk8s_v1_node_group.")] == [
        "nebius_mk8s_v1_node_group.cpu-only"
    ]
    ids = {
        f"{r['type']}.{r['name']}": r["instances"][0]["attributes"]["id"]
        for r in state["resources"]
        if r["type"].startswith("nebius_mk8s_v1_")
    }
    assert ids == {
        "nebius_mk8s_v1_cluster.k8s-cluster": first["id"],
        "nebius_mk8s_v1_node_group.cpu-only": group["id"],
    }
    assert lock_files() == [] and pending_operations() == {}
    assert _leftovers() == []
