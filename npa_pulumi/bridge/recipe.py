"""Where a stack's k8s-training recipe comes from, and how it is made ready to run.

Sources, in priority order: `--recipe-dir PATH` (a local checkout of the library or of `k8s-training/`
itself), `--recipe-ref REF` (a branch, tag or full commit SHA of the upstream library, fetched shallowly and
cached per commit; a branch is resolved again on every run, see `resolve_ref`), and with neither flag, on
either cloud, the default recipe: upstream at a pinned commit, fetched as a `--recipe-ref` of it (or read
from the local mirror `$NPA_K8S_TRAINING_MIRROR`), plus npa-pulumi's override files (`bridge/overrides.py`,
checked against the fetched files before the work dir is touched). `--cloud local` runs it against the local
cloud's own Terraform providers (bridge/local_providers.py); there is no k8s-training stand-in.

Materializing copies the recipe into the stack's work dir (keeping Terraform state and `.terraform`),
then applies the compatibility preparation the original tool applied, before any mutation:
* the Nebius API domain follows the region (`api.eu.nebius.cloud` for eu*, else `api.nebius.cloud`), set by
  a Terraform override file (`npa_provider_domain_override.tf`) rather than by editing `provider.tf`, with a
  loud warning (stderr, JSON `warnings`) when the recipe has no provider block to point;
* `kubectl debug --quiet` is removed from the filesystem verifier (kubectl 1.36 hides evidence with it);
* the cloud-init virtiofs mount gets `nofail`, because upstream mounts with `defaults` only and a node may
  not boot when the filesystem is missing.
It also reads what the recipe does with the shared filesystem (`recipe_facts`) so policies can check it.
"""

from __future__ import annotations

import contextlib
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
from npa_pulumi.plan.recipe_surface import MIG_RECIPE_VARIABLES, read_recipe_variables
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

# "default": neither flag, on either cloud: upstream at the pinned commit, fetched exactly as a
# `--recipe-ref` is (`<url>@<commit>`), plus npa-pulumi's override files (bridge/overrides.py).
# "local-stand-in": the soperator recipe on `--cloud local` only (bridge/soperator_recipe.py,
# `recipes/local-soperator`): the soperator installation's providers are not served by the local cloud.
SourceKind = Literal["local-stand-in", "dir", "git", "default"]


class RecipeError(NpaError):
    kind = "recipe"


class RecipeRefError(RecipeError, UserInputError):
    """A --recipe-ref that names nothing the remote has (exit 2, invalid input)."""


@dataclass(frozen=True)
class RecipeSource:
    kind: SourceKind
    location: str  # a directory, or "<url>@<ref>"

    def to_dict(self) -> dict[str, str]:
        return {"source": self.kind, "location": self.location}


@dataclass(frozen=True)
class PlannedRecipe:
    """The recipe a cluster stack applies: its (pinned) source and the digest of what planning prepared,
    which the bridge checks its own materialization against."""

    source: RecipeSource
    digest: str

    def to_inputs(self) -> dict[str, str]:
        """The Terraform module's `recipe` input (source, location, digest), as stack state holds it."""
        return {**self.source.to_dict(), "digest": self.digest}


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

    # facts.py by path, not imported: a hit never needs its code.
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


# The variable that once selected the retired k8s-training stand-in (`recipes/local-k8s-training`) on
# `--cloud local`. Its `stand-in` value is refused, naming what replaced it, rather than silently deploying
# something else than the user asked for; any other value is ignored.
RETIRED_LOCAL_RECIPE_ENV = "NPA_LOCAL_CLOUD_RECIPE"


def _refuse_retired_stand_in() -> None:
    if os.environ.get(RETIRED_LOCAL_RECIPE_ENV, "").strip() == "stand-in":
        raise UserInputError(
            f"{RETIRED_LOCAL_RECIPE_ENV}=stand-in: the k8s-training stand-in recipe "
            "(recipes/local-k8s-training) was removed; --cloud local deploys the default recipe (upstream "
            "k8s-training at the pinned commit plus npa-pulumi's override files) on the local cloud's own "
            "Terraform providers. Unset "
            f"{RETIRED_LOCAL_RECIPE_ENV}; where GitHub cannot be reached, set NPA_K8S_TRAINING_MIRROR to a "
            "copy of nebius-solutions-library at the pinned commit (docs/default-recipe.md)"
        )


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
        _refuse_retired_stand_in()
    return default_source()


def default_source() -> RecipeSource:
    """No recipe flag, on either cloud: upstream k8s-training at the pinned commit, fetched like a
    `--recipe-ref` of that commit, with npa-pulumi's override files written over it at materialize."""
    from npa_pulumi.bridge.overrides import DEFAULT_K8S_TRAINING_COMMIT

    url = os.environ.get("NPA_RECIPE_REPO_URL", UPSTREAM_REPO_URL)
    return RecipeSource("default", f"{url}@{DEFAULT_K8S_TRAINING_COMMIT}")


_FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
_ABBREVIATED_SHA = re.compile(r"^[0-9a-fA-F]{4,39}$")


def _git(args: list[str], what: str) -> str:
    proc = subprocess.run(
        ["git", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},  # never wait for credentials on a terminal
    )
    if proc.returncode != 0:
        raise RecipeError(f"{what} failed: {proc.stderr.strip()[-500:]}")
    return proc.stdout


def resolve_ref(url: str, ref: str, cache_root: Path) -> str:
    """The commit `ref` names at `url`: a full commit SHA as given; a tag once, then from the cache (a tag
    is not expected to move); a branch asked of the remote every time (`git ls-remote`), so a run never
    deploys a stale checkout of a branch that has moved."""
    if _FULL_SHA.match(ref.lower()):
        return ref.lower()
    key = hashlib.sha256(f"{url}\0{ref}".encode()).hexdigest()[:16]
    pin = cache_root / "pins" / f"{key}.json"
    try:
        known = json.loads(pin.read_text())
        if known.get("kind") == "tag" and _FULL_SHA.match(str(known.get("commit"))):
            return str(known["commit"])
    except (OSError, ValueError, AttributeError):
        pass
    names = (f"refs/heads/{ref}", f"refs/tags/{ref}", f"refs/tags/{ref}^{{}}")
    listing = _git(
        ["ls-remote", "--", url, *names], f"resolving --recipe-ref {ref!r} at {url} (git ls-remote)"
    )
    found = {name: sha for sha, _, name in (line.partition("\t") for line in listing.splitlines())}
    if names[0] in found:
        return found[names[0]]  # a branch: never pinned
    tag = found.get(names[2]) or found.get(names[1])  # an annotated tag's commit, else the tag's own
    if tag:
        with contextlib.suppress(OSError):  # a pin is only a shortcut: failing to write one costs a lookup
            pin.parent.mkdir(parents=True, exist_ok=True)
            tmp = pin.with_name(f".{pin.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps({"url": url, "ref": ref, "kind": "tag", "commit": tag}))
            os.replace(tmp, pin)
        return tag
    if _ABBREVIATED_SHA.match(ref):
        raise RecipeRefError(
            f"--recipe-ref {ref!r} is not a branch or tag of {url}, and an abbreviated commit cannot be "
            "fetched: give the full 40-character commit SHA"
        )
    raise RecipeRefError(
        f"--recipe-ref {ref!r} is neither a branch nor a tag of {url}, nor a full 40-character commit SHA"
    )


def pin_source(source: RecipeSource, cache_root: Path) -> RecipeSource:
    """A git source with its ref resolved to the commit it names now (`<url>@<commit>`), so that planning
    and every stack's Terraform run in this run use that one commit, whatever the branch does meanwhile."""
    if source.kind != "git":
        return source
    url, _, ref = source.location.rpartition("@")
    return RecipeSource("git", f"{url}@{resolve_ref(url, ref, cache_root / 'recipes')}")


def _checkout_dir(url: str, commit: str, cache_root: Path) -> Path:
    return cache_root / hashlib.sha256(f"{url}\0{commit}".encode()).hexdigest()[:16]


def _git_checkout(location: str, cache_root: Path) -> Path:
    """A checkout of `<url>@<ref>` at the commit the ref names now, cached per commit."""
    url, _, ref = location.rpartition("@")
    commit = resolve_ref(url, ref, cache_root)
    dest = _checkout_dir(url, commit, cache_root)
    if (dest / ".git").is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f"{dest.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        _git(["init", "-q", str(tmp)], "git init")
        try:
            _git(["-C", str(tmp), "fetch", "-q", "--depth", "1", url, commit], f"git fetch {url} {commit}")
        except RecipeError:
            # A server that refuses to serve a commit by id: fetch its branches and tags instead.
            _git(
                [
                    "-C",
                    str(tmp),
                    "fetch",
                    "-q",
                    url,
                    "+refs/heads/*:refs/remotes/origin/*",
                    "+refs/tags/*:refs/tags/*",
                ],
                f"git fetch {url}",
            )
        _git(
            ["-C", str(tmp), "-c", "advice.detachedHead=false", "checkout", "-q", "--detach", commit],
            f"checking out {commit} of {url}",
        )
        try:
            tmp.rename(dest)
        except OSError:
            if not (dest / ".git").is_dir():  # not another run that finished the same checkout first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
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


def module_roots(library: Path) -> list[Path]:
    """The k8s-training module dir of a library root or module dir, and its sibling modules/ when present."""
    module_dir, modules_dir = _library_layout(library)
    return [module_dir, *([modules_dir] if modules_dir else [])]


def _foreign_variable_file(name: str) -> bool:
    """A variable file the recipe ships (upstream's example `terraform.tfvars` enables DRA, for one):
    Terraform would load it beside the fleet's rendered `terraform.tfvars.json`, so values the fleet leaves
    to the module's defaults would come from it instead. The fleet's file is the only one materialized, as
    the original `npa fleet` writes its own `terraform.tfvars` over upstream's."""
    return name == "terraform.tfvars" or name.endswith((".auto.tfvars", ".auto.tfvars.json"))


def _sync_tree(src: Path, dest: Path, top: bool = True) -> None:
    """Make dest mirror src, keeping Terraform's own files (state, .terraform, lock, tfvars).

    Files that already hold the right content are left alone, so materializing an unchanged recipe is a
    no-op on disk: a preview, or another run's planning, never pulls files from under a terraform that is
    running in this work dir."""
    dest.mkdir(parents=True, exist_ok=True)

    def kept(name: str) -> bool:  # Terraform's own files (and npa's override), at the top level only
        return top and (
            name in PRESERVED or name.startswith("terraform.tfstate") or name == DOMAIN_OVERRIDE_FILE
        )

    wanted = {
        entry.name
        for entry in src.iterdir()
        if not (kept(entry.name) or entry.name == ".git" or (top and _foreign_variable_file(entry.name)))
    }
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


DOMAIN_OVERRIDE_FILE = "npa_provider_domain_override.tf"
_NEBIUS_PROVIDER = re.compile(r'^\s*provider\s+"nebius"\s*\{', re.MULTILINE)
_ALIAS = re.compile(r"^\s*alias\s*=", re.MULTILINE)


def _block_body(text: str, start: int) -> str:
    """The body of the block whose `{` ends just before `start` (braces counted, strings skipped)."""
    depth, index, quoted = 1, start, False
    while index < len(text) and depth:
        char = text[index]
        if quoted:
            if char == "\\":
                index += 1
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        index += 1
    return text[start : index - 1]


def _has_default_nebius_provider(module_dir: Path) -> bool:
    """Whether the module configures the default (alias-less) `provider "nebius"` block: the only one an
    override file can set the domain of (an override of a block that does not exist is a Terraform error)."""
    for path in sorted(module_dir.glob("*.tf")):
        if path.name == "override.tf" or path.name.endswith("_override.tf"):
            continue
        text = path.read_text(errors="replace")
        for match in _NEBIUS_PROVIDER.finditer(text):
            if not _ALIAS.search(_block_body(text, match.end())):
                return True
    return False


def _patch_provider_domain(module_dir: Path, region: str, warnings: list[str]) -> None:
    """Point the recipe's Nebius provider at the region's API domain (`api.eu.nebius.cloud` for eu*, else
    `api.nebius.cloud`) with a Terraform override file beside the upstream files, which stay untouched.
    A recipe with no provider block to override is reported loudly: it then talks to whatever domain the
    provider defaults to."""
    wanted = "api.eu.nebius.cloud:443" if region.startswith("eu") else "api.nebius.cloud:443"
    override = module_dir / DOMAIN_OVERRIDE_FILE
    if not _has_default_nebius_provider(module_dir):
        override.unlink(missing_ok=True)
        warnings.append(
            f'WARNING: the recipe in {module_dir} configures no default `provider "nebius"` block, so its '
            f"API domain cannot be pointed at {wanted} for region {region}; it uses the provider's default "
            "domain, which may be the wrong API for this region"
        )
        return
    text = (
        f"# Written by npa-pulumi: the Nebius API domain for region {region} (npa_pulumi/bridge/recipe.py).\n"
        f'provider "nebius" {{\n  domain = "{wanted}"\n}}\n'
    )
    if not override.is_file() or override.read_text() != text:
        override.write_text(text)


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


# A directory holding nebius-solutions-library at the default recipe's pinned commit (`k8s-training/` and
# `modules/`), for machines that cannot reach GitHub: the default recipe is read from it instead of fetched.
# `make` sets it to ../shared/upstream's copy when a checkout has one (docs/default-recipe.md).
MIRROR_ENV = "NPA_K8S_TRAINING_MIRROR"


def default_recipe_mirror() -> Path | None:
    """The default recipe's local mirror (`$NPA_K8S_TRAINING_MIRROR`), when one is set."""
    configured = os.environ.get(MIRROR_ENV, "").strip()
    if not configured:
        return None
    path = Path(configured).expanduser()
    if not (path / "k8s-training").is_dir():
        raise RecipeError(f"${MIRROR_ENV} is {path}, which holds no k8s-training/ directory")
    return path


def default_recipe_library(cache_root: Path) -> Path | None:
    """Where the default recipe is read from without reaching GitHub: the mirror when one is set, else the
    checkout of the pinned commit an earlier run cached under `cache_root`; None when the next run fetches
    it (what `doctor` reports, never fetching anything itself)."""
    mirror = default_recipe_mirror()
    if mirror is not None:
        return mirror
    url, _, commit = default_source().location.rpartition("@")
    cached = _checkout_dir(url, commit, cache_root / "recipes")
    return cached if (cached / ".git").is_dir() and (cached / "k8s-training").is_dir() else None


def default_recipe_variables(cache_root: Path) -> set[str] | None:
    """The variables the default recipe declares (upstream's and the override files'), read from the copy
    this machine has (`default_recipe_library`), prepared exactly as a deployment prepares it; None when
    the default recipe is not here yet (nothing is fetched)."""
    import tempfile

    if default_recipe_library(cache_root) is None:
        return None
    with tempfile.TemporaryDirectory(prefix="npa-default-recipe-") as work:
        # The region only picks the provider's API domain, which declares no variable.
        return materialize(default_source(), Path(work), "eu-north1", cache_root).variables


def materialize(source: RecipeSource, work_root: Path, region: str, cache_root: Path) -> MaterializedRecipe:
    """Copy the recipe into `work_root` (as `k8s-training/` and `modules/`) and prepare it."""
    mirror = default_recipe_mirror() if source.kind == "default" else None
    if mirror is not None:
        library = mirror
    elif source.kind == "default":
        try:
            library = _git_checkout(source.location, cache_root / "recipes")
        except RecipeError as err:
            raise RecipeError(
                f"{err}; where GitHub cannot be reached, set {MIRROR_ENV} to a directory holding "
                "nebius-solutions-library at the pinned commit (docs/default-recipe.md)"
            ) from None
    elif source.kind == "git":
        library = _git_checkout(source.location, cache_root / "recipes")
    elif source.kind == "local-stand-in":
        raise RecipeError(
            "k8s-training has no local stand-in any more (recipes/local-k8s-training was removed): "
            "--cloud local deploys the default recipe"
        )
    else:
        library = Path(source.location)
    module_src, modules_src = _library_layout(library)
    fleet_overrides = None
    if source.kind == "default":
        from npa_pulumi.bridge import overrides

        fleet_overrides = overrides.default_overrides()
        # Checked against the fetched upstream files before the work dir is touched.
        overrides.check(fleet_overrides, module_src.parent, source.location)
    module_dir = work_root / "k8s-training"
    _sync_tree(module_src, module_dir)
    roots = [module_dir]
    if modules_src is not None:
        _sync_tree(modules_src, work_root / "modules")
        roots.append(work_root / "modules")
    if fleet_overrides is not None:
        from npa_pulumi.bridge import overrides

        overrides.write(fleet_overrides, work_root)
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
