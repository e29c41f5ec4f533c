"""`npa-pulumi plan | tfvars | schema`: output contract, exit codes, no tracebacks, no secrets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner, Result
from upstream_library import upstream_library

from npa_pulumi.cli.main import cli

# `tfvars` reads the default recipe through the per-user cache (its parsed surface): never the real home's.
pytestmark = pytest.mark.usefixtures("isolated_home")

REPO = Path(__file__).resolve().parents[3]
CBG = "capacityblockgroup-e00private"

SPEC = f"""\
apiVersion: npa.fleet/v0.0.1
name: demo
region: eu-north1
project_prefix: demo-
defaults:
  cpu_nodes: {{count: 1, platform: cpu-d3, preset: 16vcpu-64gb}}
projects:
  - name: a
    clusters:
      - name: train
        gpu_nodes: {{count: 2, platform: gpu-rtx6000, preset: 1gpu-24vcpu-218gb, capacity_block_group: {CBG}}}
      - name: infer
  - name: b
"""

BAD = """\
apiVersion: npa.fleet/v0.0.1
name: demo
defaults:
  gpu_nodse: {count: 1}
projects:
  - name: a
    clusters:
      - cpu_nodes: {count: -1}
"""


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(SPEC)
    return path


@pytest.fixture
def bad_file(tmp_path: Path) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    return path


def test_plan_text(spec_file: Path) -> None:
    result = run("plan", "--spec", str(spec_file))
    assert result.exit_code == 0, result.stderr
    assert "Fleet demo: 3 cluster(s) across 2 project(s)" in result.stdout
    assert "Project a → demo-a (will create)" in result.stdout
    assert "train" in result.stdout and "strict" in result.stdout
    assert CBG not in result.stdout + result.stderr


def test_plan_json_is_exactly_one_document(spec_file: Path) -> None:
    result = run("plan", "-f", str(spec_file), "--output", "json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)  # fails on anything but a single JSON document
    assert (document["project_count"], document["cluster_count"]) == (2, 3)
    assert document["projects"][0]["clusters"][0]["gpu_reservation"] == "strict"
    assert CBG not in result.stdout + result.stderr


def test_plan_selectors(spec_file: Path) -> None:
    result = run(
        "plan", "-f", str(spec_file), "-o", "json", "--only-projects", "demo-a", "--only-clusters", "infer"
    )
    document = json.loads(result.stdout)
    assert [(p["key"], [c["name"] for c in p["clusters"]]) for p in document["projects"]] == [
        ("a", ["infer"])
    ]


def test_plan_prefix_override(spec_file: Path) -> None:
    result = run(
        "plan", "-f", str(spec_file), "-o", "json", "--project-prefix", "ops-", "--only-projects", "ops-b"
    )
    assert json.loads(result.stdout)["projects"][0]["display_name"] == "ops-b"


def test_bad_spec_text_exits_2_with_located_problems(bad_file: Path) -> None:
    result = run("plan", "--spec", str(bad_file))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert (
        f"{bad_file}:4:3: defaults.gpu_nodse: unknown field 'gpu_nodse' (did you mean 'gpu_nodes'?)"
        in result.stderr
    )
    assert (
        f"{bad_file}:8:21: projects[0].clusters[0].cpu_nodes.count: cpu_nodes.count cannot be negative"
        in result.stderr
    )
    assert "Traceback" not in result.stderr


def test_bad_spec_json_exits_2_with_one_document(bad_file: Path) -> None:
    result = run("plan", "--spec", str(bad_file), "--output", "json")
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    assert document["ok"] is False
    assert document["error"]["kind"] == "invalid-spec"
    paths = [p["path"] for p in document["error"]["problems"]]
    assert paths == [
        "defaults.gpu_nodse",
        "projects[0].clusters[0]",
        "projects[0].clusters[0].cpu_nodes.count",
    ]
    assert document["error"]["problems"][0]["line"] == 4


@pytest.mark.parametrize("content", [b"", b"- a\n", b"name: [", b"\xff\xfe\x00", b"a: &a [*a]\n"])
def test_unusable_files_exit_2_without_traceback(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_bytes(content)
    result = run("plan", "--spec", str(path), "-o", "json")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["kind"] == "invalid-spec"
    assert "Traceback" not in result.stderr


def test_missing_spec_file_and_missing_option(tmp_path: Path) -> None:
    result = run("plan", "--spec", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2 and "spec file not found" in result.stderr
    result = run("plan", "-o", "json")
    assert result.exit_code == 2 and "--spec is required" in json.loads(result.stdout)["error"]["message"]


def test_unknown_selector_exits_2_naming_choices(spec_file: Path) -> None:
    result = run("plan", "-f", str(spec_file), "--only-projects", "c")
    assert result.exit_code == 2
    assert "valid choices" in result.stderr and "a (demo-a)" in result.stderr
    result = run("plan", "-f", str(spec_file), "-o", "json", "--only-clusters", "nope")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["valid_choices"] == ["train", "infer", "cluster"]


def test_bad_output_format_is_a_usage_error(spec_file: Path) -> None:
    assert run("plan", "-f", str(spec_file), "-o", "yaml").exit_code == 2


def test_tfvars_prints_the_file_and_masks_runtime_variables(spec_file: Path) -> None:
    result = run("tfvars", "--spec", str(spec_file), "--project", "a", "--cluster", "train")
    assert result.exit_code == 0, result.stderr
    file_vars = json.loads(result.stdout)
    assert file_vars["cluster_name"] == "train"
    assert (file_vars["gpu_nodes_fixed_count_per_group"], file_vars["gpu_node_groups"]) == (1, 2)
    assert "gpu_nodes_reservation_policy" not in file_vars
    assert "TF_VAR_gpu_nodes_reservation_policy" in result.stderr and '"****"' in result.stderr
    assert CBG not in result.stdout + result.stderr
    assert "TF_VAR_tenant_id" in result.stderr


def test_tfvars_single_cluster_needs_no_selectors(tmp_path: Path) -> None:
    path = tmp_path / "one.yaml"
    path.write_text(
        "name: one\nprojects:\n  - name: a\n    clusters: [{cpu_nodes: {count: 1, preset: 4vcpu-16gb}}]\n"
    )
    result = run("tfvars", "-f", str(path))
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["cpu_nodes_fixed_count"] == 1


def test_tfvars_ambiguous_target_exits_2(spec_file: Path) -> None:
    result = run("tfvars", "-f", str(spec_file), "--project", "a")
    assert result.exit_code == 2
    assert "2 clusters match" in result.stderr and "--cluster infer" in result.stderr


def test_tfvars_with_a_recipe_dir(spec_file: Path, tmp_path: Path) -> None:
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    names = [
        "cluster_name",
        "cpu_nodes_fixed_count",
        "cpu_nodes_platform",
        "cpu_nodes_preset",
        "cpu_disk_size",
        "gpu_nodes_fixed_count_per_group",
        "gpu_node_groups",
        "infiniband_fabric",
        "enable_gpu_cluster",
    ]
    (recipe / "variables.tf").write_text("".join(f'variable "{n}" {{}}\n' for n in names))
    result = run("tfvars", "-f", str(spec_file), "--project", "b", "--recipe-dir", str(recipe))
    assert result.exit_code == 0, result.stderr
    assert set(json.loads(result.stdout)) <= set(names)
    assert "not declared by the recipe, left out:" in result.stderr and "loki" in result.stderr
    # The reserved pool needs gpu_nodes_reservation_policy, which this recipe lacks.
    result = run(
        "tfvars", "-f", str(spec_file), "--project", "a", "--cluster", "train", "--recipe-dir", str(recipe)
    )
    assert result.exit_code == 2
    assert "gpu_nodes_reservation_policy" in result.stderr and CBG not in result.stderr
    assert result.stdout == ""


def test_tfvars_reads_the_default_recipe_where_this_machine_has_it(
    spec_file: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    # The real module (upstream + the fleet's override files), as a deployment renders for it: variables
    # upstream does not declare (enable_gpu_cluster) are left out, as `up` leaves them out.
    monkeypatch.setenv("NPA_K8S_TRAINING_MIRROR", str(upstream_library()))
    result = run("tfvars", "-f", str(spec_file), "--project", "b")
    assert result.exit_code == 0, result.stderr
    assert "enable_gpu_cluster" not in json.loads(result.stdout)
    assert "left out: " in result.stderr and "enable_gpu_cluster" in result.stderr
    assert "not on this machine" not in result.stderr


def test_tfvars_without_the_default_recipe_shows_the_renderer_s_surface_and_says_so(
    spec_file: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    monkeypatch.delenv("NPA_K8S_TRAINING_MIRROR", raising=False)
    result = run("tfvars", "-f", str(spec_file), "--project", "b")
    assert result.exit_code == 0, result.stderr
    assert "enable_gpu_cluster" in json.loads(result.stdout)
    assert "the default recipe is not on this machine (set NPA_K8S_TRAINING_MIRROR" in result.stderr
    assert not (isolated_home / ".npa-pulumi" / "cache" / "recipes").exists()  # nothing was fetched


def test_tfvars_unreadable_recipe_dir_exits_2(spec_file: Path, tmp_path: Path) -> None:
    result = run("tfvars", "-f", str(spec_file), "--project", "b", "--recipe-dir", str(tmp_path / "none"))
    assert result.exit_code == 2 and "recipe directory not found" in result.stderr


def test_schema_is_a_valid_json_schema_that_checks_specs() -> None:
    result = run("schema")
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    good = {"apiVersion": "npa.fleet/v0.0.1", "name": "x", "projects": [{"name": "a"}]}
    assert not list(validator.iter_errors(good))
    bad = {**good, "defaults": {"gpu_nodse": {}}}
    assert list(validator.iter_errors(bad))


def test_console_script_plan_json(spec_file: Path) -> None:
    script = Path(sys.executable).parent / "npa-pulumi"
    assert script.exists(), "the console script is installed in the venv"
    done = subprocess.run(
        [str(script), "plan", "--spec", str(spec_file), "--output", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["cluster_count"] == 3
    bad = subprocess.run(
        [str(script), "plan", "--spec", str(spec_file.with_name("absent.yaml"))],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "spec file not found" in bad.stderr


def test_markup_like_keys_are_printed_verbatim(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(
        'name: demo\n"[/bold]": 1\n"[red]x": 2\n'
        "projects: [{name: a, clusters: [{cpu_nodes: {count: 1, preset: 4vcpu-16gb}}]}]\n"
    )
    result = run("plan", "--spec", str(path))
    assert result.exit_code == 2
    assert "unknown field '[/bold]'" in result.stderr and "unknown field '[red]x'" in result.stderr
    assert "Traceback" not in result.stderr
