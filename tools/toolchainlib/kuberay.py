"""The KubeRay operator `kuberay-operator`, built from the module's main.go, with its CRDs beside it as
compact JSON (`kuberay-crds/`): the fleet applies them on every cloud, the local cloud runs the binary."""

from __future__ import annotations

from pathlib import Path

from .common import (
    VENV,
    ToolchainError,
    build_into_cache,
    cache_root,
    complete,
    go_env,
    go_module_dir,
    link,
    platform_key,
    run,
    run_streaming,
    say,
)
from .pins import Pins

KUBERAY_OPERATOR = "kuberay-operator"
# The CRDs the operator watches: it starts its RayCluster, RayJob and RayService controllers unconditionally,
# so all three must be installed for it to run; the fleet creates no RayJob or RayService.
KUBERAY_CRDS = ("rayclusters", "rayjobs", "rayservices")
KUBERAY_CRD_DIR = "kuberay-crds"


def kuberay_key(pins: Pins) -> str:
    return f"kuberay-v{pins['kuberay']['version']}-{platform_key()}"


def ensure(pins: Pins) -> None:
    bindir = build_into_cache(
        cache_root() / kuberay_key(pins),
        (KUBERAY_OPERATOR,),
        lambda out: build(pins, out),
        "KubeRay operator",
    )
    link(bindir / KUBERAY_OPERATOR, KUBERAY_OPERATOR)
    link(bindir / KUBERAY_CRD_DIR, KUBERAY_CRD_DIR)


def build(pins: Pins, out: Path) -> None:
    """`go install` of the module's main package into the staging dir (the binary is named after the
    module's last element, ray-operator; renamed to what it is), then its CRDs beside it as JSON."""
    kr = pins["kuberay"]
    version = f"v{kr['version']}"
    say(f"building the KubeRay operator {version} from the Go module proxy (first time only; ~6 min)")
    env = dict(go_env(), CGO_ENABLED="0", GOBIN=str(out))
    ldflags = f"-s -w -X main._buildTime_={version} -X main._commitId_={version}"
    run_streaming(
        ["go", "install", "-trimpath", "-ldflags", ldflags, f"{kr['module']}@{version}"],
        out,
        env,
        "go install kuberay-operator",
    )
    (out / "ray-operator").rename(out / KUBERAY_OPERATOR)
    module_dir = go_module_dir(kr["module"], version, out)
    convert_crds_to_json(module_dir / "config" / "crd" / "bases", out / KUBERAY_CRD_DIR)


def convert_crds_to_json(source: Path, dest: Path) -> None:
    """The module's CRD YAML as compact JSON (a third of the size, and what an apply sends). The
    virtualenv's PyYAML parses it: this script itself uses only the standard library."""
    python = VENV / "bin" / "python"
    if not python.exists():
        raise ToolchainError("converting KubeRay's CRDs needs the virtualenv: run `make tools` (venv first)")
    dest.mkdir(parents=True, exist_ok=True)
    script = (
        "import json, sys, yaml\n"
        "loader = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)\n"
        "for src, out in zip(sys.argv[1::2], sys.argv[2::2]):\n"
        "    doc = yaml.load(open(src), Loader=loader)\n"
        "    open(out, 'w').write(json.dumps(doc, separators=(',', ':'), sort_keys=True))\n"
    )
    args: list[str] = []
    for name in KUBERAY_CRDS:
        args += [str(source / f"ray.io_{name}.yaml"), str(dest / f"ray.io_{name}.json")]
    run([str(python), "-c", script, *args])


def status(pins: Pins) -> dict[str, object]:
    bindir = cache_root() / kuberay_key(pins) / "bin"
    built = complete(bindir, (KUBERAY_OPERATOR,))
    crds = sorted(p.name for p in (bindir / KUBERAY_CRD_DIR).glob("*.json")) if built else []
    note = (bindir / ".complete").read_text().strip() if built else ""
    return {
        "version": pins["kuberay"]["version"],
        "image": pins["kuberay"]["image"],
        "built": built,
        "operator": str(bindir / KUBERAY_OPERATOR) if built else None,
        "crds": crds,
        "build": note,
    }


def status_line(kuberay: dict[str, object]) -> str:
    if not kuberay["built"]:
        return f"KubeRay operator v{kuberay['version']}: not built (make tools)"
    crds = ", ".join(str(c) for c in kuberay["crds"])  # type: ignore[attr-defined]
    return f"KubeRay operator v{kuberay['version']}: {kuberay['operator']} ({kuberay['build']}); CRDs {crds}"
