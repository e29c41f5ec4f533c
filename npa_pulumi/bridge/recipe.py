"""Where a stack's k8s-training recipe comes from, and how it is made ready to run.

Sources, in priority order: `--recipe-dir PATH` (a local checkout of the library or of `k8s-training/`
itself), `--recipe-ref REF` (a shallow git clone of the upstream library, cached per ref), and for
`--cloud local` the shipped stand-in `recipes/local-k8s-training`.

Materializing copies the recipe into the stack's work dir (keeping Terraform state and `.terraform`),
then applies the compatibility preparation the original tool applied, before any mutation:
* the Nebius API domain in `provider.tf` follows the region (`api.eu.nebius.cloud` for eu*, else
  `api.nebius.cloud`), with a loud warning when the recipe no longer has the line to patch;
* `kubectl debug --quiet` is removed from the filesystem verifier (kubectl 1.36 hides evidence with it);
* the cloud-init virtiofs mount gets `nofail`, because upstream mounts with `defaults` only and a node may
  not boot when the filesystem is missing.
It also reads what the recipe does with the shared filesystem (`recipe_facts`) so policies can check it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from npa_pulumi.errors import NpaError, UserInputError
from npa_pulumi.plan.recipe_surface import MIG_RECIPE_VARIABLES, read_recipe_variables, shipped_recipe_dir
from npa_pulumi.runtime import disk_cache
from npa_pulumi.runtime.disk_cache import cache_key, source_identity

log = logging.getLogger(__name__)

UPSTREAM_REPO_URL = "https://github.com/nebius/nebius-solutions-library"
PRESERVED = {
    "terraform.tfstate",
    "terraform.tfstate.backup",
    ".terraform",
    ".terraform.lock.hcl",
    "terraform.tfvars.json",
}

SourceKind = Literal["local-stand-in", "dir", "git"]


class RecipeError(NpaError):
    kind = "recipe"


@dataclass(frozen=True)
class RecipeSource:
    kind: SourceKind
    location: str  # a directory, or "<url>@<ref>"

    def to_dict(self) -> dict[str, str]:
        return {"source": self.kind, "location": self.location}


@dataclass
class MaterializedRecipe:
    """A prepared recipe. `facts` and `variables` are parsed from its HCL on first use and memoized by
    digest: parsing costs about a second of CPU per recipe, every cluster of a fleet shares one recipe,
    and the Terraform bridge (which only needs the digest) never pays for it."""

    module_dir: Path
    digest: str
    modules_dir: Path | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def facts(self) -> dict[str, Any]:
        return copy.deepcopy(_surface(self)[0])

    @property
    def variables(self) -> set[str]:
        return set(_surface(self)[1])


_SURFACES: dict[str, tuple[dict[str, Any], frozenset[str]]] = {}
_SURFACES_LOCK = threading.Lock()


def _surface(recipe: MaterializedRecipe) -> tuple[dict[str, Any], frozenset[str]]:
    """(filesystem facts, declared variables) of a recipe, parsed once per digest in this process and
    kept in the per-user disk cache across commands (keyed by the digest and the parsers' own source)."""
    with _SURFACES_LOCK:
        cached = _SURFACES.get(recipe.digest)
        if cached is None:
            cached = _surface_from_disk(recipe) or _parse_surface(recipe)
            _SURFACES[recipe.digest] = cached
        return cached


def _surface_key(recipe: MaterializedRecipe) -> str:
    from npa_pulumi.plan import recipe_surface

    # facts.py by path, not imported: importing it loads the HCL parser (~0.1 s), which a hit never needs.
    parsers = source_identity(Path(__file__).with_name("facts.py"), Path(recipe_surface.__file__))
    return cache_key("recipe-surface", recipe.digest, parsers)


def _surface_from_disk(recipe: MaterializedRecipe) -> tuple[dict[str, Any], frozenset[str]] | None:
    entry = disk_cache.load("recipe-surface", _surface_key(recipe))
    if not isinstance(entry, dict) or not isinstance(entry.get("facts"), dict):
        return None
    variables = entry.get("variables")
    if not isinstance(variables, list) or not all(isinstance(v, str) for v in variables):
        return None
    return entry["facts"], frozenset(variables)


def _parse_surface(recipe: MaterializedRecipe) -> tuple[dict[str, Any], frozenset[str]]:
    from npa_pulumi.bridge.facts import read_recipe_facts

    # Normalized through JSON so that a parsed and a cached surface are the same value (the facts feed
    # the stacks' fingerprints: a tuple here and a list there would make every stack look changed).
    facts = json.loads(json.dumps(read_recipe_facts(recipe.module_dir, recipe.modules_dir)))
    variables = frozenset(read_recipe_variables(recipe.module_dir))
    disk_cache.store("recipe-surface", _surface_key(recipe), {"facts": facts, "variables": sorted(variables)})
    return facts, variables


def stand_in_dir() -> Path:
    found = shipped_recipe_dir()
    if found is None:
        raise RecipeError("the shipped stand-in recipe (npa_pulumi.recipes/local-k8s-training) is missing")
    return found


def resolve_source(cloud: str, recipe_dir: str | None = None, recipe_ref: str | None = None) -> RecipeSource:
    if recipe_dir and recipe_ref:
        raise UserInputError("give either --recipe-dir or --recipe-ref, not both")
    if recipe_dir:
        path = Path(recipe_dir).expanduser().resolve()
        if not path.is_dir():
            raise UserInputError(f"--recipe-dir {path} is not a directory")
        return RecipeSource("dir", str(path))
    env_dir = os.environ.get("NPA_K8S_TRAINING_DIR")
    if env_dir:
        return resolve_source(cloud, env_dir, None)
    if recipe_ref:
        url = os.environ.get("NPA_RECIPE_REPO_URL", UPSTREAM_REPO_URL)
        return RecipeSource("git", f"{url}@{recipe_ref}")
    if cloud == "local":
        return RecipeSource("local-stand-in", str(stand_in_dir()))
    raise UserInputError(
        "--cloud nebius needs the real k8s-training recipe: pass --recipe-dir PATH (a checkout of "
        "nebius-solutions-library or its k8s-training/) or --recipe-ref REF (cloned from upstream)"
    )


def _git_checkout(location: str, cache_root: Path) -> Path:
    url, _, ref = location.rpartition("@")
    key = hashlib.sha256(location.encode()).hexdigest()[:16]
    dest = cache_root / key
    if (dest / ".git").is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    proc = subprocess.run(
        ["git", "clone", "--depth", "1", "--branch", ref, url, str(tmp)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RecipeError(f"git clone of {url} at {ref!r} failed: {proc.stderr.strip()[-500:]}")
    tmp.rename(dest)
    return dest


def _library_layout(root: Path) -> tuple[Path, Path | None]:
    """(k8s-training module dir, sibling modules/ dir or None) for a library root or a module dir."""
    if (root / "k8s-training").is_dir():
        modules = root / "modules"
        return root / "k8s-training", modules if modules.is_dir() else None
    if any(root.glob("*.tf")):
        modules = root.parent / "modules"
        return root, modules if modules.is_dir() else None
    raise RecipeError(f"{root} holds neither k8s-training/ nor any *.tf file")


def _sync_tree(src: Path, dest: Path, top: bool = True) -> None:
    """Make dest mirror src, keeping Terraform's own files (state, .terraform, lock, tfvars).

    Files that already hold the right content are left alone, so materializing an unchanged recipe is a
    no-op on disk: a preview, or another run's planning, never pulls files from under a terraform that is
    running in this work dir."""
    dest.mkdir(parents=True, exist_ok=True)

    def kept(name: str) -> bool:  # Terraform's own files, at the module's top level only
        return top and (name in PRESERVED or name.startswith("terraform.tfstate"))

    wanted = {entry.name for entry in src.iterdir() if not (kept(entry.name) or entry.name == ".git")}
    for entry in dest.iterdir():
        if kept(entry.name) or entry.name in wanted:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    for name in sorted(wanted):
        entry, target = src / name, dest / name
        if entry.is_symlink():
            raise RecipeError(f"the recipe contains a symlink ({entry}); refusing to materialize it")
        if entry.is_dir():
            if target.exists() and (target.is_symlink() or not target.is_dir()):
                target.unlink()
            _sync_tree(entry, target, top=False)
        else:
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.is_file() and not target.is_symlink() and target.read_bytes() == entry.read_bytes():
                continue
            shutil.copy2(entry, target)


def _patch_provider_domain(module_dir: Path, region: str, warnings: list[str]) -> None:
    provider = module_dir / "provider.tf"
    if not provider.is_file():
        return
    text = provider.read_text()
    if "nebius.cloud:443" not in text:
        return  # this revision configures no domain (auth comes from the environment)
    wanted = "api.eu.nebius.cloud:443" if region.startswith("eu") else "api.nebius.cloud:443"
    patched = re.sub(r"api(\.eu)?\.nebius\.cloud:443", wanted, text)
    if wanted not in patched:
        warnings.append(
            f"WARNING: could not point {provider} at {wanted}; the recipe may talk to the wrong API"
        )
    provider.write_text(patched)


def _drop_kubectl_debug_quiet(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file() and path.suffix in {".sh", ".tf", ".tftpl", ".yaml"}:
            text = path.read_text(errors="replace")
            if "kubectl debug" in text and "--quiet" in text:
                path.write_text(re.sub(r"(kubectl debug[^\n]*?)\s--quiet", r"\1", text))


_MOUNT_LINE = re.compile(r'(\[\s*"?[^\],]+"?\s*,\s*"?[^\],]+"?\s*,\s*"?virtiofs"?\s*,\s*")([^"]*)(")')


def _add_nofail(root: Path) -> None:
    for path in root.rglob("*.tftpl"):
        text = path.read_text(errors="replace")

        def fix(match: re.Match[str]) -> str:
            options = match.group(2)
            if "nofail" in options.split(","):
                return match.group(0)
            return f"{match.group(1)}{options + ',nofail' if options else 'defaults,nofail'}{match.group(3)}"

        patched = _MOUNT_LINE.sub(fix, text)
        if patched != text:
            path.write_text(patched)


def tree_digest(*roots: Path) -> str:
    digest = hashlib.sha256()
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            rel = path.relative_to(root)
            if rel.parts[0] in PRESERVED or rel.name.startswith("terraform.tfstate"):
                continue
            digest.update(str(rel).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def materialize(source: RecipeSource, work_root: Path, region: str, cache_root: Path) -> MaterializedRecipe:
    """Copy the recipe into `work_root` (as `k8s-training/` and `modules/`) and prepare it."""
    if source.kind == "git":
        library = _git_checkout(source.location, cache_root / "recipes")
    else:
        library = Path(source.location)
    module_src, modules_src = _library_layout(library)
    module_dir = work_root / "k8s-training"
    _sync_tree(module_src, module_dir)
    roots = [module_dir]
    if modules_src is not None:
        _sync_tree(modules_src, work_root / "modules")
        roots.append(work_root / "modules")
    warnings: list[str] = []
    _patch_provider_domain(module_dir, region, warnings)
    for root in roots:
        _drop_kubectl_debug_quiet(root)
        _add_nofail(root)
    for warning in warnings:
        log.warning(warning)
    return MaterializedRecipe(
        module_dir=module_dir,
        digest=tree_digest(*roots),
        modules_dir=work_root / "modules" if modules_src else None,
        warnings=warnings,
    )


def compatibility_problems(
    variables: set[str], *, mig: bool, rtx_profile: bool, managed_image: bool
) -> list[str]:
    """What the selected cluster shape needs from the recipe that this recipe does not declare."""
    problems: list[str] = []
    if mig:
        missing = [v for v in MIG_RECIPE_VARIABLES if v not in variables]
        if missing:
            problems.append(f"MIG needs the recipe to declare {', '.join(missing)}")
    if rtx_profile and "gpu_operator_rtx_driver_profile" not in variables:
        problems.append("the rtx-rendering profile needs the recipe variable gpu_operator_rtx_driver_profile")
    if managed_image and "gpu_nodes_driverfull_image" not in variables:
        problems.append(
            "gpu_driver_mode managed-image needs the recipe variable gpu_nodes_driverfull_image "
            "(it would otherwise silently fall back to the operator driver)"
        )
    return problems
