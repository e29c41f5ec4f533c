"""The override machinery of the default recipe (npa_pulumi/bridge/overrides.py), for real: the same
`check` + `write` applied to the stand-in recipe changes what terraform plans, through Terraform's own merge
of `*_override.tf` files (no provider, no cloud: `terraform_data` only)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from npa_pulumi.bridge import overrides
from npa_pulumi.runtime.toolchain import find_terraform

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
STAND_IN = REPO / "recipes" / "local-k8s-training"

MARKER = overrides.OverrideSet(
    (
        overrides.OverrideFile(
            "k8s-training",
            overrides.DECLARATIONS_FILE,
            'variable "npa_marker" {\n  type    = string\n  default = "override-applied"\n}\n',
            declares=("npa_marker",),
        ),
        overrides.OverrideFile(
            "k8s-training",
            overrides.OVERRIDE_FILE,
            'resource "terraform_data" "cluster_addons" {\n'
            "  triggers_replace = {\n"
            "    cluster_id = local.cluster_id\n"
            "    addons     = jsonencode(merge(local.addons, { npa_marker = var.npa_marker }))\n"
            "  }\n}\n",
            touches=(
                overrides.Touch(
                    "k8s-training",
                    ("resource", "terraform_data", "cluster_addons"),
                    "triggers_replace",
                    "object",
                ),
            ),
        ),
    )
)


def _plan(module: Path, tmp_path: Path) -> dict[str, object]:
    terraform = str(find_terraform())
    env = {
        **os.environ,
        "TF_IN_AUTOMATION": "1",
        "TF_VAR_tenant_id": "tenant-local",
        "TF_VAR_parent_id": "project-existing1",
        "TF_VAR_region": "us-central1",
        "TF_VAR_subnet_id": "vpcsubnet-existing1",
        "TF_VAR_iam_token": "unused",
        "TF_DATA_DIR": str(tmp_path / f"data-{module.parent.name}"),
    }
    (module / "terraform.tfvars.json").write_text(
        json.dumps({"cluster_name": "ovr", "cpu_nodes_fixed_count": 1, "gpu_node_groups": 0, "loki": {}})
    )
    for args in (["init", "-input=false", "-backend=false"], ["plan", "-input=false", "-out=plan.bin"]):
        proc = subprocess.run([terraform, *args], cwd=module, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    shown = subprocess.run(
        [terraform, "show", "-json", "plan.bin"],
        cwd=module,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    [addons] = [
        change
        for change in json.loads(shown.stdout)["resource_changes"]
        if change["address"] == "terraform_data.cluster_addons"
    ]
    after: dict[str, object] = addons["change"]["after"]
    return after


def test_an_override_file_changes_what_terraform_plans(tmp_path: Path) -> None:
    plain, patched = tmp_path / "plain" / "k8s-training", tmp_path / "patched" / "k8s-training"
    shutil.copytree(STAND_IN, plain)
    shutil.copytree(STAND_IN, patched)
    overrides.apply(MARKER, patched.parent, patched.parent, "stand-in")
    assert (patched / "npa_fleet_override.tf").is_file()

    before = json.loads(str(_plan(plain, tmp_path)["triggers_replace"]["addons"]))  # type: ignore[index]
    after = json.loads(str(_plan(patched, tmp_path)["triggers_replace"]["addons"]))  # type: ignore[index]
    assert "npa_marker" not in before
    assert after == {**before, "npa_marker": "override-applied"}
