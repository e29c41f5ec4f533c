"""The default recipe for `--cloud nebius`: upstream k8s-training at a pinned commit plus npa-pulumi's own
override files (npa_pulumi/bridge/overrides.py), checked against the real module beside the checkout
(tests/upstream_library.py, parsed with python-hcl2). The fetch is the `--recipe-ref` code
path (`_git_checkout` of `<url>@<commit>`); here it fetches a local git repository of the fixture, since
this machine cannot reach GitHub."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from upstream_library import upstream_library, writable_copy

from npa_pulumi.bridge import overrides
from npa_pulumi.bridge.recipe import (
    UPSTREAM_REPO_URL,
    RecipeError,
    RecipeSource,
    compatibility_problems,
    default_source,
    materialize,
    resolve_source,
)
from npa_pulumi.errors import UserInputError
from npa_pulumi.plan import render_tfvars, resolve_targets
from npa_pulumi.plan.recipe_surface import MIG_RECIPE_VARIABLES
from npa_pulumi.spec.parse import load_spec, parse_spec

REPO = Path(__file__).resolve().parents[3]
V4 = upstream_library()


def _git_repo(src: Path, dest: Path) -> str:
    shutil.copytree(src, dest)
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "fixture"]):
        subprocess.run(["git", "-C", str(dest), *args], check=True, env={**env, "PATH": "/usr/bin:/bin"})
    return subprocess.run(
        ["git", "-C", str(dest), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_nebius_without_a_recipe_flag_gets_the_pinned_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NPA_K8S_TRAINING_DIR", raising=False)
    monkeypatch.delenv("NPA_RECIPE_REPO_URL", raising=False)
    source = resolve_source("nebius")
    assert source == RecipeSource("default", f"{UPSTREAM_REPO_URL}@{overrides.DEFAULT_K8S_TRAINING_COMMIT}")
    assert resolve_source("nebius", recipe_ref="main").kind == "git"  # the flags still win
    assert resolve_source("nebius", recipe_dir=str(V4)).kind == "dir"


def test_the_local_cloud_deploys_the_same_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NPA_K8S_TRAINING_DIR", raising=False)
    monkeypatch.delenv("NPA_LOCAL_CLOUD_RECIPE", raising=False)
    assert resolve_source("local") == resolve_source("nebius") == default_source()
    monkeypatch.setenv("NPA_LOCAL_CLOUD_RECIPE", "default")  # the retired variable's other values: ignored
    assert resolve_source("local") == default_source()


def test_the_retired_k8s_stand_in_is_refused_naming_what_replaced_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("NPA_K8S_TRAINING_DIR", raising=False)
    monkeypatch.setenv("NPA_LOCAL_CLOUD_RECIPE", "stand-in")
    with pytest.raises(UserInputError) as refused:
        resolve_source("local")
    message = str(refused.value)
    assert "recipes/local-k8s-training" in message and "was removed" in message
    assert "default recipe" in message and "NPA_K8S_TRAINING_MIRROR" in message
    assert resolve_source("local", recipe_dir=str(V4)).kind == "dir"  # an explicit recipe still wins
    # A stack whose state names the stand-in: refused before anything is copied into its work dir.
    with pytest.raises(RecipeError, match="no local stand-in"):
        materialize(RecipeSource("local-stand-in", "x"), tmp_path / "work", "eu-north1", tmp_path / "cache")
    assert not (tmp_path / "work").exists()


def test_every_block_and_argument_an_override_touches_exists_upstream() -> None:
    assert overrides.problems(overrides.default_overrides(), V4) == []


def test_the_override_files_carry_the_fleet_wiring() -> None:
    files = {(f.module, f.name): f.text for f in overrides.default_overrides().files}
    root = files[("k8s-training", "npa_fleet_override.tf")]
    assert "device_preset = var.gpu_nodes_driver_preset" in root
    assert (
        'module "gpu-operator" {' in root
        and "npa_fleet_values      = local.npa_fleet_gpu_operator_values" in root
    )
    assert "toolkit_config_source = local.npa_fleet_toolkit_config_source" in root
    declarations = files[("k8s-training", "npa_fleet_variables.tf")]
    for name in (*MIG_RECIPE_VARIABLES, "gpu_operator_rtx_driver_profile", "gpu_nodes_driver_preset"):
        assert f'variable "{name}"' in declarations
    assert '"operator.version" = var.gpu_operator_version' in declarations
    assert '"driver.repoConfig.configMapName"' in declarations
    release = files[("modules/gpu-operator", "npa_fleet_override.tf")]
    assert "set     = merge(local.helm_values, var.npa_fleet_values)" in release


def test_each_node_group_takes_its_pool_s_version_else_the_cluster_s() -> None:
    """Issue 58: a pinned pool holds its version while the control plane moves, so each upstream node group
    (cpu-only, gpu, gb300) reads its pool's variable, falling back to `k8s_version` when it is null."""
    files = {(f.module, f.name): f for f in overrides.default_overrides().files}
    versions = files[("k8s-training", "npa_fleet_versions_override.tf")]
    for label, variable in (
        ("cpu-only", "npa_fleet_cpu_nodes_version"),
        ("gpu", "npa_fleet_gpu_nodes_version"),
        ("gb300", "npa_fleet_gpu_nodes_version"),
    ):
        assert (
            f'resource "nebius_mk8s_v1_node_group" "{label}" {{\n'
            f"  version = var.{variable} == null ? var.k8s_version : var.{variable}\n}}"
        ) in versions.text
        assert (
            overrides.Touch(
                "k8s-training", ("resource", "nebius_mk8s_v1_node_group", label), "version", "expression"
            )
            in versions.touches
        )
    declarations = files[("k8s-training", "npa_fleet_variables.tf")]
    for variable in overrides.NODE_GROUP_VERSION_VARIABLES:
        assert f'variable "{variable}"' in declarations.text and variable in declarations.declares


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (
            lambda lib: (lib / "k8s-training" / "main.tf").write_text(
                (lib / "k8s-training" / "main.tf")
                .read_text()
                .replace(
                    'resource "nebius_mk8s_v1_node_group" "gpu"',
                    'resource "nebius_mk8s_v1_node_group" "gpus"',
                )
            ),
            'resource "nebius_mk8s_v1_node_group" "gpu" block',
        ),
        (
            lambda lib: (lib / "k8s-training" / "main.tf").write_text(
                re.sub(
                    r"\n  version  = var\.k8s_version\n",
                    "\n",
                    (lib / "k8s-training" / "main.tf").read_text(),
                    count=1,
                )
            ),
            'resource "nebius_mk8s_v1_node_group" "cpu-only" has no argument version',
        ),
    ],
)
def test_a_revision_without_the_node_groups_version_is_refused(
    tmp_path: Path, edit: object, named: str
) -> None:
    library = writable_copy(tmp_path / "lib")
    edit(library)  # type: ignore[operator]
    assert named in "; ".join(overrides.problems(overrides.default_overrides(), library))


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda lib: (lib / "k8s-training" / "helm.tf").unlink(), 'module "gpu-operator" block'),
        (
            lambda lib: (lib / "k8s-training" / "locals.tf").write_text(
                (lib / "k8s-training" / "locals.tf").read_text().replace("device_preset", "preset_of_device")
            ),
            "argument device_preset",
        ),
        (
            lambda lib: (lib / "modules" / "gpu-operator" / "variables.tf").write_text(
                re.sub(
                    r'(variable "toolkit_config_source" \{[^}]*?type\s*=\s*)string',
                    r"\1bool",
                    (lib / "modules" / "gpu-operator" / "variables.tf").read_text(),
                )
            ),
            "toolkit_config_source is bool, not string",
        ),
        (lambda lib: shutil.rmtree(lib / "modules" / "gpu-operator"), "modules/gpu-operator/ is missing"),
    ],
)
def test_a_revision_without_a_target_is_refused_before_any_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: object, named: str
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("NPA_K8S_TRAINING_MIRROR", raising=False)
    library = writable_copy(tmp_path / "lib-src")
    edit(library)  # type: ignore[operator]
    sha = _git_repo(library, tmp_path / "lib")
    work = tmp_path / "work"
    with pytest.raises(overrides.OverrideTargetError) as raised:
        materialize(
            RecipeSource("default", f"file://{tmp_path / 'lib'}@{sha}"), work, "us-central1", tmp_path / "c"
        )
    assert named in str(raised.value) and sha in str(raised.value)
    assert not work.exists()  # refused before the work dir was touched


@pytest.fixture
def default_recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("NPA_K8S_TRAINING_MIRROR", raising=False)
    sha = _git_repo(writable_copy(tmp_path / "upstream-src"), tmp_path / "upstream")
    recipe = materialize(
        RecipeSource("default", f"file://{tmp_path / 'upstream'}@{sha}"),
        tmp_path / "work",
        "us-central1",
        tmp_path / "c",
    )
    assert (recipe.module_dir / "npa_fleet_override.tf").is_file()
    assert (tmp_path / "work" / "modules" / "gpu-operator" / "npa_fleet_override.tf").is_file()
    assert not (
        tmp_path / "upstream" / "k8s-training" / "npa_fleet_override.tf"
    ).exists()  # upstream untouched
    return recipe.variables


def test_the_default_recipe_takes_mig_rtx_and_driver_preset_clusters(default_recipe: set[str]) -> None:
    for shape in ({"mig": True}, {"rtx_profile": True}, {"managed_image": True}):
        flags = {"mig": False, "rtx_profile": False, "managed_image": False, **shape}
        assert compatibility_problems(default_recipe, **flags) == []


def test_the_example_fleets_plan_against_the_default_recipe(default_recipe: set[str]) -> None:
    mig = resolve_targets(load_spec(REPO / "examples" / "rtxpro-mig.yaml"))
    for target in mig:
        tfvars = render_tfvars(target, default_recipe, "ssh-ed25519 AAAA test")
        assert tfvars.file_vars["gpu_operator_version"]
        assert tfvars.file_vars["mig_strategy"] == "mixed"
        assert "gpu_nodes_reservation_policy" in tfvars.runtime_vars
    fleet1 = (REPO / "examples" / "fleet1-test.yaml").read_text()
    assert "filestore_mount_tag: data" in fleet1
    # The default recipe cannot rename upstream's hardcoded virtiofs tag ("data"): refused, not rewritten
    # (the original's own example says npa-shared-fs).
    with pytest.raises(Exception, match="filestore_mount_tag"):
        renamed = fleet1.replace("filestore_mount_tag: data", "filestore_mount_tag: npa-shared-fs")
        for target in resolve_targets(parse_spec(renamed)):
            render_tfvars(target, default_recipe, "ssh-ed25519 AAAA test")
    for profile in ("", "  gpu_workload_profile: rtx-rendering\n"):
        text = fleet1.replace(
            "  gpu_driver_mode: auto\n  managed_driver_preset: cuda13.0\n",
            profile or "  gpu_driver_mode: managed-image\n  managed_driver_preset: cuda12.8\n",
        )
        for target in resolve_targets(parse_spec(text)):
            rendered = render_tfvars(target, default_recipe, "ssh-ed25519 AAAA test").file_vars
            if profile:
                assert rendered["gpu_operator_rtx_driver_profile"]["platform"] == "gpu-rtx6000"
            else:
                assert rendered["gpu_nodes_driver_preset"] == "cuda12.8"
