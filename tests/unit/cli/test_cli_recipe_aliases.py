"""The original `npa fleet`'s recipe flags: `--k8s-training-ref REF` / `--k8s-training-dir DIR` are the mk8s
recipe's `--recipe-ref` / `--recipe-dir` wherever those exist (every fleet command, `doctor`, `tfvars`),
shown in --help; both spellings of one flag at once is a usage error (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from upstream_library import upstream_library

from npa_pulumi.cli.fleet_options import merge_recipe_aliases
from npa_pulumi.cli.main import cli
from npa_pulumi.errors import UserInputError
from npa_pulumi.spec.constants import BackendKind

ROOT = Path(__file__).resolve().parents[3]
SPEC = str(ROOT / "examples" / "fleet1-test.yaml")
# The real upstream library (tests/upstream_library.py), named by a placeholder in parametrize so that a
# checkout without ../shared fails the tests that read it, not the collection of this module.
LIBRARY = "<upstream library>"
FLEET_COMMANDS = ["up", "preview", "destroy", "cleanup", "status", "refresh", "kubeconfig", "preflight"]


def _library(arg: str) -> str:
    return str(upstream_library()) if arg == LIBRARY else arg


def test_the_aliases_merge_into_the_recipe_flags() -> None:
    assert merge_recipe_aliases(
        {"recipe_dir": None, "k8s_training_dir": "lib", "recipe_ref": None, "k8s_training_ref": None, "x": 1}
    ) == {"recipe_dir": "lib", "recipe_ref": None, "x": 1}
    assert merge_recipe_aliases({"recipe_ref": None, "k8s_training_ref": "main"}) == {"recipe_ref": "main"}
    assert merge_recipe_aliases({"recipe_ref": "v1"}) == {"recipe_ref": "v1"}  # a command without aliases
    with pytest.raises(click.UsageError, match="--k8s-training-ref is the original npa fleet's name for"):
        merge_recipe_aliases({"recipe_ref": "v1", "k8s_training_ref": "v1"})


@pytest.mark.parametrize("command", FLEET_COMMANDS)
def test_every_fleet_command_shows_both_spellings(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    for flag in ("--recipe-dir", "--k8s-training-dir", "--recipe-ref", "--k8s-training-ref"):
        assert flag in result.output, (command, flag)
    assert "Same as --recipe-ref (the original npa fleet's name for it)." in result.output


@pytest.mark.parametrize("command", ["doctor", "tfvars"])
def test_doctor_and_tfvars_take_the_dir_alias(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "--help"], terminal_width=200)
    assert "--k8s-training-dir" in result.output and "Same as --recipe-dir" in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["up", "--spec", SPEC, "--recipe-ref", "main", "--k8s-training-ref", "main"],
        ["preview", "--spec", SPEC, "--k8s-training-dir", LIBRARY, "--recipe-dir", LIBRARY],
        ["destroy", "--spec", SPEC, "--k8s-training-ref", "v1", "--recipe-ref", "v2", "--dry-run"],
        ["doctor", "--recipe-dir", LIBRARY, "--k8s-training-dir", LIBRARY],
        [
            "tfvars",
            "--spec",
            SPEC,
            "--project",
            "a",
            "--recipe-dir",
            LIBRARY,
            "--k8s-training-dir",
            LIBRARY,
        ],
    ],
)
def test_both_spellings_of_one_flag_are_a_usage_error(args: list[str], isolated_home: Path) -> None:
    result = CliRunner().invoke(cli, [_library(arg) for arg in args])
    assert result.exit_code == 2, result.output
    assert "is the original npa fleet's name for --recipe-" in result.output
    assert "give one of them, not both" in result.output


@pytest.mark.parametrize(
    ("flag", "value", "field"),
    [
        ("--k8s-training-ref", "release-2.1", "recipe_ref"),
        ("--k8s-training-dir", LIBRARY, "recipe_dir"),
        ("--recipe-ref", "main", "recipe_ref"),
    ],
)
def test_an_alias_reaches_the_request_as_the_recipe_flag(
    flag: str, value: str, field: str, monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    captured: dict[str, Any] = {}

    def preview(selected: object, request: Any) -> None:
        captured["request"] = request
        raise UserInputError("stopped before the engine")

    monkeypatch.setattr("npa_pulumi.sdk.operations.preview", preview)
    value = _library(value)
    result = CliRunner().invoke(cli, ["preview", "--spec", SPEC, flag, value, "--output", "json"])
    assert result.exit_code == 2 and "stopped before the engine" in result.output
    request = captured["request"]
    chosen = request.recipes.of(BackendKind.MK8S)
    short = {"recipe_ref": "ref", "recipe_dir": "dir"}
    assert getattr(chosen, short[field]) == value
    other = {"recipe_ref": "recipe_dir", "recipe_dir": "recipe_ref"}[field]
    assert getattr(chosen, short[other]) is None


def test_tfvars_reads_the_recipe_the_alias_names(tmp_path: Path, isolated_home: Path) -> None:
    """`tfvars --k8s-training-dir` decides the emitted variables as `--recipe-dir` does."""
    runner = CliRunner()
    base = ["tfvars", "--spec", SPEC, "--project", "a"]
    canonical = runner.invoke(cli, [*base, "--recipe-dir", _library(LIBRARY)])
    aliased = runner.invoke(cli, [*base, "--k8s-training-dir", _library(LIBRARY)])
    assert canonical.exit_code == aliased.exit_code == 0, aliased.output
    assert json.loads(aliased.stdout) == json.loads(canonical.stdout)
    missing = runner.invoke(cli, [*base, "--k8s-training-dir", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "nowhere" in missing.output  # the alias's directory is read


def test_the_retired_stand_in_variable_is_invalid_input(
    monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    """`NPA_LOCAL_CLOUD_RECIPE=stand-in` once selected the removed k8s-training stand-in: a clear error
    (exit 2, one JSON document) naming what replaced it, never a deployment of something else."""
    monkeypatch.setenv("NPA_LOCAL_CLOUD_RECIPE", "stand-in")
    monkeypatch.delenv("NPA_K8S_TRAINING_DIR", raising=False)
    result = CliRunner().invoke(
        cli, ["preview", "--spec", SPEC, "--cloud", "local", "--no-preflight", "--output", "json"]
    )
    assert result.exit_code == 2, result.output
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "invalid-input" and "default recipe" in error["message"]
    assert "Traceback" not in result.output
