"""The layering contract (tools/check_layers.py) holds for the whole package, and the check really catches
what it forbids: an upward import (also one hidden in a function or under TYPE_CHECKING), an import between
siblings, a policy pack reaching past the runtime, a package in no layer, a cycle, and a module of a fenced
package (engine/automation) imported past its face."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[3]


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_layers", REPO / "tools" / "check_layers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_layers"] = module
    spec.loader.exec_module(module)
    return module


check_layers = _checker()


def test_every_import_of_the_package_points_down() -> None:
    assert check_layers.violations() == []


def test_the_contract_covers_every_package() -> None:
    packages = {p.name for p in (REPO / "npa_pulumi").iterdir() if (p / "__init__.py").exists()}
    layered = {member for layer in check_layers.LAYERS for member in layer}
    assert packages == layered


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the package's sources to break on purpose."""
    for name in ("npa_pulumi", "components", "policies"):
        shutil.copytree(
            REPO / name, tmp_path / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
        )
    assert check_layers.violations(tmp_path) == []
    return tmp_path


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def test_an_upward_import_fails(tree: Path) -> None:
    _append(tree / "npa_pulumi/runtime/home.py", "\nfrom npa_pulumi.engine.automation import stacks\n")
    problem, cycle, module_cycle = check_layers.violations(tree)
    assert module_cycle.startswith("module cycle among: ")  # the modules that now import each other
    assert problem.startswith("npa_pulumi/runtime/home.py:")
    assert "runtime may not import engine, a higher layer" in problem
    assert cycle.startswith("package cycle among: ") and "engine" in cycle and "runtime" in cycle


def test_a_hidden_upward_import_fails(tree: Path) -> None:
    _append(
        tree / "npa_pulumi/spec/names.py",
        "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..plan import Target\n"
        "\ndef _late() -> None:\n    import npa_pulumi.cli.main\n",
    )
    found = check_layers.violations(tree)
    *problems, cycle = [p for p in found if not p.startswith("module cycle among: ")]
    assert len(problems) == 2
    assert all(p.startswith("npa_pulumi/spec/names.py:") and "spec may not import" in p for p in problems)
    assert cycle.startswith("package cycle among: ")


def test_siblings_and_the_policy_pack_are_fenced(tree: Path) -> None:
    _append(
        tree / "npa_pulumi/cloud/factory.py", "\nimport npa_pulumi.spec.models\n"
    )  # spec imports no cloud
    _append(tree / "policies/fleet_guardrails_lib/facts.py", "\nfrom npa_pulumi.spec import load_spec\n")
    problems = check_layers.violations(tree)
    assert len(problems) == 2
    assert any("cloud and spec are siblings of one layer" in p for p in problems)
    assert any("policies may import only runtime" in p for p in problems)


def test_a_package_in_no_layer_fails(tree: Path) -> None:
    (tree / "npa_pulumi/verifiers").mkdir()
    (tree / "npa_pulumi/verifiers/__init__.py").write_text("")
    [problem] = check_layers.violations(tree)
    assert "npa_pulumi.verifiers is in no layer" in problem


def test_cycles_are_found() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "b"}, "d": {"a"}, "e": {"f"}, "f": {"e"}}
    assert check_layers.cycles(edges) == [["a", "b", "c", "a"], ["e", "f", "e"]]
    assert check_layers.cycles({"a": {"b"}, "b": set()}) == []


def test_a_module_cycle_inside_a_package_fails_even_hidden_in_a_function(tree: Path) -> None:
    """Two engine modules that import each other (one of the imports inside a function, as the old
    orchestrator hid its cycle) are a module cycle, though the package graph is unchanged."""
    _append(
        tree / "npa_pulumi/engine/liveness.py",
        "\n\ndef _late() -> None:\n    from npa_pulumi.engine.operations import up  # noqa: F401\n",
    )
    [problem] = check_layers.violations(tree)
    assert problem.startswith("module cycle among: ")
    assert "npa_pulumi.engine.liveness" in problem and "npa_pulumi.engine.operations.up" in problem


def test_a_type_checking_module_cycle_fails(tree: Path) -> None:
    _append(
        tree / "npa_pulumi/engine/share.py",
        "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from npa_pulumi.engine.context import X\n",
    )
    [problem] = check_layers.violations(tree)
    assert problem.startswith("module cycle among: ") and "npa_pulumi.engine.share" in problem


def test_only_the_automation_fence_imports_pulumi_automation(tree: Path) -> None:
    _append(tree / "npa_pulumi/engine/liveness.py", "\nfrom pulumi import automation as auto\n")
    _append(tree / "npa_pulumi/sdk/fleet.py", "\nimport pulumi.automation\n")
    problems = check_layers.violations(tree)
    assert len(problems) == 2
    assert all("imports pulumi.automation: only npa_pulumi.engine.automation may" in p for p in problems)
    assert {p.split(":")[0] for p in problems} == {"npa_pulumi/engine/liveness.py", "npa_pulumi/sdk/fleet.py"}


def test_only_the_simulators_entry_points_import_it(tree: Path) -> None:
    _append(tree / "npa_pulumi/machine/backend_init.py", "\nfrom npa_pulumi.simulator import seaweedd\n")
    _append(
        tree / "npa_pulumi/cli/doctor_commands.py",
        "\ndef _late() -> None:\n    import npa_pulumi.simulator\n",
    )
    _append(
        tree / "npa_pulumi/simulator_cli/commands.py", "\nfrom npa_pulumi.simulator import ids\n"
    )  # its CLI
    problems = check_layers.violations(tree)
    assert [p.split(":")[0] for p in problems] == [
        "npa_pulumi/cli/doctor_commands.py",
        "npa_pulumi/machine/backend_init.py",
    ]
    assert all("reaches the local simulator only through its entry points" in p for p in problems)


def test_nothing_imports_the_simulators_cli(tree: Path) -> None:
    _append(tree / "npa_pulumi/cli/main.py", "\nfrom npa_pulumi.simulator_cli import commands\n")
    problem, cycle = check_layers.violations(tree)
    assert problem.startswith("npa_pulumi/cli/main.py:")
    assert "cli may not import simulator_cli, a higher layer" in problem
    assert cycle == "package cycle among: cli, simulator_cli"


def test_a_fenced_package_is_imported_through_its_face_only(tree: Path) -> None:
    """Outside engine/automation its modules are never imported (a name of the face, or the package, is
    fine: `from npa_pulumi.engine.automation import StackOp`); inside it, its modules import each other."""
    face = "npa_pulumi.engine.automation"
    _append(tree / "npa_pulumi/engine/liveness.py", f"\nfrom {face} import diy_backend\n")
    _append(
        tree / "npa_pulumi/sdk/fleet.py",
        "\n\ndef _late() -> None:\n    import npa_pulumi.engine.automation.workspace  # noqa: F401\n",
    )
    _append(tree / "npa_pulumi/engine/status.py", "\nfrom npa_pulumi.engine.automation import StackOp\n")
    _append(tree / "npa_pulumi/engine/costs.py", "\nfrom npa_pulumi.engine import automation\n")
    _append(tree / "npa_pulumi/engine/automation/tags.py", f"\nfrom {face} import workspace\n")
    problems = check_layers.violations(tree)
    assert len(problems) == 2
    assert all("is imported through its face (npa_pulumi.engine.automation)" in p for p in problems)
    assert {p.split(":")[0] for p in problems} == {"npa_pulumi/engine/liveness.py", "npa_pulumi/sdk/fleet.py"}
    assert any("imports npa_pulumi.engine.automation.workspace" in p for p in problems)
