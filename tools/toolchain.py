#!/usr/bin/env python3
"""Provide npa-pulumi's toolchain on this machine, idempotently and without the internet.

    python3 tools/toolchain.py ensure [all|venv|pulumi|terraform]   # what `make tools` runs
    python3 tools/toolchain.py status [--json]                       # what is in use, and from where

What it provides, in `.tools/bin` (git-ignored):

* `pulumi` at the version pinned in tools/pins.toml, plus the Python helper scripts the official
  distribution ships beside it (`pulumi-language-python-exec`, `pulumi-resource-pulumi-python`,
  `pulumi-analyzer-policy-python`). A `pulumi` on PATH at exactly the pinned version is used as is;
  otherwise it is built from the Go module proxy through the wrapper module in tools/pulumi.
* `terraform`: a terraform or tofu on PATH at or above the pinned minimum, otherwise OpenTofu built from
  the Go module proxy through tools/tofu.

Built binaries live in a per-user cache keyed by the pins
(`${XDG_CACHE_HOME:-~/.cache}/npa-pulumi/toolchain/<key>/bin`), so a fresh clone on the same machine links
them instead of rebuilding. This script uses only the standard library: it runs before the virtualenv
exists.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if sys.version_info < (3, 11):  # noqa: UP036 - this script runs under whatever python3 is on PATH
    sys.exit(f"npa-pulumi needs Python >= 3.11; {sys.executable} is {sys.version.split()[0]}")

import tomllib

REPO = Path(__file__).resolve().parent.parent
TOOLS_BIN = REPO / ".tools" / "bin"
VENV = REPO / ".venv"
PINS_FILE = REPO / "tools" / "pins.toml"

PULUMI_HELPER_SCRIPTS = {
    # file name next to the binaries: path inside the github.com/pulumi/pulumi/sdk/v3 module
    "pulumi-language-python-exec": "python/cmd/pulumi-language-python-exec",
    "pulumi-resource-pulumi-python": "python/dist/pulumi-resource-pulumi-python",
}
POLICY_SHIM = ("pulumi-analyzer-policy-python", "python/dist/pulumi-analyzer-policy-python")

_started = time.monotonic()


class ToolchainError(Exception):
    pass


def say(message: str) -> None:
    print(f"[tools +{time.monotonic() - _started:5.1f}s] {message}", file=sys.stderr, flush=True)


def load_pins() -> dict:
    with PINS_FILE.open("rb") as handle:
        return tomllib.load(handle)


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "npa-pulumi" / "toolchain"


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env["GOTOOLCHAIN"] = "local"  # never download a Go toolchain
    env.setdefault("GOFLAGS", "-buildvcs=false")
    return env


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


# --------------------------------------------------------------------------------------------- venv


def venv_fingerprint() -> str:
    digest = hashlib.sha256()
    for name in ("pyproject.toml", "setup.py"):
        digest.update((REPO / name).read_bytes())
    digest.update(sys.version.encode())
    return digest.hexdigest()


def ensure_venv() -> None:
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
        raise ToolchainError("pip install -e '.[dev]' failed; see the output above (PyPI must be reachable)")
    stamp.write_text(fingerprint + "\n")
    say("virtualenv ready")


# ------------------------------------------------------------------------------------------- pulumi


def pulumi_key(pins: dict) -> str:
    p = pins["pulumi"]
    return f"pulumi-v{p['version']}-shim{p['policy_shim_sdk_version']}-{sys.platform}-{platform.machine()}"


def pulumi_complete(bindir: Path) -> bool:
    names = ["pulumi", *PULUMI_HELPER_SCRIPTS, POLICY_SHIM[0]]
    return (bindir / ".complete").exists() and all(os.access(bindir / n, os.X_OK) for n in names)


def pulumi_reported_version(binary: str) -> str:
    env = dict(os.environ, PULUMI_SKIP_UPDATE_CHECK="true")
    return run([binary, "version"], env=env).strip()


def go_module_dir(module: str, version: str, cwd: Path) -> Path:
    out = run(["go", "mod", "download", "-json", f"{module}@{version}"], cwd=cwd, env=go_env())
    info = json.loads(out)
    if info.get("Error"):
        raise ToolchainError(f"the Go module proxy did not serve {module}@{version}: {info['Error']}")
    return Path(info["Dir"])


def install_script(source: Path, dest: Path) -> None:
    # Module zips drop the exec bit and the module cache is read-only, so copy and chmod.
    shutil.copyfile(source, dest)
    dest.chmod(0o755)


def build_pulumi(pins: dict, bindir: Path) -> None:
    version = pins["pulumi"]["version"]
    if not shutil.which("go"):
        raise ToolchainError(
            f"pulumi v{version} is not on PATH and Go is not installed to build it. "
            f"Install pulumi v{version} "
            "or Go >= 1.25 (the engine is built from the Go module proxy)."
        )
    wrapper = REPO / "tools" / "pulumi"
    staging = Path(tempfile.mkdtemp(prefix="pulumi-build-", dir=bindir.parent.parent))
    try:
        out = staging / "bin"
        out.mkdir()
        ldflags = f"-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v{version}"
        say(
            f"building the Pulumi engine v{version} from the Go module proxy "
            "(first time only; ~7-20 min on 2 cores)"
        )
        run_streaming(
            [
                "go",
                "build",
                "-trimpath",
                "-tags",
                "osusergo,grpcnotrace",
                "-ldflags",
                ldflags,
                "-o",
                f"{out}/",
                "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi",
            ],
            cwd=wrapper,
            env=go_env(),
            label="go build pulumi",
        )
        sdk_dir = go_module_dir("github.com/pulumi/pulumi/sdk/v3", f"v{version}", wrapper)
        for name, rel in PULUMI_HELPER_SCRIPTS.items():
            install_script(sdk_dir / rel, out / name)
        shim_sdk = go_module_dir(
            "github.com/pulumi/pulumi/sdk/v3", f"v{pins['pulumi']['policy_shim_sdk_version']}", wrapper
        )
        install_script(shim_sdk / POLICY_SHIM[1], out / POLICY_SHIM[0])
        reported = pulumi_reported_version(str(out / "pulumi"))
        if reported != f"v{version}":
            raise ToolchainError(f"the built pulumi reports {reported!r}, expected v{version}")
        (out / ".complete").write_text(f"v{version}\n")
        if bindir.exists():
            shutil.rmtree(bindir)
        bindir.parent.mkdir(parents=True, exist_ok=True)
        out.rename(bindir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def ensure_pulumi(pins: dict) -> None:
    version = pins["pulumi"]["version"]
    on_path = which_outside_tools("pulumi")
    if on_path:
        try:
            reported = pulumi_reported_version(on_path)
        except ToolchainError:
            reported = "unknown"
        real_dir = Path(on_path).resolve().parent
        helpers = [real_dir / n for n in PULUMI_HELPER_SCRIPTS]
        if reported == f"v{version}" and all(os.access(h, os.X_OK) for h in helpers):
            for name in ("pulumi", "pulumi-language-python", *PULUMI_HELPER_SCRIPTS, POLICY_SHIM[0]):
                if (real_dir / name).exists():
                    link(real_dir / name, name)
            say(f"pulumi {reported} from PATH ({on_path})")
            return
        say(f"ignoring pulumi on PATH ({on_path}, {reported}): npa-pulumi pins v{version}")
    home = cache_root() / pulumi_key(pins)
    bindir = home / "bin"
    if pulumi_complete(bindir):
        say(f"pulumi v{version} already built in {bindir} (nothing to do)")
    else:
        home.mkdir(parents=True, exist_ok=True)
        lock = _FileLock(home / ".lock")
        with lock:
            if not pulumi_complete(bindir):
                build_pulumi(pins, bindir)
                say(f"pulumi v{version} built into {bindir}")
    for name in ("pulumi", *PULUMI_HELPER_SCRIPTS, POLICY_SHIM[0]):
        link(bindir / name, name)
    # A language host on PATH at the pinned version is linked too; none can be built here (see README).
    langhost = which_outside_tools("pulumi-language-python")
    if langhost:
        link(Path(langhost), "pulumi-language-python")


# ---------------------------------------------------------------------------------------- terraform


def terraform_version(binary: str) -> tuple[int, ...] | None:
    try:
        out = run([binary, "version", "-json"], env=dict(os.environ, CHECKPOINT_DISABLE="1"))
        return parse_version(json.loads(out).get("terraform_version", ""))
    except (ToolchainError, json.JSONDecodeError):
        return None


def build_tofu(pins: dict, bindir: Path) -> None:
    version = pins["opentofu"]["version"]
    if not shutil.which("go"):
        raise ToolchainError(
            "no terraform or tofu >= the pinned minimum is on PATH, "
            "and Go is not installed to build OpenTofu. "
            "Install terraform/tofu or Go."
        )
    wrapper = REPO / "tools" / "tofu"
    staging = Path(tempfile.mkdtemp(prefix="tofu-build-", dir=bindir.parent.parent))
    try:
        out = staging / "bin"
        out.mkdir()
        say(f"building OpenTofu v{version} from the Go module proxy (first time only)")
        run_streaming(
            [
                "go",
                "build",
                "-trimpath",
                "-ldflags",
                "-s -w -X github.com/opentofu/opentofu/version.dev=no",
                "-o",
                f"{out}/",
                "github.com/opentofu/opentofu/cmd/tofu",
            ],
            cwd=wrapper,
            env=go_env(),
            label="go build tofu",
        )
        (out / ".complete").write_text(f"v{version}\n")
        if bindir.exists():
            shutil.rmtree(bindir)
        bindir.parent.mkdir(parents=True, exist_ok=True)
        out.rename(bindir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def ensure_terraform(pins: dict) -> None:
    minimum = parse_version(pins["terraform"]["min_version"])
    assert minimum is not None
    for name in ("terraform", "tofu"):
        found = which_outside_tools(name)
        if not found:
            continue
        version = terraform_version(found)
        if version and version >= minimum:
            link(Path(found), "terraform")
            say(f"{name} {'.'.join(map(str, version))} from PATH ({found})")
            return
        say(f"ignoring {found}: version {version} is below the minimum {pins['terraform']['min_version']}")
    home = cache_root() / f"opentofu-v{pins['opentofu']['version']}-{sys.platform}-{platform.machine()}"
    bindir = home / "bin"
    if (bindir / ".complete").exists() and os.access(bindir / "tofu", os.X_OK):
        say(f"OpenTofu v{pins['opentofu']['version']} already built in {bindir} (nothing to do)")
    else:
        home.mkdir(parents=True, exist_ok=True)
        with _FileLock(home / ".lock"):
            if not (bindir / ".complete").exists():
                build_tofu(pins, bindir)
    link(bindir / "tofu", "terraform")


# -------------------------------------------------------------------------------------------- misc


class _FileLock:
    """An exclusive flock, so two `make tools` runs never build into the same cache at once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.handle: object = None

    def __enter__(self) -> _FileLock:
        import fcntl

        self.handle = self.path.open("w")
        fcntl.flock(self.handle, fcntl.LOCK_EX)  # type: ignore[arg-type]
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.close()  # type: ignore[attr-defined]


def status(as_json: bool) -> int:
    pins = load_pins()
    report: dict[str, object] = {"pins": pins, "tools_bin": str(TOOLS_BIN), "links": {}}
    links: dict[str, str] = {}
    if TOOLS_BIN.exists():
        for entry in sorted(TOOLS_BIN.iterdir()):
            if entry.is_symlink():
                links[entry.name] = os.readlink(entry)
    report["links"] = links
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        for name, target in links.items():
            print(f"{name:34} -> {target}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ensure = sub.add_parser("ensure", help="provide the toolchain (idempotent)")
    ensure.add_argument(
        "components", nargs="*", metavar="COMPONENT", help="all (default), venv, pulumi, terraform"
    )
    st = sub.add_parser("status", help="show what is linked in .tools/bin")
    st.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "status":
        return status(args.json)
    wanted = set(args.components or ["all"])
    unknown = wanted - {"all", "venv", "pulumi", "terraform"}
    if unknown:
        parser.error(
            f"unknown component(s): {', '.join(sorted(unknown))}; expected all, venv, pulumi or terraform"
        )
    if "all" in wanted:
        wanted = {"venv", "pulumi", "terraform"}
    pins = load_pins()
    try:
        if "venv" in wanted:
            ensure_venv()
        if "pulumi" in wanted:
            ensure_pulumi(pins)
        if "terraform" in wanted:
            ensure_terraform(pins)
    except ToolchainError as err:
        say(f"ERROR: {err}")
        return 1
    say("toolchain ready")
    return 0


if __name__ == "__main__":
    sys.exit(main())
