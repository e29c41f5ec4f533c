"""The soperator backend end to end on the local cloud: a fleet with one mk8s and one soperator cluster in
one project deploys both (the soperator one gated on its Slurm cluster being Available with every NodeSet
Ready), `kubectl` with the soperator kubeconfig finds the operator's objects, `status` shows the native
Slurm status, a controller-down fault fails only the soperator target's gate (and clearing it re-runs only
the gate), `destroy` removes both; a recipe lacking a variable the payload needs, and a tenant short of
quota, stop the run before any mutation."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import REPO, by_stack, inventory, npa, write_spec

from npa_pulumi.simulator.kube import binaries

pytestmark = pytest.mark.integration

MIXED = """\
apiVersion: npa.fleet/v0.0.1
name: mixed
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
  gpu_health_timeout_minutes: TIMEOUT
projects:
  - project_id: project-existing1
    clusters:
      - name: train
      - name: slurm
        backend: soperator
        soperator:
          slurm_operator_version: "4.1.6"
          gate_timeout_minutes: TIMEOUT
          workers:
            - {name: cpu, platform: cpu-d3, preset: 16vcpu-64gb, size: 2}
"""
SLURM = "mixed.project-existing1.slurm"
TRAIN = "mixed.project-existing1.train"
KINDS = ("mk8s_clusters", "node_groups", "filesystems", "gpu_clusters", "networks", "subnets", "projects")


def _spec(tmp_path: Path, timeout_minutes: int = 3) -> Path:
    return write_spec(tmp_path / "fleet.yaml", MIXED.replace("TIMEOUT", str(timeout_minutes)))


def _kubectl(kubeconfig: str, *args: str) -> Any:
    kubectl = binaries.find("kubectl")
    assert kubectl is not None, "make tools provides kubectl"
    proc = subprocess.run(
        [str(kubectl), "--kubeconfig", kubeconfig, *args, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_recipe_lacking_a_needed_variable_is_refused_before_any_change(
    isolated_home: Path, tmp_path: Path
) -> None:
    recipe = tmp_path / "soperator-recipe"
    shutil.copytree(REPO / "recipes" / "local-soperator", recipe)
    variables = recipe / "variables.tf"
    text = re.sub(r'variable "slurm_nodeset_workers" \{.*?\n\}\n', "", variables.read_text(), flags=re.S)
    variables.write_text(text)
    npa("local-cloud", "init", check=True)
    before = inventory()
    result = npa(
        "up",
        "--spec",
        str(_spec(tmp_path)),
        "--yes",
        "--soperator-recipe-dir",
        str(recipe),
        "--output",
        "json",
    )
    assert result.code == 2, result.stderr[-3000:]
    error = result.json()["error"]
    assert error["kind"] == "recipe-incompatible"
    assert "does not declare slurm_nodeset_workers" in error["message"] and SLURM in error["message"]
    assert inventory() == before  # nothing was created, the mk8s cluster of the fleet neither


def test_a_shortfall_of_a_soperator_target_stops_the_whole_run(isolated_home: Path, tmp_path: Path) -> None:
    # The short tenant's filesystem quota is used up: the soperator target's spool and jail cannot fit.
    npa(
        "local-cloud",
        "init",
        "--tenant-fixture",
        str(REPO / "examples" / "local-tenant-short.yaml"),
        check=True,
    )
    before = inventory()
    result = npa("up", "--spec", str(_spec(tmp_path)), "--yes", "--output", "json")
    assert result.code == 1, result.stderr[-3000:]
    document = result.json()
    short = {r["name"] for r in document["preflight"]["requirements"] if r["shortfall"]}
    assert "compute.filesystem.count" in short
    assert document["stacks"] == []  # not even the mk8s target next to it ran
    after = inventory()
    for kind in KINDS:
        assert after[kind] == before[kind], f"preflight failure must not create {kind}"


def test_without_an_api_server_both_deploy_and_destroy(isolated_home: Path, tmp_path: Path) -> None:
    """The Terraform half alone (no Kubernetes API: no gate runs): the recipe's objects, the shared
    network, drift-free status, the summary's backend counts, and a clean destroy."""
    spec = _spec(tmp_path)
    npa("local-cloud", "init", check=True)
    up = npa("up", "--spec", str(spec), "--yes", "-j", "2", "--output", "json")
    assert up.code == 0, up.stderr[-3000:]
    document = up.json()
    assert document["backend_counts"] == {"mk8s": 1, "soperator": 1}
    stacks = by_stack(document)
    assert stacks[TRAIN]["status"] == stacks[SLURM]["status"] == "deployed"
    assert stacks[SLURM]["backend"] == "soperator"
    shown = inventory()
    [soperator] = [c for c in shown["mk8s_clusters"] if c["name"] == "soperator-slurm"]
    groups = {g["name"]: g for g in shown["node_groups"] if g["cluster_id"] == soperator["id"]}
    assert sorted(groups) == [
        "soperator-slurm-controller",
        "soperator-slurm-login",
        "soperator-slurm-system",
        "soperator-slurm-worker-cpu-0",
    ]
    roles = {n: g["labels"]["slurm.nebius.ai/node-role"] for n, g in groups.items()}
    assert roles["soperator-slurm-worker-cpu-0"] == "worker"
    assert {f["name"] for f in shown["filesystems"]} == {
        "soperator-slurm-controller-spool",
        "soperator-slurm-jail",
    }
    # One project network for both backends.
    assert {c["subnet_id"] for c in shown["mk8s_clusters"]} == {shown["subnets"][0]["id"]}

    status = npa("status", "--spec", str(spec), "--output", "json")
    assert status.code == 0, status.stderr[-3000:]
    clusters = {c["cluster_name"]: c for c in status.json()["clusters"]}
    assert clusters["slurm"]["status"] == "deployed" and clusters["slurm"]["drift"] == []

    # Preview of a resized worker set: Terraform's own plan for the soperator stack, nothing changed.
    resized = write_spec(tmp_path / "resized.yaml", spec.read_text().replace("size: 2}", "size: 3}"))
    preview = npa("preview", "--spec", str(resized), "--output", "json")
    assert preview.code == 0, preview.stderr[-3000:]
    planned = by_stack(preview.json())
    assert planned[TRAIN]["status"] == "no-changes" and planned[SLURM]["status"] == "changes"
    terraform = planned[SLURM]["terraform"]
    # The worker group (its request changed) and the Slurm cluster's release (its NodeSet grows).
    assert sorted(r["address"] for r in terraform["resources"]) == [
        'terraform_data.node_group["worker-cpu-0"]',
        "terraform_data.slurm_cluster",
    ]

    # Drift: a worker node group deleted outside the fleet is reported, and `up` brings it back.
    worker = groups["soperator-slurm-worker-cpu-0"]["id"]
    npa(
        "local-cloud", "api", "delete_node_group", "--args", json.dumps({"node_group_id": worker}), check=True
    )
    drifted = {
        c["cluster_name"]: c
        for c in npa("status", "--spec", str(spec), "--output", "json").json()["clusters"]
    }
    assert drifted["slurm"]["status"] == "drifted"
    assert [d["address"] for d in drifted["slurm"]["drift"]] == ['terraform_data.node_group["worker-cpu-0"]']
    assert drifted["train"]["status"] == "deployed"
    repaired = npa("up", "--spec", str(spec), "--yes", "--output", "json")
    assert repaired.code == 0, repaired.stderr[-3000:]
    assert by_stack(repaired.json())[TRAIN]["status"] == "unchanged"
    names = [g["name"] for g in inventory()["node_groups"]]
    assert "soperator-slurm-worker-cpu-0" in names

    destroy = npa("destroy", "--spec", str(spec), "--yes", "--output", "json")
    assert destroy.code == 0, destroy.stderr[-3000:]
    assert destroy.json()["receipt"]
    after = inventory()
    assert after["mk8s_clusters"] == after["node_groups"] == after["filesystems"] == []


def test_a_mixed_fleet_deploys_a_usable_slurm_cluster(kube_api: Path, tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    npa("local-cloud", "init", check=True)
    up = npa("up", "--spec", str(spec), "--yes", "-j", "2", "--output", "json")
    assert up.code == 0, up.stderr[-4000:] + up.stdout[-3000:]
    stacks = by_stack(up.json())
    assert stacks[TRAIN]["status"] == stacks[SLURM]["status"] == "deployed"
    slurm = stacks[SLURM]
    assert slurm["validation"] == "slurm" and slurm["health"]["passed"]
    assert slurm["health"]["slurm"]["status"]["phase"] == "Available"

    kubeconfig = slurm["kubeconfig"]
    [cluster] = _kubectl(kubeconfig, "get", "slurmclusters.slurm.nebius.ai", "-A")["items"]
    assert (cluster["metadata"]["namespace"], cluster["metadata"]["name"]) == ("soperator", "soperator")
    assert cluster["status"]["phase"] == "Available"
    assert {c["type"]: c["status"] for c in cluster["status"]["conditions"]}["ControllersAvailable"] == "True"
    [nodeset] = _kubectl(kubeconfig, "get", "nodesets.slurm.nebius.ai", "-n", "soperator")["items"]
    assert nodeset["metadata"]["name"] == "cpu"
    assert nodeset["spec"]["replicas"] == nodeset["status"]["replicas"] == 2
    assert nodeset["status"]["phase"] == "Ready"
    roles = [
        n["metadata"]["labels"].get("slurm.nebius.ai/node-role")
        for n in _kubectl(kubeconfig, "get", "nodes")["items"]
    ]
    assert sorted(roles) == ["controller", "login", "system", "system", "system", "worker", "worker"]

    status = npa("status", "--spec", str(spec), "--output", "json")
    assert status.code == 0, status.stderr[-3000:]
    native = {c["cluster_name"]: c for c in status.json()["clusters"]}["slurm"]["slurm"]
    assert native["source"] == "live" and native["phase"] == "Available"
    assert native["nodesets"] == {"cpu": {"phase": "Ready", "desired": 2, "replicas": 2, "ready": 2}}
    assert native["login_endpoint"].startswith("203.0.113.")

    destroy = npa("destroy", "--spec", str(spec), "--yes", "--output", "json")
    assert destroy.code == 0, destroy.stderr[-3000:]
    after = inventory()
    assert after["mk8s_clusters"] == after["node_groups"] == after["filesystems"] == []


@pytest.mark.long  # make test-long (2+ minutes: the gate waits out its timeout); in make test, the same
# gate's failure on a down controller is tests/unit/simulator/test_local_slurm_operator.py's, and the deploy
# path
# this test's mixed fleet shares is test_a_mixed_fleet_deploys_a_usable_slurm_cluster's
def test_a_controller_down_fault_fails_only_the_soperator_gate(kube_api: Path, tmp_path: Path) -> None:
    spec = _spec(tmp_path, timeout_minutes=1)
    npa("local-cloud", "init", check=True)
    npa("local-cloud", "set", "provisioning-seconds", "3", check=True)
    injected: list[str] = []

    def inject() -> None:
        # As soon as the soperator cluster exists (its node groups are still provisioning; the Slurm
        # cluster is installed after them), its controller goes down.
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not injected:
            found = [c for c in inventory()["mk8s_clusters"] if c["name"] == "soperator-slurm"]
            if found:
                npa(
                    "local-cloud",
                    "fault",
                    "slurm",
                    "--cluster",
                    found[0]["id"],
                    "--kind",
                    "controller-down",
                    check=True,
                )
                injected.append(found[0]["id"])
            time.sleep(0.5)

    thread = threading.Thread(target=inject)
    thread.start()
    up = npa("up", "--spec", str(spec), "--yes", "-j", "2", "--output", "json")
    thread.join()
    assert injected, "the soperator cluster never appeared"
    assert up.code == 1, up.stderr[-4000:]
    stacks = by_stack(up.json())
    assert stacks[TRAIN]["status"] == "deployed", stacks[TRAIN]  # the mk8s target is unaffected
    failed = stacks[SLURM]
    assert failed["status"] == "deployed-validation-failed"
    evidence = failed["health"]
    assert "ControllersAvailable" in evidence["reason"]
    assert "ControllersAvailable" in [c["type"] for c in evidence["slurm"]["failing_conditions"]]
    assert failed["retry_command"] and "--only-clusters slurm" in failed["retry_command"]
    assert [c["name"] for c in inventory()["mk8s_clusters"] if c["name"] == "soperator-slurm"]  # kept

    npa(
        "local-cloud",
        "fault",
        "slurm",
        "--cluster",
        injected[0],
        "--kind",
        "controller-down",
        "--clear",
        check=True,
    )
    again = npa("up", "--spec", str(spec), "--yes", "-j", "2", "--output", "json")
    assert again.code == 0, again.stderr[-4000:]
    stacks = by_stack(again.json())
    assert stacks[SLURM]["status"] == "deployed"
    assert stacks[TRAIN]["status"] == "unchanged"
    changed = stacks[SLURM]["changes"]
    assert (
        changed.get("update") == 1 and not changed.get("create") and not changed.get("delete")
    )  # only the gate

    npa("destroy", "--spec", str(spec), "--yes", check=True)
