"""kwok and kwokctl (fake kubelets: nodes and pods without a container runtime), with kwok's own Stage
definitions copied beside them."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from npa_pulumi.runtime.locks import FileLock

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

KWOK_BINARIES = ("kwok", "kwokctl")
# kwok's own Stage definitions (in its module, not its binaries): the local cloud applies them as Stage
# objects, since it runs kwok with Stages as CRDs so it can add fault stages while a cluster runs.
KWOK_STAGE_DIRS = ("node/fast", "node/heartbeat-with-lease", "node/chaos", "pod/fast")


def kwok_key(pins: Pins) -> str:
    return f"kwok-v{pins['kwok']['version']}-{platform_key()}"


def ensure(pins: Pins) -> None:
    home = cache_root() / kwok_key(pins)
    bindir = build_into_cache(home, KWOK_BINARIES, lambda out: build(pins, out), "kwok")
    with FileLock(home / ".lock"):
        install_stages(pins, bindir)
    for name in KWOK_BINARIES:
        link(bindir / name, name)


def build(pins: Pins, out: Path) -> None:
    version = pins["kwok"]["version"]
    say(f"building kwok and kwokctl v{version} from the Go module proxy (first time only; ~5 min)")
    env = dict(go_env(), CGO_ENABLED="0", GOBIN=str(out), GOFLAGS="-buildvcs=false")
    ldflags = f"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=v{version}"
    packages = [f"sigs.k8s.io/kwok/cmd/{name}@v{version}" for name in KWOK_BINARIES]
    run_streaming(["go", "install", "-trimpath", "-ldflags", ldflags, *packages], out, env, "go install kwok")


def install_stages(pins: Pins, bindir: Path) -> None:
    dest = bindir / "stages"
    if (dest / ".complete").exists():
        return
    source = go_module_dir("sigs.k8s.io/kwok", f"v{pins['kwok']['version']}", bindir) / "kustomize" / "stage"
    staging = Path(tempfile.mkdtemp(prefix="stages-", dir=bindir))
    try:
        for rel in KWOK_STAGE_DIRS:
            for stage in sorted((source / rel).glob("*.yaml")):
                if stage.name != "kustomization.yaml":
                    target = staging / f"{rel.replace('/', '-')}-{stage.name}"
                    shutil.copyfile(stage, target)
                    target.chmod(0o644)
        (staging / ".complete").write_text(f"v{pins['kwok']['version']}\n")
        if dest.exists():
            shutil.rmtree(dest)
        staging.rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
