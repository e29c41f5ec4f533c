"""The local cloud's Terraform providers under real terraform: the toolchain's filesystem mirror, upstream
k8s-training's own Marketplace modules (../shared/upstream, unmodified, from a temporary copy) and the
units functions, through init, validate, apply and destroy against an initialised local cloud."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from npa_pulumi.runtime.toolchain import find_terraform
from npa_pulumi.simulator import LocalSimulator

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = REPO.parent / "shared" / "upstream" / "nebius-solutions-library"
TIGHT = REPO / "tests" / "fixtures" / "local_cloud" / "tight-tenant.yaml"
PROJECT = "project-existing1"

ROOT = """
terraform {
  required_providers {
    nebius = { source = "nebius/nebius", version = ">= 0.6.56" }
    units  = { source = "dstaroff/units", version = ">= 1.1.1" }
  }
}
variable "parent_id" { type = string }
variable "subnet_id" { type = string }

resource "nebius_mk8s_v1_cluster" "k8s-cluster" {
  parent_id = var.parent_id
  name      = "npa-provider-proof"
  control_plane = {
    endpoints         = { public_endpoint = {} }
    etcd_cluster_size = 1
    subnet_id         = var.subnet_id
    version           = "1.32"
  }
}

resource "nebius_compute_v1_filesystem" "shared-filesystem" {
  parent_id        = var.parent_id
  name             = "npa-provider-proof-fs"
  type             = "NETWORK_SSD"
  size_bytes       = provider::units::from_gib(10)
  block_size_bytes = provider::units::from_kib(4)
}

module "gpu-operator" {
  source       = "../modules/gpu-operator"
  parent_id    = var.parent_id
  cluster_id   = nebius_mk8s_v1_cluster.k8s-cluster.id
  mig_strategy = "single"
}

output "endpoint" {
  value = nebius_mk8s_v1_cluster.k8s-cluster.status.control_plane.endpoints.public_endpoint
}
output "cluster_id" { value = nebius_mk8s_v1_cluster.k8s-cluster.id }
output "size_gibibytes" {
  value = floor(provider::units::to_gib(nebius_compute_v1_filesystem.shared-filesystem.status.size_bytes))
}
"""


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toolchain's mirror (`make tools`), else the same component building one for this module."""
    tmp_path = tmp_path_factory.mktemp("providers")
    built = REPO / ".tools" / "terraform-providers"
    if (built / "registry.terraform.io" / "nebius" / "nebius").is_dir():
        return built
    from tools.toolchainlib import localcloud_providers
    from tools.toolchainlib.pins import load_pins

    out = tmp_path / "provider-bin"
    out.mkdir()
    localcloud_providers.build(out)
    mirror = tmp_path / "mirror"
    localcloud_providers.lay_out_mirror(out / localcloud_providers.BINARY, load_pins(), mirror)
    return mirror


def _terraform(workdir: Path, env: dict[str, str], *args: str) -> str:
    proc = subprocess.run(
        [str(find_terraform()), *args, "-no-color"], cwd=workdir, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, f"terraform {args[0]} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_upstream_modules_deploy_through_the_local_providers(
    isolated_home: Path, tmp_path: Path, mirror: Path
) -> None:
    cloud_dir = Path(os.environ["NPA_LOCAL_CLOUD_DIR"])
    sim = LocalSimulator(cloud_dir)
    assert sim.initialise(TIGHT)["status"] == "initialised"
    subnet_id = sim.list_subnets(PROJECT)[0]["id"]

    shutil.copytree(UPSTREAM / "modules", tmp_path / "modules")
    root = tmp_path / "root"
    root.mkdir()
    (root / "main.tf").write_text(ROOT)
    cli_config = tmp_path / "cli.tfrc"
    cli_config.write_text(
        "provider_installation {\n"
        f'  filesystem_mirror {{\n    path    = "{mirror}"\n    include = ["*/*/*"]\n  }}\n'
        '  direct { exclude = ["*/*/*"] }\n}\n'
    )
    env = {
        **os.environ,
        "TF_CLI_CONFIG_FILE": str(cli_config),
        "NPA_PYTHON": sys.executable,
        "TF_VAR_parent_id": PROJECT,
        "TF_VAR_subnet_id": subnet_id,
        "TF_IN_AUTOMATION": "1",
    }
    _terraform(root, env, "init", "-input=false")
    _terraform(root, env, "validate")
    _terraform(root, env, "apply", "-auto-approve", "-input=false")

    outputs = json.loads(_terraform(root, env, "output", "-json"))
    cluster = sim.get_cluster(outputs["cluster_id"]["value"])
    assert cluster["state"] == "RUNNING"
    assert outputs["endpoint"]["value"] == cluster["endpoint"].split("://", 1)[1]
    assert outputs["size_gibibytes"]["value"] == 10
    # upstream's gpu-operator release became the cluster's addons, which the cluster's agent materialises
    assert cluster["addons"]["gpu_driver"] == "operator"
    assert cluster["addons"]["mig"]["strategy"] == "single"
    # a second plan has nothing to do: every state the providers returned matches the configuration
    plan = subprocess.run(
        [str(find_terraform()), "plan", "-detailed-exitcode", "-no-color", "-input=false"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert plan.returncode == 0, plan.stdout + plan.stderr

    _terraform(root, env, "destroy", "-auto-approve", "-input=false")
    assert sim.list_clusters(PROJECT) == []
    assert [f for f in sim.list_filesystems(PROJECT) if f["name"] == "npa-provider-proof-fs"] == []


def test_the_providers_refuse_to_serve_outside_the_local_cloud(
    isolated_home: Path, tmp_path: Path, mirror: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "main.tf").write_text(ROOT)
    shutil.copytree(UPSTREAM / "modules", tmp_path / "modules")
    cli_config = tmp_path / "cli.tfrc"
    cli_config.write_text(
        "provider_installation {\n"
        f'  filesystem_mirror {{\n    path    = "{mirror}"\n    include = ["*/*/*"]\n  }}\n'
        '  direct { exclude = ["*/*/*"] }\n}\n'
    )
    env = {k: v for k, v in os.environ.items() if k != "NPA_LOCAL_CLOUD_DIR"}
    env.update(TF_CLI_CONFIG_FILE=str(cli_config), TF_VAR_parent_id=PROJECT, TF_VAR_subnet_id="x")
    _terraform(root, env, "init", "-input=false")
    proc = subprocess.run(
        [str(find_terraform()), "plan", "-no-color", "-input=false"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0
    assert "Not on the local cloud" in proc.stdout + proc.stderr
