"""Finding the pinned binaries: the Pulumi engine and terraform/tofu.

Lookup order for each binary:
1. an explicit override (`NPA_PULUMI_BIN` / `NPA_TERRAFORM_BIN`), trusted as given;
2. the repository's `.tools/bin` (what `make tools` provides in a source checkout; `NPA_TOOLS_BIN` names
   another such directory, or an empty one to look past the checkout's);
3. the per-user toolchain cache that `make tools` builds into (`~/.cache/npa-pulumi/toolchain/...`);
4. PATH. A `pulumi` found there (the user's own) is used when its version is in the supported range
   (tools/pins.toml [pulumi] `supported_min` up to, not including, `supported_below`), and refused, with
   the range named, outside it; `NPA_STRICT_TOOLCHAIN=1` accepts only the pin, as `make tools` builds it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from npa_pulumi.errors import NpaError
from npa_pulumi.runtime import disk_cache, pins

REPO_ROOT = Path(__file__).resolve().parents[2]
TOOLS_BIN = REPO_ROOT / ".tools" / "bin"


def tools_bin() -> Path:
    """Where `make tools` links the toolchain: `$NPA_TOOLS_BIN`, else the checkout's `.tools/bin`."""
    override = os.environ.get("NPA_TOOLS_BIN")
    return Path(override) if override else TOOLS_BIN


STRICT_ENV = "NPA_STRICT_TOOLCHAIN"

Version = tuple[int, int, int]


class ToolchainMissing(NpaError):
    kind = "toolchain-missing"


def parse_version(text: str) -> Version | None:
    match = re.search(r"v?(\d+)\.(\d+)\.(\d+)", text)
    if not match:
        return None
    major, minor, patch = (int(g) for g in match.groups())
    return major, minor, patch


def _v(text: str) -> Version:
    parsed = parse_version(text)
    assert parsed is not None, text
    return parsed


def pulumi_pin() -> str:
    """The engine release `make tools` builds (tools/pins.toml [pulumi] version)."""
    return pins.pin("pulumi")


def pulumi_supported() -> tuple[str, str]:
    """The range of a user's own `pulumi` npa-pulumi accepts: [supported_min, supported_below)."""
    return pins.pin("pulumi", "supported_min"), pins.pin("pulumi", "supported_below")


def strict_toolchain() -> bool:
    return os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes")


def pulumi_supported_range() -> str:
    """The versions of a user's `pulumi` npa-pulumi accepts, as a message names them."""
    if strict_toolchain():
        return f"exactly v{pulumi_pin()} ({STRICT_ENV}=1)"
    low, below = pulumi_supported()
    return f">= v{low}, < v{below}"


def pulumi_version_supported(version: Version) -> bool:
    if strict_toolchain():
        return version == _v(pulumi_pin())
    low, below = pulumi_supported()
    return _v(low) <= version < _v(below)


def reported_version(binary: Path, *args: str) -> str | None:
    """What `binary version` (or `binary *args`) prints, remembered per binary (path, size, mtime) in the
    disk cache; None when it cannot be run."""
    command = list(args) or ["version"]
    try:
        key = disk_cache.cache_key("reported-version", disk_cache.binary_identity(binary), *command)
    except OSError:
        return None
    known = disk_cache.load("tool-versions", key)
    if isinstance(known, str):
        return known
    env = {**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true", "CHECKPOINT_DISABLE": "1"}
    try:
        proc = subprocess.run(
            [str(binary), *command], capture_output=True, text=True, env=env, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    text = proc.stdout.strip()
    disk_cache.store("tool-versions", key, text)
    return text


class ToolchainUnsupported(ToolchainMissing):
    kind = "toolchain-unsupported"


@dataclass(frozen=True)
class PulumiChoice:
    """The engine npa-pulumi runs, and why that one."""

    path: Path
    source: str  # override | tools | cache | path
    version: str | None  # as it reports itself (known for a binary from PATH)


def _cache_root() -> Path:
    """Where `make tools` builds into (tools/toolchainlib/common.py `cache_root`, the same rule):
    `$XDG_CACHE_HOME`, else `$HOME/.cache`, else (that has none, $HOME not being the account's home) the
    account's."""
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "npa-pulumi" / "toolchain"
    primary = Path.home() / ".cache" / "npa-pulumi" / "toolchain"
    try:
        import pwd

        account = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "npa-pulumi" / "toolchain"
    except (KeyError, ImportError):
        return primary
    if not primary.exists() and account.is_dir() and os.access(account, os.W_OK):
        return account
    return primary


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
    candidates = [tools_bin() / name, *(d / name for d in _cached_bin_dirs(cache_prefix))]
    found = _first_executable(candidates)
    if found:
        return found
    on_path = shutil.which(name)
    return Path(on_path) if on_path else None


def choose_pulumi() -> PulumiChoice:
    """The engine in the lookup order of the module docstring. Raises ToolchainUnsupported for a
    `pulumi` on PATH outside the supported range, ToolchainMissing when there is none at all."""
    override = os.environ.get("NPA_PULUMI_BIN")
    if override:
        path = Path(override)
        return PulumiChoice(path / "pulumi" if path.is_dir() else path, "override", None)
    if _first_executable([tools_bin() / "pulumi"]):
        return PulumiChoice(tools_bin() / "pulumi", "tools", None)
    cached = _first_executable([d / "pulumi" for d in _cached_bin_dirs("pulumi-v")])
    if cached:
        return PulumiChoice(cached, "cache", None)
    on_path = shutil.which("pulumi")
    if not on_path:
        raise ToolchainMissing(
            f"the Pulumi engine was not found: install pulumi ({pulumi_supported_range()}; "
            "https://www.pulumi.com/docs/install/), run `make tools` in a checkout (builds the pinned "
            f"v{pulumi_pin()}), or set NPA_PULUMI_BIN"
        )
    path = Path(on_path)
    text = reported_version(path)
    version = parse_version(text or "")
    if version is None or not pulumi_version_supported(version):
        raise ToolchainUnsupported(
            f"the pulumi on PATH ({path}, {text or 'version unknown'}) is outside the supported range "
            f"{pulumi_supported_range()}: install a supported release (the pin is v{pulumi_pin()}), run "
            "`make tools` in a checkout, or set NPA_PULUMI_BIN to one"
        )
    return PulumiChoice(path, "path", text)


def find_pulumi() -> Path:
    return choose_pulumi().path


def find_terraform() -> Path:
    override = os.environ.get("NPA_TERRAFORM_BIN")
    if override:
        return Path(override)
    candidates = [tools_bin() / "terraform", *(d / "tofu" for d in _cached_bin_dirs("opentofu-v"))]
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


def kubernetes_provider_version() -> str:
    """tools/pins.toml [pulumi_kubernetes] version, which the Python SDK pulumi-kubernetes is pinned to as
    well (in pyproject.toml, where pip reads it; a test checks they agree)."""
    return pins.pin("pulumi_kubernetes")


def kubernetes_plugin_install_command() -> str:
    """The one command that provides the pinned Kubernetes provider plugin where Pulumi's plugin source
    can be reached (the engine itself never downloads one: npa-pulumi turns that off)."""
    return f"pulumi plugin install resource kubernetes v{kubernetes_provider_version()}"


def _installed_plugin(kind: str, name: str, version: str) -> Path | None:
    """A plugin `pulumi plugin install` put under $PULUMI_HOME (default ~/.pulumi)."""
    home = Path(os.environ.get("PULUMI_HOME") or Path.home() / ".pulumi")
    directory = home / "plugins" / f"{kind}-{name}-v{version}"
    return _first_executable([directory / f"pulumi-{kind}-{name}"])


def find_kubernetes_provider() -> Path | None:
    """The Pulumi Kubernetes provider plugin `make tools` builds (the engine runs it as an ambient
    plugin from PATH), or the pinned one `pulumi plugin install` put under $PULUMI_HOME. None when
    absent: a stack that needs it then fails with the engine's own error naming the missing plugin,
    rather than a download attempt (`doctor` prints `kubernetes_plugin_install_command()`)."""
    found = locate(KUBERNETES_PROVIDER, "NPA_KUBERNETES_PROVIDER_BIN", "pulumi-kubernetes-v")
    return found or _installed_plugin("resource", "kubernetes", kubernetes_provider_version())


# The local cloud's Kubernetes binaries (the simulator runs them; `doctor` looks for them).
KUBE_CONTROL_PLANE = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd")
KWOK_BINARIES = ("kwok", "kwokctl")
KUBE_BINARIES = (*KUBE_CONTROL_PLANE, *KWOK_BINARIES)
KUBE_BIN_DIR_ENV = "NPA_KUBE_BIN_DIR"
_KUBE_CACHE_PREFIX = {name: "kubernetes-v" for name in KUBE_CONTROL_PLANE} | {
    name: "kwok-v" for name in KWOK_BINARIES
}


def find_kube_binary(name: str) -> Path | None:
    """`$NPA_KUBE_BIN_DIR`, the checkout's `.tools/bin`, the toolchain cache, then PATH (`locate`)."""
    return locate(name, KUBE_BIN_DIR_ENV, _KUBE_CACHE_PREFIX[name])


KUBERAY_OPERATOR = "kuberay-operator"
KUBERAY_CRD_DIR = "kuberay-crds"  # beside the binary: its CRDs as compact JSON (tools/toolchainlib)


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


WEED = "weed"
WEED_BIN_ENV = "NPA_WEED_BIN"


def find_weed() -> Path | None:
    """SeaweedFS's `weed`, which `make tools` builds (tools/toolchainlib/seaweedfs.py): the local cloud's
    S3 server runs it (simulator/seaweed.py)."""
    return locate(WEED, WEED_BIN_ENV, "seaweedfs-")


LOCAL_PROVIDER_MIRROR_ENV = "NPA_LOCAL_PROVIDER_MIRROR"
LOCAL_PROVIDER_MIRROR_DIR = "terraform-providers"  # beside .tools/bin


def find_local_provider_mirror() -> Path | None:
    """The filesystem mirror of the local cloud's Terraform providers (tools/localcloud-providers):
    `$NPA_LOCAL_PROVIDER_MIRROR`, else `.tools/terraform-providers`, where `make tools` lays it out."""
    override = os.environ.get(LOCAL_PROVIDER_MIRROR_ENV)
    if override:
        return Path(override)
    laid_out = tools_bin().parent / LOCAL_PROVIDER_MIRROR_DIR
    return laid_out if laid_out.is_dir() else None
