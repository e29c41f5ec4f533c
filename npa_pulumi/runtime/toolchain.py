"""Finding the pinned binaries: the Pulumi engine and terraform/tofu.

Lookup order for each binary:
1. an explicit override (`NPA_PULUMI_BIN` / `NPA_TERRAFORM_BIN`);
2. the repository's `.tools/bin` (what `make tools` provides in a source checkout);
3. the per-user toolchain cache that `make tools` builds into (`~/.cache/npa-pulumi/toolchain/...`);
4. PATH.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from npa_pulumi.errors import NpaError

REPO_ROOT = Path(__file__).resolve().parents[2]
TOOLS_BIN = REPO_ROOT / ".tools" / "bin"


class ToolchainMissing(NpaError):
    kind = "toolchain-missing"


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "npa-pulumi" / "toolchain"


def _cached_bin_dirs(prefix: str) -> list[Path]:
    root = _cache_root()
    if not root.is_dir():
        return []
    return sorted((d / "bin" for d in root.iterdir() if d.name.startswith(prefix)), reverse=True)


def _first_executable(candidates: list[Path]) -> Path | None:
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def locate(name: str, override_env: str, cache_prefix: str) -> Path | None:
    """A binary in the lookup order of the module docstring: `$override_env` (a file, or a directory
    holding `name`), `.tools/bin`, the per-user cache dirs starting with `cache_prefix`, then PATH."""
    override = os.environ.get(override_env)
    if override:
        path = Path(override)
        return path / name if path.is_dir() else path
    candidates = [TOOLS_BIN / name, *(d / name for d in _cached_bin_dirs(cache_prefix))]
    found = _first_executable(candidates)
    if found:
        return found
    on_path = shutil.which(name)
    return Path(on_path) if on_path else None


def find_pulumi() -> Path:
    found = locate("pulumi", "NPA_PULUMI_BIN", "pulumi-v")
    if found:
        return found
    raise ToolchainMissing(
        "the Pulumi engine was not found: run `make tools` (builds the pinned engine), install pulumi, "
        "or set NPA_PULUMI_BIN"
    )


def find_terraform() -> Path:
    override = os.environ.get("NPA_TERRAFORM_BIN")
    if override:
        return Path(override)
    candidates = [TOOLS_BIN / "terraform", *(d / "tofu" for d in _cached_bin_dirs("opentofu-v"))]
    found = _first_executable(candidates)
    if found:
        return found
    for name in ("terraform", "tofu"):
        on_path = shutil.which(name)
        if on_path:
            return Path(on_path)
    raise ToolchainMissing(
        "no terraform or tofu was found: run `make tools` (builds OpenTofu when needed), install one, "
        "or set NPA_TERRAFORM_BIN"
    )


KUBERNETES_PROVIDER = "pulumi-resource-kubernetes"


def find_kubernetes_provider() -> Path | None:
    """The Pulumi Kubernetes provider plugin `make tools` builds (the engine runs it as an ambient
    plugin from PATH). None when absent: a stack that needs it then fails with the engine's own error
    naming the missing plugin, rather than a download attempt."""
    return locate(KUBERNETES_PROVIDER, "NPA_KUBERNETES_PROVIDER_BIN", "pulumi-kubernetes-v")


KUBERAY_OPERATOR = "kuberay-operator"
KUBERAY_CRD_DIR = "kuberay-crds"  # beside the binary: the module's CRDs as compact JSON (tools/toolchain.py)


def find_kuberay_operator() -> Path | None:
    """The KubeRay operator binary `make tools` builds; the local cloud's agents run it per cluster."""
    return locate(KUBERAY_OPERATOR, "NPA_KUBERAY_BIN", "kuberay-v")


def kuberay_crd_files() -> list[Path]:
    """KubeRay's own CRDs (RayCluster, RayJob, RayService) at the pinned release, as JSON files, from
    beside the operator binary. Raises ToolchainMissing when they were not built."""
    operator = find_kuberay_operator()
    crd_dir = operator.resolve().parent / KUBERAY_CRD_DIR if operator else None
    files = sorted(crd_dir.glob("ray.io_*.json")) if crd_dir and crd_dir.is_dir() else []
    if not files:
        raise ToolchainMissing(
            "KubeRay's CRDs were not found: run `make tools` (builds the pinned KubeRay operator and "
            "converts its CRDs), or set NPA_KUBERAY_BIN to a directory holding kuberay-operator and "
            f"{KUBERAY_CRD_DIR}/"
        )
    return files
