"""Finding the Pulumi engine and terraform/tofu, and the environment every engine call runs with.

Lookup order for each binary:
1. an explicit override (`NPA_PULUMI_BIN` / `NPA_TERRAFORM_BIN`);
2. the repository's `.tools/bin` (what `make tools` provides in a source checkout);
3. the per-user toolchain cache that `make tools` builds into (`~/.cache/npa-pulumi/toolchain/...`);
4. PATH.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
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


def find_pulumi() -> Path:
    override = os.environ.get("NPA_PULUMI_BIN")
    if override:
        return Path(override)
    candidates = [TOOLS_BIN / "pulumi", *(d / "pulumi" for d in _cached_bin_dirs("pulumi-v"))]
    found = _first_executable(candidates)
    if found:
        return found
    on_path = shutil.which("pulumi")
    if on_path:
        return Path(on_path)
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


def engine_env(pulumi_bin: Path | None = None) -> dict[str, str]:
    """Environment overrides for every Pulumi call: offline, no update checks, the right Python.

    * no update checks and no automatic plugin downloads (a missing plugin is an error, not a network call);
    * the engine's directory first on PATH, so its bundled helper scripts are found;
    * dynamic providers and policy packs run with this interpreter, which can import npa_pulumi, through
      `plugin_python_wrapper` so that each host watches the run that started it from its first moment.
    """
    pulumi_bin = pulumi_bin or find_pulumi()
    bin_dirs = [str(pulumi_bin.parent)]
    real_dir = str(pulumi_bin.resolve().parent)
    if real_dir not in bin_dirs:
        bin_dirs.append(real_dir)
    python_dir = str(Path(sys.executable).parent)
    path = os.pathsep.join([*bin_dirs, python_dir, os.environ.get("PATH", "")])
    return {
        "PATH": path,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_PYTHON_CMD": plugin_python_wrapper(),
        "PULUMI_SKIP_CONFIRMATIONS": "true",
    }


def plugin_python_wrapper() -> str:
    """An executable that runs this interpreter with `npa_pulumi.runtime.plugin_host` in front of the
    engine's plugin hosts (`$PULUMI_PYTHON_CMD -u -m pulumi.dynamic ...`); see that module for why. It is
    written once per interpreter into `<npa home>/bin/`; where that cannot be written, the plain
    interpreter is used (the hosts then start their watchdog on their first request, as before)."""
    from npa_pulumi.runtime.disk_cache import cache_key
    from npa_pulumi.runtime.home import npa_home, write_atomically

    text = f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -u -m npa_pulumi.runtime.plugin_host "$@"\n'
    path = npa_home() / "bin" / f"plugin-python-{cache_key(sys.executable)[:12]}"
    try:
        if path.read_text() == text and os.access(path, os.X_OK):
            return str(path)
    except OSError:
        pass
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, text, mode=0o755)
    except OSError:
        return sys.executable
    return str(path)
