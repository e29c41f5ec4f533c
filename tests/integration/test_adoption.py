"""`adopt`: a cluster the original `npa fleet` deployed, taken over without a change in the cloud.

The original's deployment is played as the original made it: the project, its network and subnet created
through the cloud API, then the stand-in recipe applied by plain terraform in
`~/.npa/fleet/<fleet>/<project>/<cluster>/k8s-training/`, with the tfvars `npa-pulumi tfvars` prints and the
identity variables the bridge passes, and the original's env sidecar and network record beside it. Then
the real CLI adopts it and runs the ordinary lifecycle over it. One deployment serves the whole journey
(it is the expensive part); the bad-input cases need no deployment at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import by_stack, inventory, npa, write_spec

from npa_pulumi.runtime.toolchain import find_terraform

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "local-k8s-training"
FLEET = "takeover"
CLUSTER_STACK = f"{FLEET}.alpha.train"
PROJECT_STACK = f"{FLEET}.alpha"

SPEC = f"""\
apiVersion: npa.fleet/v0.0.1
name: {FLEET}
tenant_id: tenant-local
region: us-central1
projects:
  - name: alpha
    object_storage: {{size_gibibytes: 10}}
    clusters:
      - name: train
        cpu_nodes: {{count: 1, platform: cpu-d3, preset: 4vcpu-16gb}}
        gpu_nodes: {{count: 0}}
        enable_filestore: false
"""
# The same fleet with one more CPU node: what the original deployed no longer matches it.
SPEC_TWO_NODES = SPEC.replace("{count: 1, platform", "{count: 2, platform")
# The same fleet with a bigger bucket than the original made: the bucket no longer matches it.
SPEC_BIGGER_BUCKET = SPEC.replace("size_gibibytes: 10", "size_gibibytes: 20")
KINDS = ("projects", "networks", "subnets", "mk8s_clusters", "node_groups", "filesystems", "buckets")


def _original_deployment(home: Path, spec: Path) -> Path:
    """What `npa fleet deploy` left for alpha/train: a created project, network, subnet and bucket, the
    applied recipe with its local state, the sidecar, the network and the object-storage records. Returns
    the cluster's directory."""
    from npa_pulumi.cloud.factory import make_cloud
    from npa_pulumi.plan.naming import derived_bucket_name

    cloud = make_cloud("local")
    project = cloud.create_project("tenant-local", "alpha", "us-central1", labels={})
    network = cloud.create_network(project.id, "alpha-net", labels={})
    subnet = cloud.create_subnet(project.id, network.id, "alpha-subnet", labels={})
    bucket_name = derived_bucket_name("tenant-local", project.id, FLEET)
    bucket = cloud.create_bucket(project.id, bucket_name, "standard", 10 * 2**30, labels={})
    fleet_dir = home / ".npa" / "fleet" / FLEET
    cluster_dir = fleet_dir / "alpha" / "train"
    install = cluster_dir / "k8s-training"
    shutil.copytree(RECIPE, install, ignore=shutil.ignore_patterns(".terraform*", "*.tfstate*"))
    tfvars = npa("tfvars", "--spec", str(spec), check=True).stdout
    (install / "terraform.tfvars.json").write_text(tfvars)
    env = {
        **os.environ,
        "TF_IN_AUTOMATION": "1",
        "NPA_PYTHON": sys.executable,
        "TF_VAR_tenant_id": "tenant-local",
        "TF_VAR_parent_id": project.id,
        "TF_VAR_region": "us-central1",
        "TF_VAR_subnet_id": subnet.id,
        "TF_VAR_iam_token": "npa-local-iam-token",
        "TF_VAR_npa_idempotency_scope": CLUSTER_STACK,
    }
    for args in (
        ("init", "-input=false", "-no-color"),
        ("apply", "-auto-approve", "-input=false", "-no-color"),
    ):
        run = subprocess.run(
            [str(find_terraform()), *args], cwd=install, env=env, capture_output=True, text=True, timeout=600
        )
        assert run.returncode == 0, run.stdout + run.stderr
    cluster_id = json.loads((install / "terraform.tfstate").read_text())["outputs"]["cluster_id"]["value"]
    sidecar = {
        "backend": "mk8s",
        "tenant_id": "tenant-local",
        "project_id": project.id,
        "region": "us-central1",
        "subnet_id": subnet.id,
        "cluster_name": "train",
        "context": f"fleet-{FLEET}-alpha-train",
        "profile": "",
        "gpu_driver_mode": "",
        "managed_driver_preset": "",
        "status": "deployed",
        "cluster_id": cluster_id,
    }
    (cluster_dir / ".npa-fleet-env.json").write_text(json.dumps(sidecar, indent=2))
    network_record = {"project_id": project.id, "created_network_id": network.id, "subnet_id": subnet.id}
    (fleet_dir / "alpha" / ".npa-fleet-network.json").write_text(json.dumps(network_record))
    storage_record = {"bucket_id": bucket.id, "bucket_name": bucket_name, "created": True}
    (fleet_dir / "alpha" / ".npa-fleet-object-storage.json").write_text(json.dumps(storage_record))
    return cluster_dir


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _cloud_objects() -> dict[str, list[tuple[str, str]]]:
    shown = inventory()
    return {kind: sorted((r["id"], r["state"]) for r in shown[kind]) for kind in KINDS}


def _outputs(home: Path, stack: str) -> dict[str, Any]:
    from npa_pulumi.engine.automation.diy_backend import checkpoint_outputs

    found = checkpoint_outputs(f"file://{home}/.npa-pulumi/state", stack, "npa-fleet")
    assert isinstance(found, dict), found
    return found


def _adopt(spec: Path, *extra: str) -> Any:
    return npa("adopt", "--spec", str(spec), "--cloud", "local", "--output", "json", *extra)


def test_adopt_an_original_deployment_then_its_lifecycle(kube_api: Path, tmp_path: Path) -> None:
    home = kube_api
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    npa("local-cloud", "init", check=True)
    cluster_dir = _original_deployment(home, spec)
    original_files = _digests(home / ".npa" / "fleet")
    before = _cloud_objects()
    (cluster_id,) = [cid for cid, _ in before["mk8s_clusters"]]

    # ---- dry run: found; a spec the deployment no longer matches: mismatched, key by key
    dry = _adopt(spec, "--dry-run")
    assert dry.code == 0, dry.stderr[-3000:] + dry.stdout[-2000:]
    listed = by_stack(dry.json())[CLUSTER_STACK]
    assert listed["status"] == "found" and listed["cluster_id"] == cluster_id
    assert listed["adoption"]["source"] == str(cluster_dir) and listed["adoption"]["network_owned"] is True
    ((bucket_id, _),) = before["buckets"]
    assert (listed["adoption"]["bucket_id"], listed["adoption"]["bucket_owned"]) == (bucket_id, True)
    other = write_spec(tmp_path / "two-nodes.yaml", SPEC_TWO_NODES)
    mismatched = _adopt(other, "--dry-run")
    assert mismatched.code == 1
    entry = by_stack(mismatched.json())[CLUSTER_STACK]
    assert (
        entry["status"] == "mismatched"
        and "cpu_nodes_fixed_count: saved 1, the spec renders 2" in entry["error"]
    )

    bigger = _adopt(write_spec(tmp_path / "bigger.yaml", SPEC_BIGGER_BUCKET), "--dry-run")
    assert bigger.code == 1
    entry = by_stack(bigger.json())[CLUSTER_STACK]
    assert entry["status"] == "mismatched" and "max_size_bytes is 10737418240" in entry["error"], entry

    # ---- without --yes and without a terminal: refused, nothing created
    refused = npa("adopt", "--spec", str(spec), "--cloud", "local", input_text="")
    assert refused.code == 1 and "without --yes" in refused.stderr
    assert not (
        home / ".npa-pulumi" / "state" / ".pulumi" / "stacks" / "npa-fleet" / f"{CLUSTER_STACK}.json"
    ).exists()

    # ---- adopt: deployed (the gate ran on the adopted cluster), nothing in the cloud changed
    adopted = _adopt(spec, "--yes")
    assert adopted.code == 0, adopted.stderr[-4000:] + adopted.stdout[-2000:]
    document = adopted.json()
    cluster = by_stack(document)[CLUSTER_STACK]
    assert cluster["status"] == "deployed" and cluster["cluster_id"] == cluster_id
    assert cluster["validation"] == "cluster-basics"
    assert cluster["adoption"]["digests"], cluster["adoption"]
    assert _cloud_objects() == before
    assert _digests(home / ".npa" / "fleet") == original_files
    receipt = json.loads(Path(document["receipt"]).read_text())
    assert receipt["source"] == str(home / ".npa" / "fleet" / FLEET)
    assert {s["stack"] for s in receipt["stacks"]} == {PROJECT_STACK, CLUSTER_STACK}
    assert oct(Path(document["receipt"]).stat().st_mode & 0o777) == "0o600"
    context = f"fleet-{FLEET}-alpha-train"
    assert (home / ".npa-pulumi" / "kubeconfigs" / f"{context}.yaml").exists()
    record = json.loads((home / ".npa" / "clusters" / context / "cluster.json").read_text())
    assert (record["cluster_id"], record["provider_name"]) == (cluster_id, "train")
    assert "npa-local-iam-token" not in adopted.stdout + adopted.stderr
    # The project stack holds the original's bucket, owned; no storage identity was minted by adopt.
    project_outputs = _outputs(home, PROJECT_STACK)
    assert (project_outputs["bucket_id"], project_outputs["bucket_created"]) == (bucket_id, True)
    assert project_outputs["storage_verified"] is False and not project_outputs["storage_key_id"]

    # ---- a second adopt changes nothing and says so
    again = _adopt(spec, "--yes")
    assert again.code == 0, again.stderr[-3000:]
    assert by_stack(again.json())[CLUSTER_STACK]["status"] == "already-adopted"
    stacks = npa("stacks", "--output", "json", check=True).json()
    names = [s["name"] for s in stacks] if isinstance(stacks, list) else [s["name"] for s in stacks["stacks"]]
    assert sorted(n for n in names if n.startswith(FLEET)) == [PROJECT_STACK, CLUSTER_STACK]

    # ---- another fleet pointed at the same install: the cluster is held by this fleet's stack
    other_fleet = write_spec(tmp_path / "other.yaml", SPEC.replace(f"name: {FLEET}", "name: rival"))
    rival = _adopt(other_fleet, "--dry-run", "--from", str(home / ".npa" / "fleet" / FLEET))
    assert rival.code == 1
    entry = by_stack(rival.json())["rival.alpha.train"]
    assert entry["status"] == "refused" and f"held by stack {CLUSTER_STACK}" in entry["error"]

    # ---- the ordinary lifecycle: preview has nothing to do, status says deployed, up keeps the cluster
    preview = npa("preview", "--spec", str(spec), "--cloud", "local", "--output", "json")
    assert preview.code == 0, preview.stderr[-3000:]
    assert by_stack(preview.json())[CLUSTER_STACK]["status"] in ("no-changes", "unchanged")
    status = npa("status", "--spec", str(spec), "--cloud", "local", "--output", "json")
    assert status.code == 0, status.stderr[-3000:]
    assert by_stack(status.json())[CLUSTER_STACK]["status"] == "deployed"
    up = npa("up", "--spec", str(spec), "--cloud", "local", "--yes", "--output", "json")
    assert up.code == 0, up.stderr[-3000:]
    assert by_stack(up.json())[CLUSTER_STACK]["cluster_id"] == cluster_id
    assert _cloud_objects() == before
    # The first up made the storage identity adopt left out, on the same bucket, and proved it.
    project_outputs = _outputs(home, PROJECT_STACK)
    assert project_outputs["bucket_id"] == bucket_id and project_outputs["storage_verified"] is True

    # ---- destroy removes it and the network the fleet took over; the project and the bucket are retained
    gone = npa("destroy", "--spec", str(spec), "--cloud", "local", "--yes", "--output", "json")
    assert gone.code == 0, gone.stderr[-3000:]
    after = _cloud_objects()
    assert after["buckets"] == before["buckets"]
    assert after["mk8s_clusters"] == [] and after["node_groups"] == []
    adoption = listed["adoption"]
    assert adoption["network_id"] not in [n for n, _ in after["networks"]]  # the fleet owned it
    assert adoption["subnet_id"] not in [n for n, _ in after["subnets"]]
    assert [n for n in before["networks"] if n[0] != adoption["network_id"]] == after["networks"]
    assert after["projects"] == before["projects"]
    assert not (home / ".npa" / "clusters" / context / "cluster.json").exists()
    assert _digests(home / ".npa" / "fleet") == original_files


# ------------------------------------------------------------------------ bad input, no deployment


# The original's HCL tfvars as its renderer writes them (../shared/reference/original-install-layout.md).
ORIGINAL_TFVARS = '# Generated by `npa fleet`\ncluster_name = "train"\ncpu_nodes_fixed_count = 1\n'


def _fake_install(
    home: Path,
    state: str,
    tfvars: str = ORIGINAL_TFVARS,
    sidecar: dict[str, Any] | None = None,
    owner: dict[str, Any] | None = None,
) -> Path:
    cluster_dir = home / ".npa" / "fleet" / FLEET / "alpha" / "train"
    install = cluster_dir / "k8s-training"
    install.mkdir(parents=True)
    (install / "terraform.tfstate").write_text(state)
    (install / "terraform.tfvars").write_text(tfvars)
    if sidecar is not None:
        (cluster_dir / ".npa-fleet-env.json").write_text(json.dumps(sidecar))
    if owner is not None:
        (cluster_dir / ".npa-backend-owner.json").write_text(json.dumps(owner))
    return cluster_dir


def _state(cluster_id: str) -> str:
    """A state in Terraform's format version 4 with the recipe's `kube_cluster` output (the original reads
    the cluster id there)."""
    return json.dumps(
        {
            "version": 4,
            "serial": 3,
            "lineage": "x",
            "resources": [],
            "outputs": {"kube_cluster": {"value": {"id": cluster_id, "name": "train"}}},
        }
    )


def _nothing_written(home: Path) -> None:
    stacks = home / ".npa-pulumi" / "state" / ".pulumi" / "stacks" / "npa-fleet"
    assert not stacks.exists() or not list(stacks.iterdir())
    assert not (home / ".npa-pulumi" / "adoption-receipts").exists()


def test_adopt_refuses_bad_input_with_the_path(isolated_home: Path, tmp_path: Path) -> None:
    home = isolated_home
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    npa("local-cloud", "init", check=True)

    missing = _adopt(spec, "--yes", "--from", str(tmp_path / "nowhere"))
    assert missing.code == 2 and str(tmp_path / "nowhere") in missing.json()["error"]["message"]

    # no install for the selected cluster: not-found (a dry run says so; a real one adopts nothing)
    (home / ".npa" / "fleet" / FLEET).mkdir(parents=True)
    absent = _adopt(spec, "--yes")
    assert absent.code == 1
    assert by_stack(absent.json())[CLUSTER_STACK]["status"] == "not-found"

    cluster_dir = _fake_install(home, "{not json")
    corrupt = _adopt(spec, "--dry-run")
    assert corrupt.code == 2
    assert str(cluster_dir / "k8s-training" / "terraform.tfstate") in corrupt.json()["error"]["message"]
    shutil.rmtree(cluster_dir)

    cluster_dir = _fake_install(home, _state("mk8scluster-e00gone"), tfvars="cluster_name = = 1\n")
    unreadable = _adopt(spec, "--dry-run")
    assert unreadable.code == 2
    assert str(cluster_dir / "k8s-training" / "terraform.tfvars") in unreadable.json()["error"]["message"]
    shutil.rmtree(cluster_dir)

    other_fleet = {
        "fleet_name": "another",
        "project_key": "alpha",
        "cluster_name": "train",
        "backend": "mk8s",
    }
    identity = {"project_id": "project-existing1", "subnet_id": "vpcsubnet-x"}
    _fake_install(home, _state("mk8scluster-e00gone"), sidecar=identity, owner=other_fleet)
    foreign = _adopt(spec, "--yes")
    assert foreign.code == 1
    entry = by_stack(foreign.json())[CLUSTER_STACK]
    assert entry["status"] == "refused" and "fleet_name 'another'" in entry["error"]
    shutil.rmtree(home / ".npa" / "fleet" / FLEET / "alpha")

    sidecar = {
        "tenant_id": "tenant-other",
        "project_id": "project-existing1",
        "region": "us-central1",
        "subnet_id": "vpcsubnet-x",
    }
    _fake_install(home, _state("mk8scluster-e00gone"), sidecar=sidecar)
    other_tenant = _adopt(spec, "--yes")
    assert other_tenant.code == 1
    entry = by_stack(other_tenant.json())[CLUSTER_STACK]
    assert entry["status"] == "refused" and "tenant tenant-other" in entry["error"]
    shutil.rmtree(home / ".npa" / "fleet" / FLEET / "alpha")

    sidecar["tenant_id"] = "tenant-local"
    _fake_install(home, _state("mk8scluster-e00gone"), sidecar=sidecar)
    gone = _adopt(spec, "--yes")
    assert gone.code == 1
    entry = by_stack(gone.json())[CLUSTER_STACK]
    assert entry["status"] == "refused" and "gone" in entry["error"]
    _nothing_written(home)
