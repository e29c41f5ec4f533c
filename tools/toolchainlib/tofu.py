"""`terraform`: a terraform or tofu on PATH at or above the pinned minimum, else OpenTofu built from the
Go module proxy through the wrapper module tools/tofu."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .common import (
    REPO,
    ToolchainError,
    build_into_cache,
    cache_root,
    go_env,
    link,
    parse_version,
    platform_key,
    run,
    run_streaming,
    say,
    which_outside_tools,
)
from .pins import Pins


def terraform_version(binary: str) -> tuple[int, ...] | None:
    env = dict(os.environ, CHECKPOINT_DISABLE="1")
    if env.get("TF_CLI_CONFIG_FILE") and not os.path.isfile(env["TF_CLI_CONFIG_FILE"]):
        del env["TF_CLI_CONFIG_FILE"]  # OpenTofu warns on stdout, before the JSON, about a missing one
    try:
        out = run([binary, "version", "-json"], env=env)
        return parse_version(json.loads(out).get("terraform_version", ""))
    except (ToolchainError, json.JSONDecodeError):
        return None


def build(pins: Pins, out: Path) -> None:
    say(f"building OpenTofu v{pins['opentofu']['version']} from the Go module proxy (first time only)")
    run_streaming(
        [
            "go",
            "build",
            "-trimpath",
            "-ldflags",
            "-s -w -X github.com/opentofu/opentofu/version.dev=no",
            "-o",
            f"{out}/",
            "github.com/opentofu/opentofu/cmd/tofu",
        ],
        cwd=REPO / "tools" / "tofu",
        env=go_env(),
        label="go build tofu",
    )


def link_from_path(pins: Pins) -> bool:
    minimum = parse_version(pins["terraform"]["min_version"])
    assert minimum is not None
    for name in ("terraform", "tofu"):
        found = which_outside_tools(name)
        if not found:
            continue
        version = terraform_version(found)
        if version and version >= minimum:
            link(Path(found), "terraform")
            say(f"{name} {'.'.join(map(str, version))} from PATH ({found})")
            return True
        say(f"ignoring {found}: version {version} is below the minimum {pins['terraform']['min_version']}")
    return False


def opentofu_key(pins: Pins) -> str:
    return f"opentofu-v{pins['opentofu']['version']}-{platform_key()}"


def ensure(pins: Pins) -> None:
    if link_from_path(pins):
        return
    version = pins["opentofu"]["version"]
    bindir = build_into_cache(
        cache_root() / opentofu_key(pins),
        ("tofu",),
        lambda out: build(pins, out),
        f"OpenTofu v{version}",
        without_go=(
            "no terraform or tofu >= the pinned minimum is on PATH, and Go is not installed to build "
            "OpenTofu. Install terraform/tofu or Go."
        ),
    )
    link(bindir / "tofu", "terraform")
