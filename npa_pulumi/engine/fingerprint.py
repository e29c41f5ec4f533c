"""Fingerprints of what a stack was deployed from, so an unchanged stack can be skipped.

A stack's fingerprint covers its plan (every input the program passes to its components: tfvars, recipe
digest, identity, storage settings, ...), the cloud and profile, and the versions of what ran it: this
product, the Pulumi engine and, for cluster stacks, terraform/tofu (name and version). So `up` after an
upgrade of any of them runs every stack once instead of skipping it. The programs export it as
`npa_fingerprint`. `up` skips a stack only when the fingerprint matches *and* the live cloud still has what
the stack says it created (checked by the caller); `up --refresh` never skips.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any

from npa_pulumi import __version__
from npa_pulumi.errors import NpaError

FINGERPRINT_OUTPUT = "npa_fingerprint"
UNAVAILABLE = "unavailable"  # a tool that is not installed: a stack deployed with it never matches


@dataclass(frozen=True)
class ToolchainVersions:
    npa: str
    engine: str
    terraform: str

    def covering(self, *, terraform: bool) -> dict[str, str]:
        """The versions a stack's fingerprint covers: terraform only for stacks that run it."""
        versions = {"npa": self.npa, "engine": self.engine}
        if terraform:
            versions["terraform"] = self.terraform
        return versions


def toolchain_versions() -> ToolchainVersions:
    """This product's version and the engine's and terraform's, as the disk cache remembers them per
    binary (no process start when they are known)."""
    from npa_pulumi.bridge.terraform import terraform_version
    from npa_pulumi.engine.automation import engine_version
    from npa_pulumi.runtime.toolchain import find_terraform

    try:
        engine = engine_version() or UNAVAILABLE
    except NpaError:
        engine = UNAVAILABLE
    try:
        binary = find_terraform()
        terraform = f"{binary.name} {'.'.join(str(part) for part in terraform_version(binary))}"
    except (NpaError, OSError):
        terraform = UNAVAILABLE
    return ToolchainVersions(npa=__version__, engine=engine, terraform=terraform)


def fingerprint(plan: Any, cloud: str, profile: str, versions: Mapping[str, str]) -> str:
    body = _plain(plan) if is_dataclass(plan) and not isinstance(plan, type) else dict(plan)
    payload = json.dumps(
        {"plan": body, "cloud": cloud, "profile": profile, "versions": dict(versions)},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def _plain(value: Any) -> Any:
    """A plan as JSON, as `dataclasses.asdict` would write it, except that settings which travel to a
    resource as its stored inputs (`to_inputs()`, e.g. the gate's `GateConfig`) are written that way, so
    the fingerprint of a deployed stack does not change with the settings' Python type."""
    if isinstance(value, _SCALARS):  # most of a plan (its tfvars): first, as no scalar has `to_inputs`
        return value
    if callable(getattr(value, "to_inputs", None)):
        return value.to_inputs()
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    return value


_SCALARS = (str, int, float, type(None))


def policy_identity(packs: list[str], config: str | None) -> str:
    """What a stack's policies were: every file of every pack directory (for the product's own pack, the
    whole `npa_pulumi.policies` package, whose library the pack's `__main__` imports) and the policy config
    file's text. In the fingerprint, so a stack is never skipped past a pack or a config it was not checked
    against."""
    digest = hashlib.sha256()
    for pack in packs:
        root = Path(pack).resolve()
        if (root.parent / "fleet_guardrails_lib").is_dir():
            root = root.parent  # the product's pack and its library
        digest.update(f"pack {root}\n".encode())
        files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        for path in files:
            digest.update(f"{path.relative_to(root)}\n".encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    if config:
        try:
            digest.update(b"config\n" + Path(config).read_bytes())
        except OSError:
            digest.update(f"config {config} unreadable\n".encode())
    return digest.hexdigest()
