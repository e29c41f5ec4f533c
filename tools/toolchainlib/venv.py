"""The checkout's virtualenv, .venv: npa-pulumi and its dev dependencies (pip install -e '.[dev]'),
reinstalled when pyproject.toml, setup.py or the Python changes, and the checkout byte-compiled."""

from __future__ import annotations

import hashlib
import platform
import subprocess
import sys

from .common import REPO, VENV, ToolchainError, run, say
from .pins import Pins

# The checkout's own packages, which an editable install leaves uncompiled (pip compiles a wheel's).
CHECKOUT_PACKAGES = ("npa_pulumi", "components", "policies")


def ensure(pins: Pins) -> None:
    install_venv()
    compile_checkout()


def venv_fingerprint() -> str:
    digest = hashlib.sha256()
    for name in ("pyproject.toml", "setup.py"):
        digest.update((REPO / name).read_bytes())
    digest.update(sys.version.encode())
    return digest.hexdigest()


def compile_checkout() -> None:
    """Byte-compile the checkout's packages where their .pyc is missing or stale. Every product process
    (the CLI, each plugin host and policy analyzer, the local cloud's provisioners) imports them; without a
    .pyc each one compiles its modules again, and where PYTHONDONTWRITEBYTECODE is set (CI images often
    set it) no process ever writes one: ~0.1-0.7 s of CPU per process start."""
    python = str(VENV / "bin" / "python")
    sources = [str(REPO / name) for name in CHECKOUT_PACKAGES]
    proc = subprocess.run([python, "-m", "compileall", "-q", *sources], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ToolchainError(f"byte-compiling the checkout failed:\n{proc.stdout}{proc.stderr}")
    say("checkout byte-compiled (" + ", ".join(CHECKOUT_PACKAGES) + ")")


def install_venv() -> None:
    stamp = VENV / ".npa-stamp"
    fingerprint = venv_fingerprint()
    if stamp.exists() and stamp.read_text().strip() == fingerprint and (VENV / "bin" / "python").exists():
        say("virtualenv .venv is up to date (nothing to do)")
        return
    if not (VENV / "bin" / "python").exists():
        say(f"creating virtualenv .venv with {sys.executable} (Python {platform.python_version()})")
        run([sys.executable, "-m", "venv", str(VENV)])
    pip = [str(VENV / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    say("installing npa-pulumi and its dev dependencies into .venv (pip install -e '.[dev]')")
    proc = subprocess.run([*pip, "install", "-q", "-e", ".[dev]"], cwd=REPO)
    if proc.returncode != 0:
        code = proc.returncode
        how = f"was killed by signal {-code}" if code < 0 else f"exited {code}"
        raise ToolchainError(f"pip install -e '.[dev]' {how}; see the output above (PyPI must be reachable)")
    stamp.write_text(fingerprint + "\n")
    say("virtualenv ready")
