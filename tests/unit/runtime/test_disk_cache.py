"""The per-user disk cache: tool versions and recipe surfaces are computed once per input, recomputed when
the input changes, and a broken cache is never an error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from upstream_library import writable_copy

from npa_pulumi.bridge import recipe as recipe_module
from npa_pulumi.bridge.recipe import MaterializedRecipe, RecipeSource, materialize
from npa_pulumi.bridge.terraform import terraform_version
from npa_pulumi.engine.automation.workspace import pulumi_command
from npa_pulumi.runtime import disk_cache


def _counting_tool(path: Path, version_output: str) -> Path:
    """A stand-in binary that prints a version and counts its own runs in `<path>.runs`."""
    path.write_text(f"#!/bin/sh\necho run >> \"{path}.runs\"\necho '{version_output}'\n")
    path.chmod(0o755)
    return path


def _runs(path: Path) -> int:
    runs = Path(f"{path}.runs")
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def test_store_and_load_round_trip(isolated_home: Path) -> None:
    disk_cache.store("things", "k1", {"a": [1, 2]})
    assert disk_cache.load("things", "k1") == {"a": [1, 2]}
    assert disk_cache.load("things", "missing") is None


def test_corrupt_entry_reads_as_absent(isolated_home: Path) -> None:
    disk_cache.store("things", "k1", "value")
    entry = next((isolated_home / ".npa-pulumi" / "cache" / "things").glob("k1.json"))
    entry.write_text("{not json")
    assert disk_cache.load("things", "k1") is None


def test_unwritable_cache_is_not_an_error(isolated_home: Path) -> None:
    blocker = isolated_home / ".npa-pulumi" / "cache"
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("a file where the cache directory should be")
    disk_cache.store("things", "k1", "value")  # must not raise
    assert disk_cache.load("things", "k1") is None


def test_unserialisable_value_is_skipped(isolated_home: Path) -> None:
    disk_cache.store("things", "k1", {"a": object()})
    assert disk_cache.load("things", "k1") is None
    assert not list((isolated_home / ".npa-pulumi" / "cache").rglob("*.tmp"))


def test_terraform_version_runs_the_binary_once_per_binary(isolated_home: Path, tmp_path: Path) -> None:
    tool = _counting_tool(tmp_path / "terraform", '{"terraform_version": "1.9.3"}')
    assert terraform_version(tool) == (1, 9, 3)
    assert terraform_version(tool) == (1, 9, 3)
    assert _runs(tool) == 1
    # A changed binary (another size and mtime) is asked again.
    _counting_tool(tool, '{"terraform_version": "1.10.0", "platform": "linux_amd64"}')
    os.utime(tool, ns=(1, 1))
    assert terraform_version(tool) == (1, 10, 0)
    assert _runs(tool) == 2


def test_pulumi_version_is_checked_once_per_binary(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from importlib.metadata import version

    pinned = version("pulumi")
    bin_dir = tmp_path / "engine" / "bin"
    bin_dir.mkdir(parents=True)
    tool = _counting_tool(bin_dir / "pulumi", f"v{pinned}")
    monkeypatch.setenv("NPA_PULUMI_BIN", str(tool))
    pulumi_command.cache_clear()
    try:
        first = pulumi_command()
        pulumi_command.cache_clear()
        second = pulumi_command()
    finally:
        pulumi_command.cache_clear()
    assert _runs(tool) == 1
    assert str(first.version) == str(second.version) == pinned
    assert first.command == second.command == str(tool)


def test_recipe_surface_is_parsed_once_across_processes(isolated_home: Path, tmp_path: Path) -> None:
    recipe_module._SURFACES.clear()  # another test in this process may have parsed the same recipe
    source = RecipeSource("dir", str(writable_copy(tmp_path / "library")))  # the real upstream module
    recipe = materialize(source, tmp_path / "work", "eu-north1", tmp_path / "cache")
    parsed = (recipe.facts, recipe.variables)
    assert {"parent_id", "subnet_id", "region"} <= parsed[1]
    assert parsed[0]["filesystem_attachments"] and parsed[0]["filesystem_mount"]  # facts were read too

    # A new process has an empty in-process memo; the surface then comes from the disk cache, equal.
    recipe_module._SURFACES.clear()
    entries = list((isolated_home / ".npa-pulumi" / "cache" / "recipe-surface").glob("*.json"))
    assert len(entries) == 1
    again = MaterializedRecipe(module_dir=tmp_path / "nowhere", digest=recipe.digest)
    assert (again.facts, again.variables) == parsed  # read without the HCL (the dir does not exist)

    # Another recipe (another digest) is parsed on its own.
    extra = tmp_path / "library" / "k8s-training" / "extra.tf"
    extra.write_text('variable "extra_knob" {\n  type = string\n}\n')
    recipe_module._SURFACES.clear()
    changed = materialize(source, tmp_path / "work2", "eu-north1", tmp_path / "cache")
    assert changed.digest != recipe.digest
    assert "extra_knob" in changed.variables
