"""pulumi-resource-kubernetes, the Pulumi Kubernetes provider plugin: on PATH (.tools/bin), the engine
uses it as an ambient plugin and never downloads one."""

from __future__ import annotations

import shutil
from pathlib import Path

from .common import (
    build_into_cache,
    cache_root,
    go_env,
    go_module_dir,
    link,
    platform_key,
    run_streaming,
    say,
)
from .pins import Pins

KUBERNETES_PROVIDER = "pulumi-resource-kubernetes"
KUBERNETES_PROVIDER_MODULE = "github.com/pulumi/pulumi-kubernetes/provider/v4"
KUBERNETES_PROVIDER_CMD = "cmd/pulumi-resource-kubernetes"


def provider_key(pins: Pins) -> str:
    pk = pins["pulumi_kubernetes"]
    return f"pulumi-kubernetes-v{pk['version']}-{pk['provider_module_version']}-{platform_key()}"


def ensure(pins: Pins) -> None:
    bindir = build_into_cache(
        cache_root() / provider_key(pins),
        (KUBERNETES_PROVIDER,),
        lambda out: build(pins, out),
        KUBERNETES_PROVIDER,
    )
    link(bindir / KUBERNETES_PROVIDER, KUBERNETES_PROVIDER)


def build(pins: Pins, out: Path) -> None:
    """A wrapper module requiring the served provider commit, with the command's package copied in so its
    generate step can write the embedded, versioned schema."""
    pk = pins["pulumi_kubernetes"]
    say(
        f"building {KUBERNETES_PROVIDER} v{pk['version']} from the Go module proxy "
        "(first time only; ~14 min and ~4.6 GB of memory)"
    )
    wrapper = out.parent / "wrapper"
    wrapper.mkdir()
    env = go_env()
    (wrapper / "go.mod").write_text(
        f"module github.com/npa-pulumi/toolchain/pulumi-kubernetes\n\ngo 1.25\n\n"
        f"require {KUBERNETES_PROVIDER_MODULE} {pk['provider_module_version']}\n"
    )
    source = go_module_dir(KUBERNETES_PROVIDER_MODULE, pk["provider_module_version"], wrapper)
    for name in ("main.go", "generate.go", "schema.json", "terraform-mapping.json"):
        dest = wrapper / name
        shutil.copyfile(source / KUBERNETES_PROVIDER_CMD / name, dest)
        dest.chmod(0o644)
    run_streaming(["go", "mod", "tidy"], wrapper, env, "go mod tidy (pulumi-kubernetes)")
    run_streaming(
        ["go", "run", "./generate.go"], wrapper, dict(env, VERSION=pk["version"]), "generate schema"
    )
    ldflags = f"-s -w -X {KUBERNETES_PROVIDER_MODULE}/pkg/version.Version={pk['version']}"
    run_streaming(
        ["go", "build", "-trimpath", "-ldflags", ldflags, "-o", str(out / KUBERNETES_PROVIDER), "."],
        wrapper,
        env,
        f"go build {KUBERNETES_PROVIDER}",
    )
