"""SeaweedFS's `weed` (a real S3-compatible object store in one Go binary): the local cloud's object
storage runs `weed server -s3` per cloud directory (npa_pulumi/simulator/seaweed.py).

`go install github.com/seaweedfs/seaweedfs/weed@<version>` is refused (the module's go.mod has a
`replace`), so it is built with `go build` in the wrapper module tools/seaweedfs, which requires the pinned
pseudo-version and repeats the one replace the build needs."""

from __future__ import annotations

import re
from pathlib import Path

from .common import (
    REPO,
    ToolchainError,
    build_into_cache,
    cache_root,
    go_env,
    link,
    platform_key,
    run,
    run_streaming,
    say,
)
from .pins import Pins

WEED = "weed"
WRAPPER = REPO / "tools" / "seaweedfs"


def seaweedfs_key(pins: Pins) -> str:
    """The cache directory: the pseudo-version's commit names the build (npa_pulumi.runtime.toolchain
    finds `weed` by the `seaweedfs-` prefix)."""
    return f"seaweedfs-{pins['seaweedfs']['module_version']}-{platform_key()}"


def wrapper_requirement(gomod: str, module: str) -> str | None:
    """The version of `module` that the wrapper's go.mod requires, or None."""
    match = re.search(rf"^(?:require\s+|\t){re.escape(module)} (v\S+)", gomod, re.M)
    return match.group(1) if match else None


def check_wrapper(pins: Pins) -> None:
    """The wrapper requires exactly the pin: a pin changed without the wrapper would build another weed."""
    sw = pins["seaweedfs"]
    required = wrapper_requirement((WRAPPER / "go.mod").read_text(), sw["module"])
    if required != sw["module_version"]:
        raise ToolchainError(
            f"tools/seaweedfs/go.mod requires {sw['module']} {required}, but tools/pins.toml [seaweedfs] "
            f"pins {sw['module_version']}: run `cd tools/seaweedfs && go get {sw['module']}@"
            f"{sw['module_version']} && go mod tidy`"
        )


def ensure(pins: Pins) -> None:
    bindir = build_into_cache(
        cache_root() / seaweedfs_key(pins), (WEED,), lambda out: build(pins, out), "SeaweedFS (weed)"
    )
    link(bindir / WEED, WEED)


def build(pins: Pins, out: Path) -> None:
    sw = pins["seaweedfs"]
    check_wrapper(pins)
    say(f"building SeaweedFS {sw['module_version']} (weed) from the Go module proxy (first time: ~20 min)")
    env = dict(go_env(), CGO_ENABLED="0")
    run_streaming(
        ["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", f"{out}/", f"{sw['module']}/weed"],
        cwd=WRAPPER,
        env=env,
        label="go build weed",
    )
    reported = run([str(out / WEED), "version"], env=env)
    if "version" not in reported.lower():
        raise ToolchainError(f"the built weed does not report a version: {reported.strip()!r}")
