"""Where the Kubernetes binaries are: `$NPA_KUBE_BIN_DIR`, the checkout's `.tools/bin`, the per-user
toolchain cache `make tools` builds into, then PATH (the same order the engine uses for its own tools)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

CONTROL_PLANE = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd")
KWOK = ("kwok", "kwokctl")
ALL = (*CONTROL_PLANE, *KWOK)
ENV_BIN_DIR = "NPA_KUBE_BIN_DIR"

_REPO_TOOLS_BIN = Path(__file__).resolve().parents[4] / ".tools" / "bin"
_CACHE_PREFIX = {name: "kubernetes-v" for name in CONTROL_PLANE} | {name: "kwok-v" for name in KWOK}


class KubeBinariesMissing(Exception):
    pass


def _cache_dirs(prefix: str) -> list[Path]:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "npa-pulumi" / "toolchain"
    if not base.is_dir():
        return []
    return sorted((d / "bin" for d in base.iterdir() if d.name.startswith(prefix)), reverse=True)


def find(name: str) -> Path | None:
    override = os.environ.get(ENV_BIN_DIR)
    candidates = [Path(override) / name] if override else []
    candidates += [_REPO_TOOLS_BIN / name, *(d / name for d in _cache_dirs(_CACHE_PREFIX[name]))]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    on_path = shutil.which(name)
    return Path(on_path) if on_path else None


def require_all() -> dict[str, Path]:
    found = {name: find(name) for name in ALL}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise KubeBinariesMissing(
            f"the local cloud runs a Kubernetes API server per cluster and needs {', '.join(missing)}: "
            "run `make tools` (builds them from the Go module proxy), set "
            f"{ENV_BIN_DIR}, or turn the API servers off with `npa-pulumi local-cloud set kubernetes_api 0`"
        )
    return {name: path for name, path in found.items() if path is not None}
