"""Terraform judges npa-pulumi's override files on the real upstream module (issue 56): for every feature
path the default recipe serves, upstream k8s-training (../shared/upstream, tests/upstream_library.py) plus
the fleet's override files is initialised, validated and planned by the toolchain's terraform against the
local cloud's providers (tools/localcloud-providers, from the mirror `make tools` lays out). A plan needs no
cloud object: it reads no data source the rendered tfvars enable, so a fresh local cloud directory serves.
Removing a block an override merges into must make Terraform itself refuse the module."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from upstream_library import upstream_library, writable_copy

from npa_pulumi.bridge.local_providers import write_cli_config
from npa_pulumi.bridge.recipe import MIRROR_ENV, RecipeSource, default_source, materialize
from npa_pulumi.plan import render_tfvars, resolve_targets
from npa_pulumi.runtime.toolchain import find_local_provider_mirror, find_terraform
from npa_pulumi.spec.parse import parse_spec

pytestmark = pytest.mark.integration

SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHhR4pKoiEHzZnGfmfXOwhnxAdO9CJyu5y8cq9mE7yZb test@npa"
HEAD = """\
apiVersion: npa.fleet/v0.0.1
name: upstream
region: us-central1
projects:
  - project_id: project-existing1
    clusters:
"""
CPU = "        cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}\n"
FEATURES: dict[str, str] = {
    "cpu-only": "      - name: cpu\n" + CPU,
    "h100-strict-capacity-block": (
        "      - name: h100\n" + CPU + "        gpu_nodes: {count: 2, platform: gpu-h100-sxm, "
        "preset: 8gpu-128vcpu-1600gb, capacity_block_group: capacityblockgroup-e00testblock0042}\n"
        "        enable_gpu_cluster: true\n        infiniband_fabric: us-central1-a\n"
    ),
    "new-filesystem": (
        "      - name: fsnew\n" + CPU + "        enable_filestore: true\n        filestore_mount_tag: data\n"
        "        filestore_disk_size_gibibytes: 256\n"
    ),
    "existing-filesystem": (
        "      - name: fsold\n" + CPU + "        enable_filestore: true\n        filestore_mount_tag: data\n"
        "        existing_filestore: EXISTING_FILESYSTEM\n"
    ),
    "mig-rtx-pro-6000": (
        "      - name: mig\n" + CPU + "        gpu_nodes: {count: 2, platform: gpu-rtx6000, "
        "preset: 1gpu-24vcpu-218gb, capacity_block_group: capacityblockgroup-e00testblock0042}\n"
        "        k8s_version: '1.34'\n"
        "        mig: {enabled: true, strategy: mixed, config: all-balanced}\n"
    ),
    "rtx-rendering-driver-repositories": (
        "      - name: rtx\n" + CPU + "        gpu_workload_profile: rtx-rendering\n"
        "        gpu_driver_package_repositories:\n"
        "          ubuntu.sources: 'Types: deb\\nURIs: http://archive.ubuntu.com/ubuntu\\nSuites: noble\\n"
        "Components: main\\n'\n"
    ),
    "kuberay": (
        "      - name: ray\n        cpu_nodes: {count: 2, platform: cpu-d3, preset: 16vcpu-64gb}\n"
        "        kuberay: {enabled: true, worker_replicas: 2, worker_cpus: 2, "
        "worker_memory_gib: 4}\n"
    ),
}
# Issue 58: the control plane at 1.33 with the GPU pool pinned at 1.32 (planned once, not per auth path).
PINNED_GPU_POOL = (
    "      - name: pinned\n" + CPU + "        k8s_version: '1.33'\n"
    "        gpu_nodes: {count: 1, platform: gpu-rtx6000, preset: 1gpu-24vcpu-218gb,\n"
    "                    pin: true, version: '1.32'}\n"
)
EXISTING_FILESYSTEM = "EXISTING_FILESYSTEM"  # made in the local cloud by the test itself
IDENTITY = {
    "tenant_id": "tenant-e00localtenant01",
    "parent_id": "project-e00existing000001",
    "subnet_id": "vpcsubnet-e00existing000001",
    "region": "us-central1",
}


def _terraform(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(find_terraform()), *args, "-no-color"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _env(tmp_path: Path, token: bool) -> dict[str, str]:
    mirror = find_local_provider_mirror()
    assert mirror is not None, "the local cloud's providers are not built: run `make tools`"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "NEBIUS_"))}
    env.update(
        {
            "TF_CLI_CONFIG_FILE": str(write_cli_config(tmp_path / "cli", mirror)),
            "TF_PLUGIN_CACHE_DIR": str(tmp_path / "plugins"),
            "TF_IN_AUTOMATION": "1",
            "CHECKPOINT_DISABLE": "1",
            "NPA_LOCAL_CLOUD_DIR": str(tmp_path / "cloud"),
            "NPA_LOCAL_CLOUD_KUBERNETES_API": "0",
            "NPA_PYTHON": sys.executable,
            **{f"TF_VAR_{k}": v for k, v in IDENTITY.items()},
        }
    )
    (tmp_path / "plugins").mkdir(exist_ok=True)
    if token:
        env["TF_VAR_iam_token"] = "npa-local-iam-token.tenant-e00localtenant01"
    return env


def _existing_filesystem(tmp_path: Path) -> str:
    """A filesystem made in the test's local cloud outside the fleet, as a user's existing one is."""
    env = {
        **os.environ,
        "NPA_LOCAL_CLOUD_DIR": str(tmp_path / "cloud"),
        "NPA_LOCAL_CLOUD_KUBERNETES_API": "0",
    }
    api = [sys.executable, "-m", "npa_pulumi.simulator.api"]
    npa = str(Path(sys.executable).with_name("npa-pulumi"))
    subprocess.run([npa, "local-cloud", "init"], env=env, check=True, capture_output=True, timeout=120)
    arguments = {"project_id": "project-existing1", "name": "team-data", "size_bytes": 1 << 40}
    made = subprocess.run(
        [*api, "create_filesystem", "--args", json.dumps(arguments)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return str(json.loads(made.stdout)["result"]["id"])


def _prepared(tmp_path: Path, feature: str) -> Path:
    """The default recipe materialized as a stack's work dir, with the cluster's tfvars beside it."""
    os.environ.setdefault(MIRROR_ENV, str(upstream_library()))
    recipe = materialize(default_source(), tmp_path / "work", "us-central1", tmp_path / "cache")
    cluster = FEATURES.get(feature) or PINNED_GPU_POOL
    if EXISTING_FILESYSTEM in cluster:
        cluster = cluster.replace(EXISTING_FILESYSTEM, _existing_filesystem(tmp_path))
    (target,) = resolve_targets(parse_spec(HEAD + cluster))
    rendered = render_tfvars(target, recipe.variables, SSH_KEY)
    (recipe.module_dir / "terraform.tfvars.json").write_text(json.dumps(rendered.file_vars))
    runtime = {
        f"TF_VAR_{k}": json.dumps(v) if not isinstance(v, str) else v
        for k, v in rendered.runtime_vars.items()
    }
    (tmp_path / "runtime.json").write_text(json.dumps(runtime))
    return recipe.module_dir


def _runtime(tmp_path: Path) -> dict[str, str]:
    loaded: dict[str, str] = json.loads((tmp_path / "runtime.json").read_text())
    return loaded


@pytest.mark.parametrize("auth", ["token", "profile"])
@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_upstream_with_the_override_files_inits_validates_and_plans(
    tmp_path: Path, feature: str, auth: str
) -> None:
    module_dir = _prepared(tmp_path, feature)
    env = {**_env(tmp_path, token=auth == "token"), **_runtime(tmp_path)}
    init = _terraform(["init", "-input=false", "-backend=false"], module_dir, env)
    assert init.returncode == 0, init.stdout[-3000:] + init.stderr[-3000:]
    validate = _terraform(["validate"], module_dir, env)
    assert validate.returncode == 0, validate.stdout[-3000:] + validate.stderr[-3000:]
    plan = _terraform(["plan", "-input=false", "-out=tfplan"], module_dir, env)
    assert plan.returncode == 0, plan.stdout[-4000:] + plan.stderr[-4000:]
    shown = _terraform(["show", "-json", "tfplan"], module_dir, env)
    assert shown.returncode == 0, shown.stderr[-2000:]
    changes = json.loads(shown.stdout)["resource_changes"]
    created = {c["address"] for c in changes if c["change"]["actions"] == ["create"]}
    assert "nebius_mk8s_v1_cluster.k8s-cluster" in created
    assert any(a.startswith("nebius_mk8s_v1_node_group.") for a in created)


def _planned(tmp_path: Path, module_dir: Path) -> list[dict[str, Any]]:
    env = {**_env(tmp_path, token=True), **_runtime(tmp_path)}
    for args in (["init", "-input=false", "-backend=false"], ["plan", "-input=false", "-out=tfplan"]):
        done = _terraform(args, module_dir, env)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    shown = _terraform(["show", "-json", "tfplan"], module_dir, env)
    assert shown.returncode == 0, shown.stderr[-2000:]
    changes: list[dict[str, Any]] = json.loads(shown.stdout)["resource_changes"]
    return changes


def test_a_pinned_gpu_pool_is_planned_at_its_own_version_behind_the_control_plane(tmp_path: Path) -> None:
    """Issue 58: the cluster at 1.33, its GPU pool pinned at 1.32; the CPU pool follows the cluster."""
    module_dir = _prepared(tmp_path, "pinned-gpu-pool")
    tfvars = json.loads((module_dir / "terraform.tfvars.json").read_text())
    assert tfvars["k8s_version"] == "1.33" and tfvars["npa_fleet_gpu_nodes_version"] == "1.32"
    after = {c["address"]: c["change"]["after"] for c in _planned(tmp_path, module_dir)}
    assert after["nebius_mk8s_v1_cluster.k8s-cluster"]["control_plane"]["version"] == "1.33"
    assert after["nebius_mk8s_v1_node_group.cpu-only"]["version"] == "1.33"
    assert after["nebius_mk8s_v1_node_group.gpu[0]"]["version"] == "1.32"


def test_the_node_group_version_override_without_its_base_block_is_refused_by_terraform(
    tmp_path: Path,
) -> None:
    """The version override merges into upstream's `nebius_mk8s_v1_node_group.gpu`: a copy of upstream
    without that block is refused by Terraform itself, and by the HCL check before any terraform runs."""
    library = writable_copy(tmp_path / "lib")
    main_tf = library / "k8s-training" / "main.tf"
    main_tf.write_text(
        main_tf.read_text().replace(
            'resource "nebius_mk8s_v1_node_group" "gpu"', 'resource "nebius_mk8s_v1_node_group" "gpus"'
        )
    )
    from npa_pulumi.bridge import overrides

    assert any('"gpu" block' in p for p in overrides.problems(overrides.default_overrides(), library))
    work = tmp_path / "work"
    materialize(RecipeSource("dir", str(library)), work, "us-central1", tmp_path / "cache")
    overrides.write(overrides.default_overrides(), work)  # written past the HCL check, as a stale copy would
    init = _terraform(["init", "-input=false", "-backend=false"], work / "k8s-training", _env(tmp_path, True))
    assert init.returncode != 0
    assert "Missing resource to override" in init.stderr + init.stdout


def test_an_override_without_its_base_block_is_refused_by_terraform(tmp_path: Path) -> None:
    """The check that would have caught the auth override's new local: Terraform's own, on a copy of
    upstream whose `device_preset` local (which npa_fleet_override.tf overrides) is renamed away."""
    library = writable_copy(tmp_path / "lib")
    locals_tf = library / "k8s-training" / "locals.tf"
    locals_tf.write_text(re.sub(r"\bdevice_preset\b", "preset_of_device", locals_tf.read_text()))
    from npa_pulumi.bridge import overrides

    work = tmp_path / "work"
    materialize(RecipeSource("dir", str(library)), work, "us-central1", tmp_path / "cache")
    overrides.write(overrides.default_overrides(), work)  # written past the HCL check, as a stale copy would
    env = _env(tmp_path, token=True)
    init = _terraform(["init", "-input=false", "-backend=false"], work / "k8s-training", env)
    assert init.returncode != 0
    assert "Missing base local value definition to override" in init.stderr + init.stdout
