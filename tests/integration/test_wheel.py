"""The distribution works from an installed wheel: the package data (soperator's stand-in recipe, policy
pack, default tenant) travels with it, and `plan`, `tfvars`, `schema` run without the repository
on the path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from upstream_library import upstream_library

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PINS = tomllib.loads((REPO / "tools" / "pins.toml").read_text())
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
    assert "npa_pulumi/recipes/local-soperator/variables.tf" in names
    assert not [n for n in names if "local-k8s-training" in n]  # the k8s stand-in is gone
    assert "npa_pulumi/policies/fleet-guardrails/PulumiPolicy.yaml" in names
    assert "npa_pulumi/plan/price_catalog.yaml" in names  # the shipped price catalog (plan/prices.py)
    assert "npa_pulumi/data/local-tenant.yaml" in names
    # The toolchain pins the package reads (npa_pulumi/runtime/pins.py): tools/pins.toml itself, copied
    # through the link npa_pulumi/data/pins.toml.
    pins = zipfile.ZipFile(wheel).read("npa_pulumi/data/pins.toml")
    assert pins == (REPO / "tools" / "pins.toml").read_bytes()
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


# ------------------------------------------------------------------ a fresh venv, as pipx would make one

TOOLS_BIN = REPO / ".tools" / "bin"


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv outside the checkout with the wheel installed (its `npa-pulumi` console script).
    Its dependencies are borrowed from this interpreter's site-packages through a .pth file rather than
    downloaded again (the editable npa-pulumi there is not: an editable install needs its own .pth hook,
    which a path added by a .pth file never runs)."""
    import sysconfig

    out = tmp_path_factory.mktemp("venv-wheel")
    source = tmp_path_factory.mktemp("venv-source") / "npa-pulumi"
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(*LOCAL_ONLY))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    build = [*pip, "wheel", str(source), "--no-deps", "--no-build-isolation", "-q", "-w", str(out)]
    subprocess.run(build, check=True, capture_output=True, text=True)
    [wheel] = list(out.glob("npa_pulumi-*.whl"))
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = [*pip, "--python", str(python), "install", "--no-deps", "-q", str(wheel)]
    subprocess.run(install, check=True, capture_output=True, text=True)
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(purelib) / "npa-test-borrowed-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def _tool(
    venv: Path, *args: str, cwd: Path, path: str, home: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NPA_", "PULUMI_", "XDG_")) and k not in ("HOME", "PATH", "VIRTUAL_ENV")
    }
    # A workstation with pipx: no checkout and no toolchain cache of `make tools` (which would be looked up
    # in the account's home, this $HOME being another).
    cache = home / ".cache"
    clean.update(
        {"HOME": str(home), "XDG_CACHE_HOME": str(cache), "PATH": path, "NPA_LOCAL_CLOUD_KUBERNETES_API": "0"}
    )
    clean.update(env)
    return subprocess.run(
        [str(venv / "bin" / "npa-pulumi"), *args],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _fake_pulumi(directory: Path, version: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in (
        ("pulumi", f"#!/bin/sh\necho v{version}\n"),
        ("pulumi-language-python-exec", "#!/bin/sh\n"),
        ("pulumi-resource-pulumi-python", "#!/bin/sh\n"),
    ):
        (directory / name).write_text(text)
        (directory / name).chmod(0o755)
    return directory


def test_a_fresh_venv_plans_prints_the_schema_and_passes_doctor(wheel_venv: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "elsewhere"
    work.mkdir()
    spec = work / "fleet.yaml"
    spec.write_text((REPO / "examples" / "fleet1-test.yaml").read_text())
    path = f"{TOOLS_BIN}{os.pathsep}/usr/local/bin:/usr/bin:/bin"

    plan = _tool(wheel_venv, "plan", "--spec", str(spec), "--output", "json", cwd=work, path=path, home=home)
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["cluster_count"] == 2
    schema = _tool(wheel_venv, "schema", cwd=work, path=path, home=home)
    assert schema.returncode == 0, schema.stderr
    assert "projects" in json.loads(schema.stdout)["properties"]

    doctor = _tool(wheel_venv, "doctor", "--output", "json", cwd=work, path=path, home=home)
    document = json.loads(doctor.stdout)
    checks = {c["name"]: c for c in document["checks"]}
    assert checks["package"]["status"] == "ok", checks["package"]
    assert checks["package"]["details"]["location"].startswith(str(wheel_venv))
    assert checks["engine"]["status"] == "ok", checks["engine"]
    assert checks["engine"]["details"]["source"] == "path"  # no checkout and no cache beside this install
    failed = [name for name, check in checks.items() if check["status"] == "fail"]
    if (TOOLS_BIN / "pulumi-resource-kubernetes").exists():
        assert doctor.returncode == 0 and failed == [], document
    else:  # `make tools` has not built the plugin on this machine yet
        assert failed == ["plugins"] and doctor.returncode == 1, document
        assert "pulumi plugin install resource kubernetes v" in checks["plugins"]["fix"]


def test_the_users_own_pulumi_in_range_is_used_and_outside_refused(wheel_venv: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    supported = _fake_pulumi(tmp_path / "user-pulumi", "3.230.1")
    path = f"{supported}{os.pathsep}{TOOLS_BIN}{os.pathsep}/usr/local/bin:/usr/bin:/bin"
    doctor = _tool(wheel_venv, "doctor", "--output", "json", cwd=tmp_path, path=path, home=home)
    engine = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}["engine"]
    assert engine["status"] == "ok", engine
    assert engine["details"]["version"] == "v3.230.1"
    assert engine["details"]["path"] == str(supported / "pulumi")
    assert "supported range" in engine["summary"]

    strict = _tool(
        wheel_venv, "doctor", "--output", "json", cwd=tmp_path, path=path, home=home, NPA_STRICT_TOOLCHAIN="1"
    )
    engine = {c["name"]: c for c in json.loads(strict.stdout)["checks"]}["engine"]
    assert strict.returncode == 1 and engine["status"] == "fail"
    assert f"exactly v{PINS['pulumi']['version']}" in engine["summary"]

    outside = _fake_pulumi(tmp_path / "old-pulumi", "3.100.0")
    path = f"{outside}{os.pathsep}{TOOLS_BIN}{os.pathsep}/usr/local/bin:/usr/bin:/bin"
    doctor = _tool(wheel_venv, "doctor", "--output", "json", cwd=tmp_path, path=path, home=home)
    engine = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}["engine"]
    assert doctor.returncode == 1 and engine["status"] == "fail"
    supported_range = f">= v{PINS['pulumi']['supported_min']}, < v{PINS['pulumi']['supported_below']}"
    assert supported_range in engine["summary"]
    stacks = _tool(wheel_venv, "stacks", "--output", "json", cwd=tmp_path, path=path, home=home)
    assert stacks.returncode == 1, stacks.stderr
    error = json.loads(stacks.stdout)["error"]
    assert error["kind"] == "toolchain-unsupported" and supported_range in error["message"]


ONE_CLUSTER = """\
apiVersion: npa.fleet/v0.0.1
name: wheel-1c
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
projects:
  - project_id: project-existing1
"""


def test_a_fresh_venv_deploys_and_destroys_a_local_fleet(wheel_venv: Path, tmp_path: Path) -> None:
    """`pipx install` then a one-cluster fleet on the local cloud: up and destroy with nothing of the
    checkout but the toolchain on PATH."""
    home = tmp_path / "home"
    home.mkdir()
    spec = tmp_path / "fleet.yaml"
    spec.write_text(ONE_CLUSTER)
    path = f"{TOOLS_BIN}{os.pathsep}/usr/local/bin:/usr/bin:/bin"

    # The toolchain's other half for the local cloud: the providers' mirror `make tools` lays out beside its
    # bin/, and the default recipe's copy for a machine without GitHub (docs/default-recipe.md).
    mirrors = {
        "NPA_LOCAL_PROVIDER_MIRROR": str(TOOLS_BIN.parent / "terraform-providers"),
        "NPA_K8S_TRAINING_MIRROR": str(upstream_library()),
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return _tool(wheel_venv, *args, cwd=tmp_path, path=path, home=home, **mirrors)

    assert run("local-cloud", "init").returncode == 0
    up = run("up", "--spec", str(spec), "--yes", "--output", "json")
    assert up.returncode == 0, up.stderr[-4000:]
    assert {c["status"] for c in json.loads(up.stdout)["clusters"]} == {"deployed"}
    down = run("destroy", "--spec", str(spec), "--yes", "--output", "json")
    assert down.returncode == 0, down.stderr[-4000:]
    assert (home / ".npa-pulumi" / "state").is_dir()  # the default backend, under this $HOME
