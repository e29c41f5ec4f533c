"""What every component shares: progress messages, running commands, links in .tools/bin, the per-user
cache keyed by the pins and building into it under a lock, and the Go environment of every build."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from npa_pulumi.runtime.locks import FileLock

REPO = Path(__file__).resolve().parents[2]

TOOLS_BIN = REPO / ".tools" / "bin"
VENV = REPO / ".venv"

_started = time.monotonic()


class ToolchainError(Exception):
    pass


def say(message: str) -> None:
    # One write per line: the Go builds' threads say things at once.
    sys.stderr.write(f"[tools +{time.monotonic() - _started:5.1f}s] {message}\n")
    sys.stderr.flush()


def run(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise ToolchainError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}):\n{tail}")
    return proc.stdout


def run_streaming(cmd: list[str], cwd: Path, env: dict[str, str], label: str) -> None:
    """Run a long build, echoing a heartbeat so a silent `go build` still shows progress."""
    say(f"{label}: {' '.join(cmd)}")
    with tempfile.NamedTemporaryFile("w+", prefix="npa-toolchain-", suffix=".log", delete=False) as log:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        last = time.monotonic()
        while proc.poll() is None:
            time.sleep(1)
            if time.monotonic() - last >= 30:
                say(f"{label}: still working ...")
                last = time.monotonic()
    if proc.returncode != 0:
        lines = Path(log.name).read_text(errors="replace").strip().splitlines()
        raise ToolchainError(
            f"{label} failed (exit {proc.returncode}); log {log.name}:\n" + "\n".join(lines[-30:])
        )
    os.unlink(log.name)


def which_outside_tools(name: str) -> str | None:
    """`shutil.which`, ignoring our own .tools/bin so PATH detection never finds our links."""
    parts = [
        p
        for p in os.environ.get("PATH", "").split(os.pathsep)
        if p and Path(p).resolve() != TOOLS_BIN.resolve()
    ]
    return shutil.which(name, path=os.pathsep.join(parts))


def link(target: Path, name: str) -> None:
    TOOLS_BIN.mkdir(parents=True, exist_ok=True)
    dest = TOOLS_BIN / name
    if dest.is_symlink() and os.readlink(dest) == str(target):
        return
    tmp = TOOLS_BIN / f".{name}.tmp"
    if tmp.exists() or tmp.is_symlink():
        tmp.unlink()
    tmp.symlink_to(target)
    tmp.replace(dest)


def parse_version(text: str) -> tuple[int, ...] | None:
    match = re.search(r"v?(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(g) for g in match.groups()) if match else None


# ------------------------------------------------------------------------------------- the cache


def cache_root() -> Path:
    """`$XDG_CACHE_HOME`, else `$HOME/.cache`: .../npa-pulumi/toolchain. Where $HOME is not the account's
    home (HOME=$(mktemp -d) make demo, a CI container) and has no toolchain cache yet, the account's is
    used when it exists and is writable: the binaries are the machine's, and rebuilding them per $HOME
    costs half an hour. (npa_pulumi.runtime.toolchain looks them up the same way.)"""
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


def platform_key() -> str:
    """The last part of every cache key: a build is this OS's and this machine's."""
    return f"{sys.platform}-{platform.machine()}"


def complete(bindir: Path, names: tuple[str, ...]) -> bool:
    return (bindir / ".complete").exists() and all(os.access(bindir / n, os.X_OK) for n in names)


def build_into_cache(
    home: Path,
    names: tuple[str, ...],
    build: Callable[[Path], None],
    label: str,
    without_go: str | None = None,
) -> Path:
    """`home/bin` holding `names`, built by `build(staging_bin)` unless it is there already.

    The build goes into a staging dir beside `home/bin`, renamed into place: a killed build leaves no
    half-filled bin dir, and an flock keeps two `make tools` from building the same thing at once.
    `without_go` says what to install when the build is needed and Go is not on PATH."""
    bindir = home / "bin"
    if complete(bindir, names):
        say(f"{label} already built in {bindir} (nothing to do)")
        return bindir
    if not shutil.which("go"):
        raise ToolchainError(
            without_go or f"{label} is not built and Go is not installed to build it (Go >= 1.25 is needed)"
        )
    home.mkdir(parents=True, exist_ok=True)
    with FileLock(home / ".lock"):
        if complete(bindir, names):
            return bindir
        staging = Path(tempfile.mkdtemp(prefix="build-", dir=home))
        try:
            out = staging / "bin"
            out.mkdir()
            started = time.monotonic()
            build(out)
            missing = [n for n in names if not os.access(out / n, os.X_OK)]
            if missing:
                raise ToolchainError(f"{label}: the build did not produce {', '.join(missing)}")
            (out / ".complete").write_text(f"built in {time.monotonic() - started:.0f} s\n")
            if bindir.exists():
                shutil.rmtree(bindir)
            out.rename(bindir)
            say(f"{label} built into {bindir} in {time.monotonic() - started:.0f} s")
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return bindir


# ---------------------------------------------------------------------------------------------- Go


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env["GOTOOLCHAIN"] = "local"  # never download a Go toolchain
    env.setdefault("GOFLAGS", "-buildvcs=false")
    return env


def go_module_dir(module: str, version: str, cwd: Path) -> Path:
    """Where `go mod download` put `module@version` (read-only, in the module cache)."""
    out = run(["go", "mod", "download", "-json", f"{module}@{version}"], cwd=cwd, env=go_env())
    info = json.loads(out)
    if info.get("Error"):
        raise ToolchainError(f"the Go module proxy did not serve {module}@{version}: {info['Error']}")
    return Path(info["Dir"])


def install_script(source: Path, dest: Path) -> None:
    # Module zips drop the exec bit and the module cache is read-only, so copy and chmod.
    shutil.copyfile(source, dest)
    dest.chmod(0o755)
