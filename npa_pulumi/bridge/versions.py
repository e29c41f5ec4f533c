"""The recipe's Terraform version constraints, and whether the binary that will run meets them.

A recipe says what it needs in `terraform { required_version = "..." }` blocks, in its root module and in
any module it calls (upstream k8s-training's modules need `>= 1.12`: they use `ephemeral` blocks). Terraform
itself would refuse a too-old binary only at `init`, after the fleet's project stacks may already have
changed the tenant; the engine checks these constraints at plan time instead, before any mutation
(`engine/plans.py`), against the binary's own version (terraform or OpenTofu, each by its own numbering,
which is also what it checks `required_version` against).

Constraint syntax, as Terraform documents it: a comma-separated list of `<op> <version>` with op one of
`=`, `!=`, `>`, `>=`, `<`, `<=`, `~>` (none means `=`); a partial version pads with zeros, and `~>` allows
only the rightmost given part to grow. A constraint this module cannot read fails closed.
"""

from __future__ import annotations

import operator
import re
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from npa_pulumi.bridge.terraform import TerraformError, base_env, terraform_version
from npa_pulumi.errors import NpaError
from npa_pulumi.runtime import disk_cache
from npa_pulumi.runtime.disk_cache import binary_identity, cache_key

Version = tuple[int, int, int]

_TERRAFORM_BLOCK = re.compile(r"^\s*terraform\s*\{", re.MULTILINE)
_REQUIRED_VERSION = re.compile(r'^\s*required_version\s*=\s*"([^"]*)"', re.MULTILINE)
_CLAUSE = re.compile(r"^\s*(!=|>=|<=|~>|=|>|<)?\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-[0-9A-Za-z.-]+)?\s*$")
_VERSION_LINE = re.compile(r"^(OpenTofu|Terraform)\s+v?(\d+)\.(\d+)\.(\d+)")
_SKIPPED_DIRS = {".terraform", ".git"}
_COMPARE: dict[str, Callable[[Version, Version], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


class TerraformVersionRefused(NpaError):
    """The terraform/tofu that would run cannot run this recipe: refused before anything is created."""

    kind = "terraform-version"


@dataclass(frozen=True)
class VersionConstraint:
    """One `required_version` string and the file (relative to the recipe's root) that declares it."""

    expression: str
    source: str

    def allows(self, version: Version) -> bool:
        """Whether `version` meets every clause; raises ValueError on a clause this module cannot read."""
        return all(_clause_allows(clause, version) for clause in self.expression.split(","))


@dataclass(frozen=True)
class TerraformRelease:
    """The binary that will run: its product (Terraform or OpenTofu), version and own version line."""

    path: Path
    product: str
    version: Version
    line: str

    def describe(self) -> str:
        return f"{self.product} {'.'.join(map(str, self.version))} ({self.path}, says {self.line!r})"


def _clause_allows(clause: str, version: Version) -> bool:
    match = _CLAUSE.match(clause)
    if not match:
        raise ValueError(f"cannot read the version constraint {clause.strip()!r}")
    op = match.group(1) or "="
    given = [int(part) for part in match.groups()[1:] if part is not None]
    bound: Version = (given[0], given[1] if len(given) > 1 else 0, given[2] if len(given) > 2 else 0)
    if op != "~>":
        return _COMPARE[op](version, bound)
    if version < bound:
        return False
    if len(given) == 1:  # `~> 1` is `>= 1.0.0, < 2.0.0`, like `~> 1.0`
        return version[0] == bound[0]
    prefix = len(given) - 1  # every part but the rightmost given one stays
    return version[:prefix] == bound[:prefix]


def _terraform_blocks(text: str) -> Iterable[str]:
    for match in _TERRAFORM_BLOCK.finditer(text):
        depth, index = 1, match.end()
        while index < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[index], 0)
            index += 1
        yield text[match.end() : index - 1]


def _tf_files(root: Path) -> list[Path]:
    return sorted(
        path
        for path in root.rglob("*.tf")
        if path.is_file() and not _SKIPPED_DIRS.intersection(path.relative_to(root).parts)
    )


def required_versions(roots: Sequence[Path]) -> list[VersionConstraint]:
    """Every `required_version` of the recipe's modules: `roots` are the module dir and the sibling
    `modules/` dir, each named in `source` by its own folder name."""
    found: list[VersionConstraint] = []
    for root in roots:
        for path in _tf_files(root):
            for block in _terraform_blocks(path.read_text(errors="replace")):
                for match in _REQUIRED_VERSION.finditer(block):
                    source = str(Path(root.name) / path.relative_to(root))
                    found.append(VersionConstraint(match.group(1).strip(), source))
    return found


def _ask_version_line(binary: Path) -> str:
    try:
        proc = subprocess.run(
            [str(binary), "version"], capture_output=True, text=True, env=base_env(), check=False
        )
    except OSError as exc:
        raise TerraformError(f"cannot run {binary}: {exc}") from exc
    lines = (proc.stdout or "").strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise TerraformError(f"`{binary} version` failed", tail=(proc.stdout + proc.stderr)[-2000:])
    return lines[0].strip()


def terraform_release(binary: Path) -> TerraformRelease:
    """What `binary version` says it is, remembered per binary (path, size, mtime) in the disk cache."""
    try:
        key: str | None = cache_key("terraform-release", binary_identity(binary))
    except OSError:
        key = None
    known = disk_cache.load("tool-versions", key) if key else None
    line = known if isinstance(known, str) else _ask_version_line(binary)
    match = _VERSION_LINE.match(line)
    if match:
        product, version = match.group(1), (int(match[2]), int(match[3]), int(match[4]))
    else:  # an unusual build: its machine-readable version still says what it is
        product = "OpenTofu" if "tofu" in binary.name.lower() else "Terraform"
        try:
            version = terraform_version(binary)
        except TerraformError as exc:
            raise TerraformError(f"cannot tell the version of {binary}: it says {line!r}") from exc
    if key and known is None:
        disk_cache.store("tool-versions", key, line)
    return TerraformRelease(binary, product, version, line)


def unmet_constraints(constraints: Sequence[VersionConstraint], release: TerraformRelease) -> list[str]:
    """Each constraint `release` fails (or that cannot be read), as `"<expression>" (<source>)`."""
    unmet: list[str] = []
    for constraint in constraints:
        try:
            allowed = constraint.allows(release.version)
        except ValueError as exc:
            unmet.append(f'"{constraint.expression}" ({constraint.source}: {exc})')
            continue
        if not allowed:
            unmet.append(f'"{constraint.expression}" ({constraint.source})')
    return unmet


def refusal(unmet: Sequence[str], release: TerraformRelease) -> str:
    return (
        f"the recipe requires terraform {', '.join(unmet)}, but the binary that would run is "
        f"{release.describe()}; nothing was created or changed. Point NPA_TERRAFORM_BIN at a terraform "
        "or tofu that meets it (a file, e.g. NPA_TERRAFORM_BIN=/usr/local/bin/terraform)"
    )
