"""`TerraformWorkspace.init` runs `terraform init` only when the work dir is not already initialised for the
same recipe, binary, CLI configuration, plugin cache and lock file, with its provider links intact; a
preview's throw-away copy starts from the stack's init. The terraform here is a script standing in for the
binary (it links a provider from the plugin cache, as init does, and counts its runs)."""

from __future__ import annotations

import stat
from pathlib import Path

from npa_pulumi.bridge.terraform import TerraformWorkspace

FAKE_TERRAFORM = """#!/bin/sh
echo "$1" >> "$COUNT_FILE"
if [ "$1" = "init" ]; then
  mkdir -p .terraform/providers/registry.terraform.io/nebius/nebius
  ln -sfn "$TF_PLUGIN_CACHE_DIR/nebius" .terraform/providers/registry.terraform.io/nebius/nebius/0.6.56
  printf 'provider "registry.terraform.io/nebius/nebius" {}\\n' > .terraform.lock.hcl
fi
"""


def _setup(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    binary = tmp_path / "terraform"
    binary.write_text(FAKE_TERRAFORM)
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    cache = tmp_path / "plugins"
    (cache / "nebius").mkdir(parents=True)
    cli = tmp_path / "cli.tfrc"
    cli.write_text('provider_installation { filesystem_mirror { path = "/m" } }\n')
    count = tmp_path / "runs"
    env = {"PATH": "/usr/bin:/bin", "TF_PLUGIN_CACHE_DIR": str(cache), "TF_CLI_CONFIG_FILE": str(cli)}
    env["COUNT_FILE"] = str(count)
    return binary, env, count


def _workspace(root: Path, binary: Path) -> TerraformWorkspace:
    workspace = TerraformWorkspace(root=root, terraform_bin=binary)
    workspace.module_dir.mkdir(parents=True, exist_ok=True)
    return workspace


def _runs(count: Path) -> int:
    return len(count.read_text().split()) if count.exists() else 0


def test_init_runs_once_for_the_same_recipe_and_again_when_anything_it_depends_on_changes(
    tmp_path: Path,
) -> None:
    binary, env, count = _setup(tmp_path)
    workspace = _workspace(tmp_path / "work", binary)
    workspace.init(env, recipe_digest="digest-1")
    workspace.init(env, recipe_digest="digest-1")
    assert _runs(count) == 1  # initialised for exactly this: nothing to do

    workspace.init(env, recipe_digest="digest-2")  # the recipe (or an override file) changed
    assert _runs(count) == 2
    Path(env["TF_CLI_CONFIG_FILE"]).write_text("provider_installation { direct {} }\n")
    workspace.init(env, recipe_digest="digest-2")  # another CLI configuration
    assert _runs(count) == 3
    workspace.init(env, recipe_digest="digest-2")
    assert _runs(count) == 3

    (workspace.module_dir / ".terraform.lock.hcl").write_text("# edited\n")  # the lock file changed
    workspace.init(env, recipe_digest="digest-2")
    assert _runs(count) == 4

    (tmp_path / "plugins" / "nebius").rmdir()  # the plugin cache was emptied: the provider link dangles
    workspace.init(env, recipe_digest="digest-2")
    assert _runs(count) == 5

    workspace.init(env)  # no digest: nothing to compare, init runs
    assert _runs(count) == 6


def test_a_preview_copy_starts_from_the_stack_s_init(tmp_path: Path) -> None:
    binary, env, count = _setup(tmp_path)
    stack = _workspace(tmp_path / "stack", binary)
    stack.init(env, recipe_digest="digest-1")
    scratch = _workspace(tmp_path / "scratch", binary)
    scratch.adopt_init(stack)
    scratch.init(env, recipe_digest="digest-1")
    assert _runs(count) == 1
    link = scratch.module_dir / ".terraform/providers/registry.terraform.io/nebius/nebius/0.6.56"
    assert link.is_symlink() and link.resolve() == (tmp_path / "plugins" / "nebius").resolve()
    scratch.init(env, recipe_digest="digest-other")  # a changed recipe in the preview: init for it
    assert _runs(count) == 2
