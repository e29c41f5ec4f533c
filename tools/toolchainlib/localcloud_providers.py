"""The local cloud's Terraform providers (tools/localcloud-providers, PROTOCOL.md): one Go binary built
from the repository's sources against the Go module proxy, laid out as a Terraform *unpacked filesystem
mirror* under .tools/terraform-providers/<host>/<namespace>/<type>/<version>/linux_amd64/
terraform-provider-<type>_v<version> (hard links of the one binary), for every address its `--list`
prints. The bridge points terraform at that mirror for `--cloud local` only."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from .common import REPO, ToolchainError, build_into_cache, cache_root, go_env, platform_key, run, say
from .pins import Pins

SOURCE = REPO / "tools" / "localcloud-providers"
BINARY = "terraform-provider-npa-localcloud"
MIRROR = REPO / ".tools" / "terraform-providers"
GO_PLATFORM = "linux_amd64"


def source_digest() -> str:
    """A digest of everything the binary is built from (Go sources, go.mod/go.sum, the schema files)."""
    digest = hashlib.sha256()
    for path in sorted(SOURCE.rglob("*")):
        if path.is_file() and path.suffix in (".go", ".mod", ".sum", ".json"):
            digest.update(str(path.relative_to(SOURCE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def providers_key(pins: Pins) -> str:
    pinned = ",".join(f"{k}={v}" for k, v in sorted(pins["localcloud_providers"].items()))
    key = hashlib.sha256(f"{pinned}\n{source_digest()}".encode()).hexdigest()[:16]
    return f"localcloud-providers-{key}-{platform_key()}"


def ensure(pins: Pins) -> None:
    bindir = build_into_cache(
        cache_root() / providers_key(pins), (BINARY,), lambda out: build(out), "local cloud providers"
    )
    lay_out_mirror(bindir / BINARY, pins, MIRROR)


def build(out: Path) -> None:
    say("building the local cloud's Terraform providers (tools/localcloud-providers; ~1 min the first time)")
    run(["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / BINARY), "."], SOURCE, go_env())


def served(binary: Path) -> list[tuple[str, str, str, str]]:
    """(namespace, type, version, host) for every address the binary serves."""
    lines = run([str(binary), "--list"]).splitlines()
    return [(ns, ty, ver, host) for ns, ty, ver, host in (line.split() for line in lines if line.strip())]


def lay_out_mirror(binary: Path, pins: Pins, mirror: Path) -> None:
    """The unpacked mirror, rebuilt beside the old one and renamed into place. Every served version must
    be the one pins.toml names (a schema file and the pins cannot drift apart silently)."""
    pinned = pins["localcloud_providers"]
    mirror.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".terraform-providers-", dir=mirror.parent))
    try:
        for namespace, type_name, version, host in served(binary):
            want = pinned.get(f"{namespace}/{type_name}")
            if want != version:
                raise ToolchainError(
                    f"tools/localcloud-providers serves {namespace}/{type_name} {version}, but "
                    f"tools/pins.toml [localcloud_providers] pins {want!r}"
                )
            target = staging / host / namespace / type_name / version / GO_PLATFORM
            target.mkdir(parents=True, exist_ok=True)
            dest = target / f"terraform-provider-{type_name}_v{version}"
            try:
                os.link(binary, dest)
            except OSError:  # another filesystem than the cache's
                shutil.copy2(binary, dest)
        old = mirror.with_name(mirror.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if mirror.exists():
            mirror.rename(old)
        staging.rename(mirror)
        shutil.rmtree(old, ignore_errors=True)
        say(f"local cloud providers laid out in {mirror}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
