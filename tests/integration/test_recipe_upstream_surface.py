"""`--recipe-dir` against the real upstream k8s-training at the pinned commit (tests/upstream_library.py),
without the default recipe's override files: what it cannot represent
is refused before anything is touched, what it can is rendered in its own terms, and its missing
`provider "nebius"` block is reported loudly (stderr and the JSON `warnings`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fleet_helpers import inventory, npa, write_spec
from upstream_library import upstream_library

pytestmark = pytest.mark.integration

V4 = upstream_library()

HEAD = """\
apiVersion: npa.fleet/v0.0.1
name: upstream
region: us-central1
projects:
  - project_id: project-existing1
    clusters:
"""
RTX = (
    "{count: 2, platform: gpu-rtx6000, preset: 1gpu-24vcpu-218gb, "
    "capacity_block_group: capacityblockgroup-local1}"
)

REFUSED = {
    "mig": (f"      - name: mig\n        gpu_nodes: {RTX}\n        mig: {{}}\n", "gpu_mig_manager_version"),
    "rtx": (
        "      - name: rtx\n        gpu_workload_profile: rtx-rendering\n",
        "gpu_operator_rtx_driver_profile",
    ),
    "driver-preset": (
        "      - name: drv\n        gpu_nodes: {count: 1, platform: gpu-rtx6000, preset: 1gpu-24vcpu-218gb}\n"
        "        managed_driver_preset: cuda12.8\n",
        "gpu_nodes_driver_preset",
    ),
    "mount-tag": (
        "      - name: fs\n        cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}\n"
        "        enable_filestore: true\n        filestore_mount_tag: shared\n",
        "filestore_mount_tag",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_the_upstream_surface_cannot_represent_is_refused_before_any_change(
    isolated_home: Path, tmp_path: Path, case: str
) -> None:
    cluster, missing = REFUSED[case]
    spec = write_spec(tmp_path / "fleet.yaml", HEAD + cluster)
    npa("local-cloud", "init", check=True)
    before = inventory()
    result = npa("up", "--spec", str(spec), "--recipe-dir", str(V4), "--yes", "--output", "json")
    assert result.code == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    error = result.json()["error"]
    assert missing in error["message"]
    assert "capacityblockgroup-local1" not in result.stdout + result.stderr
    assert inventory() == before
    assert not (isolated_home / ".npa-pulumi" / "state" / ".pulumi" / "stacks").exists()


def test_tfvars_follow_the_upstream_surface(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path / "fleet.yaml",
        HEAD
        + "      - name: gpu\n"
        + "        gpu_nodes: {count: 1, platform: gpu-rtx6000, preset: 1gpu-24vcpu-218gb}\n",
    )
    result = npa("tfvars", "--spec", str(spec), "--recipe-dir", str(V4))
    assert result.code == 0, result.stderr
    tfvars = json.loads(result.stdout)
    assert "enable_gpu_cluster" not in tfvars  # V3+ cluster through the fabric; "" turns it off
    assert tfvars["infiniband_fabric"] == ""
    assert tfvars["gpu_nodes_driverfull_image"] is True
    assert "gpu_nodes_driver_preset" not in tfvars  # upstream hardcodes cuda13.0
    assert "filestore_mount_tag" not in tfvars
    assert tfvars["loki"] == {"enabled": False, "replication_factor": 1}


def test_an_unpointable_provider_domain_is_a_loud_warning(isolated_home: Path, tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path / "fleet.yaml",
        HEAD + "      - name: cpu\n        cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}\n",
    )
    npa("local-cloud", "init", check=True)
    result = npa("preview", "--spec", str(spec), "--recipe-dir", str(V4), "--output", "json")
    document = json.loads(result.stdout)  # one JSON document, whatever the preview found
    [warning] = document["warnings"]
    assert 'provider "nebius"' in warning and "api.nebius.cloud:443" in warning
    assert "WARNING" in result.stderr and "api.nebius.cloud:443" in result.stderr
