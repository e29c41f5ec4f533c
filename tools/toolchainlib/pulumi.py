"""The Pulumi engine: a `pulumi` on PATH in the supported range, else the pin built from the Go module
proxy through the wrapper module tools/pulumi, with the Python helper scripts the official distribution
ships beside it and the policy-pack launcher."""

from __future__ import annotations

import os
from pathlib import Path

from .common import (
    REPO,
    ToolchainError,
    build_into_cache,
    cache_root,
    go_env,
    go_module_dir,
    install_script,
    link,
    parse_version,
    platform_key,
    run,
    run_streaming,
    say,
    which_outside_tools,
)
from .pins import Pins

SDK_MODULE = "github.com/pulumi/pulumi/sdk/v3"
PULUMI_HELPER_SCRIPTS = {
    # file name next to the binaries: path inside the github.com/pulumi/pulumi/sdk/v3 module
    "pulumi-language-python-exec": "python/cmd/pulumi-language-python-exec",
    "pulumi-resource-pulumi-python": "python/dist/pulumi-resource-pulumi-python",
}
POLICY_SHIM = ("pulumi-analyzer-policy-python", "python/dist/pulumi-analyzer-policy-python")
BINARIES = ("pulumi", *PULUMI_HELPER_SCRIPTS, POLICY_SHIM[0])


def pulumi_key(pins: Pins) -> str:
    p = pins["pulumi"]
    return f"pulumi-v{p['version']}-shim{p['policy_shim_sdk_version']}-{platform_key()}"


def pulumi_reported_version(binary: str) -> str:
    env = dict(os.environ, PULUMI_SKIP_UPDATE_CHECK="true")
    return run([binary, "version"], env=env).strip()


def strict_toolchain() -> bool:
    """NPA_STRICT_TOOLCHAIN=1: only the exact pin (reproducible CI); otherwise a supported release will do."""
    return os.environ.get("NPA_STRICT_TOOLCHAIN", "").strip().lower() in ("1", "true", "yes")


def pulumi_range(pins: Pins) -> str:
    p = pins["pulumi"]
    if strict_toolchain():
        return f"exactly v{p['version']} (NPA_STRICT_TOOLCHAIN=1)"
    return f">= v{p['supported_min']}, < v{p['supported_below']}"


def pulumi_accepted(pins: Pins, reported: str) -> bool:
    """Whether a `pulumi` reporting `reported` is used as is (npa_pulumi.runtime.toolchain decides the
    same at run time, for a pulumi found on PATH)."""
    p = pins["pulumi"]
    found = parse_version(reported)
    if found is None:
        return False
    if strict_toolchain():
        return found == parse_version(p["version"])
    low, high = parse_version(p["supported_min"]), parse_version(p["supported_below"])
    assert low is not None and high is not None
    return low <= found < high


def build(pins: Pins, out: Path) -> None:
    version = pins["pulumi"]["version"]
    wrapper = REPO / "tools" / "pulumi"
    ldflags = f"-s -w -X {SDK_MODULE}/go/common/version.Version=v{version}"
    say(f"building the Pulumi engine v{version} from the Go module proxy (first time only; ~7-20 min)")
    run_streaming(
        [
            "go",
            "build",
            "-trimpath",
            "-tags",
            "osusergo,grpcnotrace",
            "-ldflags",
            ldflags,
            "-o",
            f"{out}/",
            "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi",
        ],
        cwd=wrapper,
        env=go_env(),
        label="go build pulumi",
    )
    sdk_dir = go_module_dir(SDK_MODULE, f"v{version}", wrapper)
    for name, rel in PULUMI_HELPER_SCRIPTS.items():
        install_script(sdk_dir / rel, out / name)
    shim_sdk = go_module_dir(SDK_MODULE, f"v{pins['pulumi']['policy_shim_sdk_version']}", wrapper)
    install_script(shim_sdk / POLICY_SHIM[1], out / POLICY_SHIM[0])
    reported = pulumi_reported_version(str(out / "pulumi"))
    if reported != f"v{version}":
        raise ToolchainError(f"the built pulumi reports {reported!r}, expected v{version}")


def link_from_path(pins: Pins) -> bool:
    """Link a `pulumi` on PATH that is in the supported range and has its helper scripts beside it; say why
    one on PATH is not used."""
    version = pins["pulumi"]["version"]
    on_path = which_outside_tools("pulumi")
    if not on_path:
        return False
    try:
        reported = pulumi_reported_version(on_path)
    except ToolchainError:
        reported = "unknown"
    real_dir = Path(on_path).resolve().parent
    helpers = [real_dir / n for n in PULUMI_HELPER_SCRIPTS]
    accepted = pulumi_accepted(pins, reported)
    if accepted and all(os.access(h, os.X_OK) for h in helpers):
        for name in ("pulumi", "pulumi-language-python", *PULUMI_HELPER_SCRIPTS, POLICY_SHIM[0]):
            if (real_dir / name).exists():
                link(real_dir / name, name)
        which = "the pin" if reported == f"v{version}" else f"supported: {pulumi_range(pins)}"
        say(f"pulumi {reported} from PATH ({on_path}; {which})")
        return True
    why = "its helper scripts are not beside it" if accepted else f"npa-pulumi supports {pulumi_range(pins)}"
    say(f"ignoring pulumi on PATH ({on_path}, {reported}): {why}; providing the pin v{version}")
    return False


def ensure(pins: Pins) -> None:
    if link_from_path(pins):
        return
    version = pins["pulumi"]["version"]
    bindir = build_into_cache(
        cache_root() / pulumi_key(pins),
        BINARIES,
        lambda out: build(pins, out),
        f"pulumi v{version}",
        without_go=(
            f"pulumi v{version} is not on PATH and Go is not installed to build it. Install pulumi "
            f"v{version} or Go >= 1.25 (the engine is built from the Go module proxy)."
        ),
    )
    for name in BINARIES:
        link(bindir / name, name)
    # A language host on PATH at the pinned version is linked too; none can be built here (docs/toolchain.md).
    langhost = which_outside_tools("pulumi-language-python")
    if langhost:
        link(Path(langhost), "pulumi-language-python")
