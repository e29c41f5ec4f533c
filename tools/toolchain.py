#!/usr/bin/env python3
"""Provide npa-pulumi's toolchain on this machine, idempotently and without the internet.

    python3 tools/toolchain.py ensure [all|venv|pulumi|terraform]   # what `make tools` runs
    python3 tools/toolchain.py status [--json]                       # what is in use, and from where

What it provides, in `.tools/bin` (git-ignored):

* `pulumi` at the version pinned in tools/pins.toml, plus the Python helper scripts the official
  distribution ships beside it (`pulumi-language-python-exec`, `pulumi-resource-pulumi-python`,
  `pulumi-analyzer-policy-python`). A `pulumi` on PATH in the supported range (pins.toml
  `supported_min` .. `supported_below`; exactly the pin with NPA_STRICT_TOOLCHAIN=1) is used as is;
  otherwise the pin is built from the Go module proxy through the wrapper module in tools/pulumi.
* `terraform`: a terraform or tofu on PATH at or above the pinned minimum, otherwise OpenTofu built from
  the Go module proxy through tools/tofu.
* the local cloud's Kubernetes (control plane, kwok) and pulumi-kubernetes' provider plugin, and the
  KubeRay operator `kuberay-operator` with its CRDs as compact JSON (`kuberay-crds/`).

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

if sys.version_info < (3, 11):  # noqa: UP036 - this script runs under whatever python3 is on PATH
    sys.exit(f"npa-pulumi needs Python >= 3.11; {sys.executable} is {sys.version.split()[0]}")

import tomllib

REPO = Path(__file__).resolve().parent.parent
# npa_pulumi.runtime imports only the standard library, so it serves here before the virtualenv exists.
sys.path.insert(0, str(REPO))
from npa_pulumi.runtime.locks import FileLock  # noqa: E402

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

Pins = dict[str, Any]  # tools/pins.toml


class ToolchainError(Exception):
    pass


def say(message: str) -> None:
    print(f"[tools +{time.monotonic() - _started:5.1f}s] {message}", file=sys.stderr, flush=True)


def load_pins() -> Pins:
    with PINS_FILE.open("rb") as handle:
        return tomllib.load(handle)


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


# The checkout's own packages, which an editable install leaves uncompiled (pip compiles a wheel's).
CHECKOUT_PACKAGES = ("npa_pulumi", "components", "policies")


def ensure_venv() -> None:
    install_venv()
    compile_checkout()


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


# ------------------------------------------------------------------------------------------- pulumi


def pulumi_key(pins: Pins) -> str:
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


def build_pulumi(pins: Pins, bindir: Path) -> None:
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


def strict_toolchain() -> bool:
    """NPA_STRICT_TOOLCHAIN=1: only the exact pin (reproducible CI); otherwise a supported release will do."""
    return os.environ.get("NPA_STRICT_TOOLCHAIN", "").strip().lower() in ("1", "true", "yes")


def pulumi_range(pins: Pins) -> str:
    p = pins["pulumi"]
    if strict_toolchain():
        return f"exactly v{p['version']} (NPA_STRICT_TOOLCHAIN=1)"
    return f">= v{p['supported_min']}, < v{p['supported_below']}"


def pulumi_accepted(pins: Pins, reported: str) -> bool:
    """Whether a `pulumi` reporting `reported` is used as is (npa_pulumi.runtime.toolchain decides the
    same at run time, for a pulumi found on PATH)."""
    p = pins["pulumi"]
    found = parse_version(reported)
    if found is None:
        return False
    if strict_toolchain():
        return found == parse_version(p["version"])
    low, high = parse_version(p["supported_min"]), parse_version(p["supported_below"])
    assert low is not None and high is not None
    return low <= found < high


def ensure_pulumi(pins: Pins) -> None:
    version = pins["pulumi"]["version"]
    on_path = which_outside_tools("pulumi")
    if on_path:
        try:
            reported = pulumi_reported_version(on_path)
        except ToolchainError:
            reported = "unknown"
        real_dir = Path(on_path).resolve().parent
        helpers = [real_dir / n for n in PULUMI_HELPER_SCRIPTS]
        accepted = pulumi_accepted(pins, reported)
        if accepted and all(os.access(h, os.X_OK) for h in helpers):
            for name in ("pulumi", "pulumi-language-python", *PULUMI_HELPER_SCRIPTS, POLICY_SHIM[0]):
                if (real_dir / name).exists():
                    link(real_dir / name, name)
            which = "the pin" if reported == f"v{version}" else f"supported: {pulumi_range(pins)}"
            say(f"pulumi {reported} from PATH ({on_path}; {which})")
            return
        why = (
            "its helper scripts are not beside it"
            if accepted
            else f"npa-pulumi supports {pulumi_range(pins)}"
        )
        say(f"ignoring pulumi on PATH ({on_path}, {reported}): {why}; providing the pin v{version}")
    home = cache_root() / pulumi_key(pins)
    bindir = home / "bin"
    if pulumi_complete(bindir):
        say(f"pulumi v{version} already built in {bindir} (nothing to do)")
    else:
        home.mkdir(parents=True, exist_ok=True)
        lock = FileLock(home / ".lock")
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


def build_tofu(pins: Pins, bindir: Path) -> None:
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


def ensure_terraform(pins: Pins) -> None:
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
        with FileLock(home / ".lock"):
            if not (bindir / ".complete").exists():
                build_tofu(pins, bindir)
    link(bindir / "tofu", "terraform")


# ------------------------------------------------------------------------------------ kubernetes

KUBERNETES_WRAPPER = REPO / "tools" / "kubernetes"
KUBERNETES_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
KUBERNETES_BINARIES = (*KUBERNETES_COMMANDS, "etcd")
KWOK_BINARIES = ("kwok", "kwokctl")
KUBERNETES_PROVIDER = "pulumi-resource-kubernetes"
KUBERNETES_PROVIDER_MODULE = "github.com/pulumi/pulumi-kubernetes/provider/v4"
KUBERNETES_PROVIDER_CMD = "cmd/pulumi-resource-kubernetes"


def staging_replaces(upstream_gomod: str) -> list[str]:
    """The staging modules k8s.io/kubernetes maps to ./staging/src/k8s.io/X, in its go.mod's order.

    Kubernetes requires them at v0.0.0 and replaces them with its own directories; a consumer's build
    ignores a dependency's replaces, so the wrapper must point each at the published v0.N.P release.
    """
    return re.findall(r"^\s*(?:replace\s+)?(k8s\.io/[\w.-]+)\s*=>\s*\./staging/src/", upstream_gomod, re.M)


def kubernetes_wrapper_gomod(version: str, etcd_version: str, upstream_gomod: str) -> str:
    minor_patch = version.split(".", 1)[1]  # 1.34.4 -> 34.4: staging modules are tagged v0.34.4
    staging = staging_replaces(upstream_gomod)
    if not staging:
        raise ToolchainError(f"k8s.io/kubernetes v{version}'s go.mod names no staging modules")
    go_line = re.search(r"^go (\S+)$", upstream_gomod, re.M)
    godebug = re.search(r"^godebug .*$", upstream_gomod, re.M)
    lines = [
        "// Generated by `python3 tools/toolchain.py gen-kubernetes-wrapper` from k8s.io/kubernetes'",
        "// own go.mod: every staging module it replaces with ./staging/src is pinned to its release.",
        "module github.com/npa-pulumi/toolchain/kubernetes",
        "",
        f"go {go_line.group(1) if go_line else '1.24.0'}",
        "",
    ]
    if godebug:
        lines += [godebug.group(0), ""]
    lines += [
        "require (",
        f"\tgo.etcd.io/etcd/server/v3 v{etcd_version}",
        f"\tk8s.io/kubernetes v{version}",
        ")",
        "",
        "replace (",
        *(f"\t{module} => {module} v0.{minor_patch}" for module in staging),
        ")",
        "",
    ]
    return "\n".join(lines)


def upstream_kubernetes_gomod(version: str) -> str:
    out = run(
        ["go", "mod", "download", "-json", f"k8s.io/kubernetes@v{version}"],
        cwd=KUBERNETES_WRAPPER,
        env=dict(go_env(), GOFLAGS="-mod=mod"),
    )
    info = json.loads(out)
    if info.get("Error"):
        raise ToolchainError(
            f"the Go module proxy did not serve k8s.io/kubernetes@v{version}: {info['Error']}"
        )
    return Path(info["GoMod"]).read_text()


def gen_kubernetes_wrapper(pins: Pins) -> None:
    """Write tools/kubernetes/go.mod from the pinned Kubernetes release and resolve go.sum."""
    k = pins["kubernetes"]
    gomod = KUBERNETES_WRAPPER / "go.mod"
    if not gomod.exists():  # `go mod download` needs a module to run in
        gomod.write_text("module github.com/npa-pulumi/toolchain/kubernetes\n\ngo 1.24.0\n")
    upstream = upstream_kubernetes_gomod(k["version"])
    gomod.write_text(kubernetes_wrapper_gomod(k["version"], k["etcd_version"], upstream))
    run_streaming(
        ["go", "mod", "tidy"], cwd=KUBERNETES_WRAPPER, env=go_env(), label="go mod tidy (kubernetes)"
    )
    say(f"wrote {gomod.relative_to(REPO)} and go.sum for Kubernetes v{k['version']}")


def kubernetes_ldflags(version: str) -> str:
    major, minor, _ = version.split(".")
    base = "k8s.io/component-base/version"
    return (
        f"-s -w -X {base}.gitVersion=v{version} -X {base}.gitMajor={major} -X {base}.gitMinor={minor} "
        f"-X {base}.gitTreeState=clean"
    )


def complete(bindir: Path, names: tuple[str, ...]) -> bool:
    return (bindir / ".complete").exists() and all(os.access(bindir / n, os.X_OK) for n in names)


def build_into_cache(home: Path, names: tuple[str, ...], build: object, label: str) -> Path:
    """Build into a staging dir beside `home/bin` and rename it into place: a killed build leaves no
    half-filled bin dir, and an flock keeps two `make tools` from building the same thing at once."""
    bindir = home / "bin"
    if complete(bindir, names):
        say(f"{label} already built in {bindir} (nothing to do)")
        return bindir
    if not shutil.which("go"):
        raise ToolchainError(
            f"{label} is not built and Go is not installed to build it (Go >= 1.25 is needed)"
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
            build(out)  # type: ignore[operator]
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


def build_kubernetes(pins: Pins, out: Path) -> None:
    version = pins["kubernetes"]["version"]
    say(f"building Kubernetes v{version} and etcd from the Go module proxy (first time only; ~7-12 min)")
    env = dict(go_env(), CGO_ENABLED="0")
    packages = [f"k8s.io/kubernetes/cmd/{name}" for name in KUBERNETES_COMMANDS]
    flags = ["-trimpath", "-ldflags", kubernetes_ldflags(version)]
    run_streaming(
        ["go", "build", *flags, "-o", f"{out}/", *packages], KUBERNETES_WRAPPER, env, "go build kubernetes"
    )
    # etcd's server module root is its `main` package; -o names the binary.
    run_streaming(
        [
            "go",
            "build",
            "-trimpath",
            "-ldflags",
            "-s -w",
            "-o",
            str(out / "etcd"),
            "go.etcd.io/etcd/server/v3",
        ],
        KUBERNETES_WRAPPER,
        env,
        "go build etcd",
    )
    reported = run([str(out / "kube-apiserver"), "--version"]).strip()
    if reported != f"Kubernetes v{version}":
        raise ToolchainError(
            f"the built kube-apiserver reports {reported!r}, expected 'Kubernetes v{version}'"
        )


def build_kwok(pins: Pins, out: Path) -> None:
    version = pins["kwok"]["version"]
    say(f"building kwok and kwokctl v{version} from the Go module proxy (first time only; ~5 min)")
    env = dict(go_env(), CGO_ENABLED="0", GOBIN=str(out), GOFLAGS="-buildvcs=false")
    ldflags = f"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=v{version}"
    packages = [f"sigs.k8s.io/kwok/cmd/{name}@v{version}" for name in KWOK_BINARIES]
    run_streaming(["go", "install", "-trimpath", "-ldflags", ldflags, *packages], out, env, "go install kwok")


def build_kubernetes_provider(pins: Pins, out: Path) -> None:
    """pulumi-resource-kubernetes: a wrapper module requiring the served provider commit, with the
    command's package copied in so its generate step can write the embedded, versioned schema."""
    pk = pins["pulumi_kubernetes"]
    say(
        f"building {KUBERNETES_PROVIDER} v{pk['version']} from the Go module proxy "
        "(first time only; ~14 min and ~4.6 GB of memory)"
    )
    wrapper = out.parent / "wrapper"
    wrapper.mkdir()
    env = go_env()
    (wrapper / "go.mod").write_text(
        f"module github.com/npa-pulumi/toolchain/pulumi-kubernetes\n\ngo 1.25\n\n"
        f"require {KUBERNETES_PROVIDER_MODULE} {pk['provider_module_version']}\n"
    )
    source = go_module_dir(KUBERNETES_PROVIDER_MODULE, pk["provider_module_version"], wrapper)
    for name in ("main.go", "generate.go", "schema.json", "terraform-mapping.json"):
        dest = wrapper / name
        shutil.copyfile(source / KUBERNETES_PROVIDER_CMD / name, dest)
        dest.chmod(0o644)
    run_streaming(["go", "mod", "tidy"], wrapper, env, "go mod tidy (pulumi-kubernetes)")
    run_streaming(
        ["go", "run", "./generate.go"], wrapper, dict(env, VERSION=pk["version"]), "generate schema"
    )
    ldflags = f"-s -w -X {KUBERNETES_PROVIDER_MODULE}/pkg/version.Version={pk['version']}"
    run_streaming(
        ["go", "build", "-trimpath", "-ldflags", ldflags, "-o", str(out / KUBERNETES_PROVIDER), "."],
        wrapper,
        env,
        f"go build {KUBERNETES_PROVIDER}",
    )


def platform_key() -> str:
    return f"{sys.platform}-{platform.machine()}"


def ensure_kubernetes(pins: Pins) -> None:
    k = pins["kubernetes"]
    home = cache_root() / f"kubernetes-v{k['version']}-etcd{k['etcd_version']}-{platform_key()}"
    bindir = build_into_cache(
        home, KUBERNETES_BINARIES, lambda out: build_kubernetes(pins, out), "Kubernetes"
    )
    for name in KUBERNETES_BINARIES:
        link(bindir / name, name)


# kwok's own Stage definitions (in its module, not its binaries): the local cloud applies them as Stage
# objects, since it runs kwok with Stages as CRDs so it can add fault stages while a cluster runs.
KWOK_STAGE_DIRS = ("node/fast", "node/heartbeat-with-lease", "node/chaos", "pod/fast")


def install_kwok_stages(pins: Pins, bindir: Path) -> None:
    dest = bindir / "stages"
    if (dest / ".complete").exists():
        return
    source = go_module_dir("sigs.k8s.io/kwok", f"v{pins['kwok']['version']}", bindir) / "kustomize" / "stage"
    staging = Path(tempfile.mkdtemp(prefix="stages-", dir=bindir))
    try:
        for rel in KWOK_STAGE_DIRS:
            for stage in sorted((source / rel).glob("*.yaml")):
                if stage.name != "kustomization.yaml":
                    target = staging / f"{rel.replace('/', '-')}-{stage.name}"
                    shutil.copyfile(stage, target)
                    target.chmod(0o644)
        (staging / ".complete").write_text(f"v{pins['kwok']['version']}\n")
        if dest.exists():
            shutil.rmtree(dest)
        staging.rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def ensure_kwok(pins: Pins) -> None:
    home = cache_root() / f"kwok-v{pins['kwok']['version']}-{platform_key()}"
    bindir = build_into_cache(home, KWOK_BINARIES, lambda out: build_kwok(pins, out), "kwok")
    with FileLock(home / ".lock"):
        install_kwok_stages(pins, bindir)
    for name in KWOK_BINARIES:
        link(bindir / name, name)


def ensure_kubernetes_provider(pins: Pins) -> None:
    pk = pins["pulumi_kubernetes"]
    home = (
        cache_root() / f"pulumi-kubernetes-v{pk['version']}-{pk['provider_module_version']}-{platform_key()}"
    )
    bindir = build_into_cache(
        home, (KUBERNETES_PROVIDER,), lambda out: build_kubernetes_provider(pins, out), KUBERNETES_PROVIDER
    )
    # On PATH (.tools/bin), the engine uses it as an ambient plugin: it never downloads one.
    link(bindir / KUBERNETES_PROVIDER, KUBERNETES_PROVIDER)


# -------------------------------------------------------------------------------------- chromium

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def ensure_chromium() -> None:
    """Headless Chromium for the report page's browser test (tests/integration/test_report_browser.py):
    Debian's package, installed when this runs as root with apt-get (CI's fresh Debian machine). Not part
    of `all`: `make test` asks for it. Where it cannot be installed, the browser test is skipped, loudly."""
    found = find_chromium()
    if found:
        say(f"chromium from PATH ({found}; nothing to do)")
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        say(
            "chromium is not installed and cannot be installed here (needs root and apt-get): "
            "the report's browser test will be skipped; `apt-get install chromium` provides it"
        )
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        run_streaming(["apt-get", "update", "-q"], Path("/"), env, "apt-get update")
        run_streaming(
            ["apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"],
            Path("/"),
            env,
            "apt-get install chromium",
        )
    except ToolchainError as err:
        say(f"could not install chromium (the report's browser test will be skipped): {err}")
        return
    say(f"chromium installed ({find_chromium()})")


# ------------------------------------------------------------------------------------------ kuberay

KUBERAY_OPERATOR = "kuberay-operator"
# The CRDs the operator watches: it starts its RayCluster, RayJob and RayService controllers unconditionally,
# so all three must be installed for it to run; the fleet creates no RayJob or RayService.
KUBERAY_CRDS = ("rayclusters", "rayjobs", "rayservices")
KUBERAY_CRD_DIR = "kuberay-crds"


def kuberay_key(pins: Pins) -> str:
    return f"kuberay-v{pins['kuberay']['version']}-{platform_key()}"


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


def build_kuberay(pins: Pins, out: Path) -> None:
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


def ensure_kuberay(pins: Pins) -> None:
    bindir = build_into_cache(
        cache_root() / kuberay_key(pins),
        (KUBERAY_OPERATOR,),
        lambda out: build_kuberay(pins, out),
        "KubeRay operator",
    )
    link(bindir / KUBERAY_OPERATOR, KUBERAY_OPERATOR)
    link(bindir / KUBERAY_CRD_DIR, KUBERAY_CRD_DIR)


def kuberay_line(kuberay: dict[str, object]) -> str:
    if not kuberay["built"]:
        return f"KubeRay operator v{kuberay['version']}: not built (make tools)"
    crds = ", ".join(str(c) for c in kuberay["crds"])  # type: ignore[attr-defined]
    return f"KubeRay operator v{kuberay['version']}: {kuberay['operator']} ({kuberay['build']}); CRDs {crds}"


def kuberay_status(pins: Pins) -> dict[str, object]:
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


# -------------------------------------------------------------------------------------------- misc


def status(as_json: bool) -> int:
    pins = load_pins()
    report: dict[str, object] = {"pins": pins, "tools_bin": str(TOOLS_BIN), "links": {}}
    links: dict[str, str] = {}
    if TOOLS_BIN.exists():
        for entry in sorted(TOOLS_BIN.iterdir()):
            if entry.is_symlink():
                links[entry.name] = os.readlink(entry)
    report["links"] = links
    report["kuberay"] = kuberay = kuberay_status(pins)
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        for name, target in links.items():
            print(f"{name:34} -> {target}")
        print(kuberay_line(kuberay))
    return 0


COMPONENTS = ("venv", "pulumi", "terraform", "kubernetes", "kwok", "kuberay", "pulumi-kubernetes")
OPTIONAL_COMPONENTS = ("chromium",)  # not in `all`: `make test` asks for it (the report's browser test)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ensure = sub.add_parser("ensure", help="provide the toolchain (idempotent)")
    ensure.add_argument(
        "components",
        nargs="*",
        metavar="COMPONENT",
        help=f"all (default), {', '.join((*COMPONENTS, *OPTIONAL_COMPONENTS))}",
    )
    st = sub.add_parser("status", help="show what is linked in .tools/bin")
    st.add_argument("--json", action="store_true")
    sub.add_parser(
        "gen-kubernetes-wrapper",
        help="regenerate tools/kubernetes/go.mod and go.sum from the pinned k8s.io/kubernetes go.mod",
    )
    args = parser.parse_args(argv)
    if args.command == "status":
        return status(args.json)
    pins = load_pins()
    if args.command == "gen-kubernetes-wrapper":
        try:
            gen_kubernetes_wrapper(pins)
        except ToolchainError as err:
            say(f"ERROR: {err}")
            return 1
        return 0
    wanted = set(args.components or ["all"])
    unknown = wanted - {"all", *COMPONENTS, *OPTIONAL_COMPONENTS}
    if unknown:
        parser.error(
            f"unknown component(s): {', '.join(sorted(unknown))}; "
            f"expected all, {', '.join((*COMPONENTS, *OPTIONAL_COMPONENTS))}"
        )
    if "all" in wanted:
        wanted = set(COMPONENTS)
    steps = {
        "venv": lambda: ensure_venv(),
        "pulumi": lambda: ensure_pulumi(pins),
        "terraform": lambda: ensure_terraform(pins),
        "kubernetes": lambda: ensure_kubernetes(pins),
        "kwok": lambda: ensure_kwok(pins),
        "kuberay": lambda: ensure_kuberay(pins),
        "pulumi-kubernetes": lambda: ensure_kubernetes_provider(pins),
        "chromium": ensure_chromium,
    }
    try:
        for name in (*COMPONENTS, *OPTIONAL_COMPONENTS):
            if name in wanted and name not in GO_BUILDS:
                steps[name]()
        run_go_builds([steps[name] for name in GO_BUILDS if name in wanted], build_lanes())
    except ToolchainError as err:
        say(f"ERROR: {err}")
        return 1
    say("toolchain ready")
    return 0


# The components built from the Go module proxy on a cold machine, longest first (measured on 2 cores:
# pulumi-kubernetes ~19 min, Kubernetes ~9, the engine ~7, kwok and KubeRay ~3 each). Each is independent
# of the others (its own module, cache directory, lock and links); Go's module cache takes concurrent
# downloads. Warm, each is a check of its cache and a link.
GO_BUILDS = ("pulumi-kubernetes", "kubernetes", "pulumi", "kwok", "kuberay")
LANES_ENV = "NPA_TOOLCHAIN_LANES"
# Two builds at once peak at about 8 GB (pulumi-kubernetes' ~4.6 GB beside Kubernetes'); below this much
# available memory they run one after the other.
TWO_LANES_MIN_AVAILABLE_GB = 12


def available_memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024 / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def build_lanes() -> int:
    """How many Go builds run at once: `$NPA_TOOLCHAIN_LANES`, else two where the memory allows (one `go
    build` leaves a core idle through module downloads, single-threaded links and its last packages; a
    second build fills it), else one."""
    given = os.environ.get(LANES_ENV, "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise ToolchainError(f"{LANES_ENV} must be a positive whole number, not {given!r}")
        return int(given)
    memory = available_memory_gb()
    return 2 if (os.cpu_count() or 1) >= 2 and (memory or 0) >= TWO_LANES_MIN_AVAILABLE_GB else 1


def run_go_builds(steps: list[Callable[[], None]], lanes: int) -> None:
    """Run the build steps on `lanes` threads, longest first; the first failure is raised once every
    started build has ended (a build is never abandoned half-way: its cache directory stays consistent)."""
    if lanes <= 1 or len(steps) <= 1:
        for step in steps:
            step()
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=lanes, thread_name_prefix="toolchain") as pool:
        futures = [pool.submit(step) for step in steps]
    first = next((error for error in (f.exception() for f in futures) if error is not None), None)
    if first is not None:
        raise first if isinstance(first, ToolchainError) else ToolchainError(str(first))


if __name__ == "__main__":
    sys.exit(main())
