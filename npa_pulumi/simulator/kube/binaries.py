"""Where the Kubernetes binaries are: `$NPA_KUBE_BIN_DIR`, the checkout's `.tools/bin`, the per-user
toolchain cache `make tools` builds into, then PATH (runtime.toolchain.locate: the engine's own order)."""

from __future__ import annotations

from pathlib import Path

from npa_pulumi.runtime.toolchain import locate

CONTROL_PLANE = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd")
KWOK = ("kwok", "kwokctl")
ALL = (*CONTROL_PLANE, *KWOK)
ENV_BIN_DIR = "NPA_KUBE_BIN_DIR"

_CACHE_PREFIX = {name: "kubernetes-v" for name in CONTROL_PLANE} | {name: "kwok-v" for name in KWOK}


class KubeBinariesMissing(Exception):
    pass


def find(name: str) -> Path | None:
    return locate(name, ENV_BIN_DIR, _CACHE_PREFIX[name])


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
