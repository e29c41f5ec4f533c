"""Where the Kubernetes binaries are: `$NPA_KUBE_BIN_DIR`, the checkout's `.tools/bin`, the per-user
toolchain cache `make tools` builds into, then PATH (runtime.toolchain.locate: the engine's own order)."""

from __future__ import annotations

from pathlib import Path

from npa_pulumi.runtime.toolchain import (
    KUBE_BIN_DIR_ENV,
    KUBE_BINARIES,
    KUBE_CONTROL_PLANE,
    KWOK_BINARIES,
    find_kube_binary,
)

CONTROL_PLANE = KUBE_CONTROL_PLANE
KWOK = KWOK_BINARIES
ALL = KUBE_BINARIES
ENV_BIN_DIR = KUBE_BIN_DIR_ENV


class KubeBinariesMissing(Exception):
    pass


def find(name: str) -> Path | None:
    return find_kube_binary(name)


def require_all() -> dict[str, Path]:
    found = {name: find(name) for name in ALL}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise KubeBinariesMissing(
            f"the local cloud runs a Kubernetes API server per cluster and needs {', '.join(missing)}: "
            "run `make tools` (builds them from the Go module proxy), set "
            f"{ENV_BIN_DIR}, or turn the API servers off with `npa-pulumi local-cloud set kubernetes-api 0`"
        )
    return {name: path for name, path in found.items() if path is not None}
