"""The soperator recipe (nebius-solutions-library `soperator/installations/example`): where it comes from,
how it is made ready to run, and the variables the fleet needs it to declare.

Sources: `--soperator-recipe-dir PATH` (a checkout of the library, of its `soperator/`, or the installation
directory itself), `--soperator-recipe-ref REF` (a branch, tag or commit of the upstream library, fetched
and pinned like k8s-training's `--recipe-ref`), and for `--cloud local` the shipped stand-in
`recipes/local-soperator`. Materializing keeps the library's layout (`soperator/installations/example`
next to `soperator/modules`), because the installation reaches its modules by relative path.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Final

from npa_pulumi.bridge.recipe import (
    UPSTREAM_REPO_URL,
    MaterializedRecipe,
    RecipeError,
    RecipeSource,
    _git_checkout,
    _patch_provider_domain,
    _sync_tree,
    tree_digest,
)
from npa_pulumi.errors import UserInputError

MODULE_KIND: Final = "soperator"
INSTALLATION: Final = "soperator/installations/example"  # where terraform runs, under the work dir
STAND_IN: Final = "local-soperator"

# What the fleet renders (file tfvars) and what reaches Terraform at run time: a recipe lacking any of them
# cannot represent the payload and is refused before any mutation, naming the variable.
RENDERED_VARIABLES: Final[tuple[str, ...]] = (
    "company_name",
    "k8s_version",
    "slurm_operator_version",
    "slurm_login_ssh_root_public_keys",
    "accounting_enabled",
    "filestore_controller_spool",
    "filestore_jail",
    "slurm_nodeset_system",
    "slurm_nodeset_controller",
    "slurm_nodeset_login",
    "slurm_nodeset_workers",
    "o11y_iam_group_id",
    "o11y_profile",
    "backups_enabled",
    "backups_schedule",
    "backups_prune_schedule",
    "backups_retention",
)
ACCOUNTING_VARIABLES: Final[tuple[str, ...]] = ("filestore_accounting", "slurm_nodeset_accounting")
RUNTIME_VARIABLES: Final[tuple[str, ...]] = ("backups_password",)
# The fleet's identity (tenant_id, parent_id, region, subnet_id) under the recipe's names.
IDENTITY_NAMES: Final[dict[str, tuple[str, ...]]] = {
    "tenant_id": ("iam_tenant_id", "o11y_iam_tenant_id"),
    "parent_id": ("iam_project_id", "o11y_iam_project_id"),
    "region": ("region",),
    "subnet_id": ("vpc_subnet_id",),
}
IDENTITY_VARIABLES: Final[tuple[str, ...]] = (
    *(name for names in IDENTITY_NAMES.values() for name in names),
    "iam_token",
)


def recipe_identity(identity: dict[str, str]) -> dict[str, str]:
    """The fleet's identity values under the recipe's variable names (the token passes as it is)."""
    renamed = {
        new: identity[old] for old, names in IDENTITY_NAMES.items() for new in names if old in identity
    }
    if "iam_token" in identity:
        renamed["iam_token"] = identity["iam_token"]
    return renamed


def missing_variables(declared: set[str], accounting: bool, payload_needs: Sequence[str] = ()) -> list[str]:
    """The variables the payload needs that the recipe does not declare, in a stable order
    (`payload_needs`: those of plan/soperator.py needed_payload_variables)."""
    needed = [*IDENTITY_VARIABLES, *RENDERED_VARIABLES, *RUNTIME_VARIABLES]
    if accounting:
        needed += ACCOUNTING_VARIABLES
    needed += payload_needs
    return [name for name in dict.fromkeys(needed) if name not in declared]


def stand_in_dir() -> Path:
    base = Path(str(resources.files("npa_pulumi.recipes"))) / STAND_IN
    if not (base / "variables.tf").is_file():
        raise RecipeError(f"the shipped soperator stand-in recipe ({base}) is missing")
    return base


def resolve_source(cloud: str, recipe_dir: str | None = None, recipe_ref: str | None = None) -> RecipeSource:
    if recipe_dir and recipe_ref:
        raise UserInputError("give either --soperator-recipe-dir or --soperator-recipe-ref, not both")
    recipe_dir = recipe_dir or os.environ.get("NPA_SOPERATOR_RECIPE_DIR") or None
    if recipe_dir:
        path = Path(recipe_dir).expanduser().resolve()
        if not path.is_dir():
            raise UserInputError(f"--soperator-recipe-dir {path} is not a directory")
        return RecipeSource("dir", str(path))
    if recipe_ref:
        url = os.environ.get("NPA_RECIPE_REPO_URL", UPSTREAM_REPO_URL)
        return RecipeSource("git", f"{url}@{recipe_ref}")
    if cloud == "local":
        return RecipeSource("local-stand-in", str(stand_in_dir()))
    raise UserInputError(
        "--cloud nebius needs the soperator recipe for soperator clusters: pass --soperator-recipe-dir "
        "PATH (a checkout of nebius-solutions-library or its soperator/) or --soperator-recipe-ref REF"
    )


def _copy_entries(src: Path, dest: Path, skip: tuple[str, ...]) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for entry in sorted(src.iterdir()):
        if entry.name in (".git", *skip):
            continue
        if entry.is_symlink():
            raise RecipeError(f"the recipe contains a symlink ({entry}); refusing to materialize it")
        if entry.is_dir():
            _sync_tree(entry, dest / entry.name, top=False)
        else:
            shutil.copy2(entry, dest / entry.name)


def _library_root(root: Path) -> Path | None:
    """The `soperator/` directory of a library or of a `soperator/` checkout; None for an installation."""
    if (root / INSTALLATION).is_dir():
        return root / "soperator"
    if (root / "installations" / "example").is_dir():
        return root
    if any(root.glob("*.tf")):
        return None
    raise RecipeError(f"{root} holds neither soperator/installations/example nor any *.tf file")


def materialize(source: RecipeSource, work_root: Path, region: str, cache_root: Path) -> MaterializedRecipe:
    """Copy the recipe into `work_root`, keeping the library's layout (the installation's Terraform state
    and `.terraform` stay), and point its provider's domain."""
    origin = _git_checkout(source.location, cache_root / "recipes") if source.kind == "git" else None
    library = _library_root(origin or Path(source.location))
    module_dir = work_root / INSTALLATION
    roots = [module_dir]
    if library is None:
        _sync_tree(Path(source.location), module_dir)
    else:
        soperator = work_root / "soperator"
        _copy_entries(library, soperator, skip=("installations",))
        _copy_entries(library / "installations", soperator / "installations", skip=("example",))
        _sync_tree(library / "installations" / "example", module_dir)
        roots += sorted(p for p in soperator.iterdir() if p.is_dir() and p.name != "installations")
    warnings: list[str] = []
    if source.kind != "local-stand-in":
        _patch_provider_domain(module_dir, region, warnings)
    return MaterializedRecipe(module_dir=module_dir, digest=tree_digest(*roots), warnings=warnings)
