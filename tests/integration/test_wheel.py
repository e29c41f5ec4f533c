"""The distribution works from an installed wheel: the package data (stand-in recipe, policy pack, default
tenant) travels with it, and `plan`, `tfvars`, `schema` run without the repository on the path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LOCAL_ONLY = (".git", ".venv", ".tools", "build", "dist", "*.egg-info", "__pycache__", "*_cache", "out")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # From a copy without build outputs: setuptools reuses a checkout's build/lib, and a module moved out
    # of the package since the last build would otherwise still be packed from there.
    source = tmp_path_factory.mktemp("source") / "npa-pulumi"
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(*LOCAL_ONLY))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(source),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    [wheel] = list(out.glob("npa_pulumi-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if not n.startswith(("npa_pulumi/", "npa_pulumi-"))], (
        "generic top-level names"
    )
    assert "npa_pulumi/recipes/local-k8s-training/variables.tf" in names
    assert "npa_pulumi/policies/fleet-guardrails/PulumiPolicy.yaml" in names
    assert "npa_pulumi/plan/price_catalog.yaml" in names  # the shipped price catalog (plan/prices.py)
    assert "npa_pulumi/data/local-tenant.yaml" in names
    assert "npa_pulumi/components/terraform_module.py" in names
    assert not [n for n in names if "__pycache__" in n]
    assert "npa_pulumi/policies/catalog.py" in names
    assert "npa_pulumi/runtime/locks.py" in names
    # Test helpers stay in the repository (tests/guardrails_testing.py was policies/.../testing.py).
    assert not [n for n in names if n.endswith(("/testing.py", "/conftest.py")) or "/tests/" in n]
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        text=True,
    )
    return target


def _run(installed: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # The installed copy comes first on the path; the run happens outside the repository.
    env = {**os.environ, "PYTHONPATH": str(installed)}
    return subprocess.run(
        [sys.executable, "-m", "npa_pulumi.cli.main", *args], cwd=cwd, env=env, capture_output=True, text=True
    )


def test_installed_wheel_plans_renders_and_prints_schema(installed: Path, tmp_path: Path) -> None:
    spec = tmp_path / "fleet.yaml"
    spec.write_text((REPO / "examples" / "fleet1-test.yaml").read_text())
    where = subprocess.run(
        [sys.executable, "-c", "import npa_pulumi; print(npa_pulumi.__file__)"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(installed)},
        capture_output=True,
        text=True,
    )
    assert where.stdout.startswith(str(installed)), where.stdout

    plan = _run(installed, "plan", "--spec", str(spec), "--output", "json", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["cluster_count"] == 2

    tfvars = _run(
        installed, "tfvars", "--spec", str(spec), "--project", "a", "--cluster", "cluster", cwd=tmp_path
    )
    assert tfvars.returncode == 0, tfvars.stderr
    assert json.loads(tfvars.stdout)["cluster_name"] == "cluster"

    schema = _run(installed, "schema", cwd=tmp_path)
    assert schema.returncode == 0, schema.stderr
    assert "projects" in json.loads(schema.stdout)["properties"]

    policies = _run(installed, "policy", "list", "--output", "json", cwd=tmp_path)
    assert policies.returncode == 0, policies.stderr
    assert "strict-capacity-reservation" in policies.stdout
