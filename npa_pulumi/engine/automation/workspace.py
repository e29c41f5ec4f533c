"""Where the fleet's Pulumi state lives, and how every Automation API workspace and engine call is set up.

* Backend: `--backend URL`, else `PULUMI_BACKEND_URL`, else the DIY backend `file://~/.npa-pulumi/state`
  (the repository's Pulumi.yaml names the same URL, so `pulumi stack ls` there lists the fleet's stacks).
  The engine always gets a file:// backend as an absolute path, `~` expanded from $HOME.
* Secrets: the passphrase provider. A passphrase the user supplies (`PULUMI_CONFIG_PASSPHRASE`, or a file
  named by `PULUMI_CONFIG_PASSPHRASE_FILE` / `--passphrase-file`) wins; otherwise a random passphrase is
  generated once into `~/.npa-pulumi/passphrase` with mode 0600. Losing that file loses the secrets in
  state, so docs/how-it-works.md says to keep it with the backend.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import stat
import sys
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from npa_pulumi.cloud.factory import ensure_backend_served
from npa_pulumi.errors import NpaError, UserInputError
from npa_pulumi.runtime import disk_cache
from npa_pulumi.runtime.analyzer_relay import SOCKET_ENV as ANALYZER_SOCKET_ENV
from npa_pulumi.runtime.disk_cache import binary_identity, cache_key
from npa_pulumi.runtime.files import create_private_file, write_atomically
from npa_pulumi.runtime.home import npa_home
from npa_pulumi.runtime.toolchain import find_kubernetes_provider, find_pulumi

if TYPE_CHECKING:  # the Automation API is imported lazily: npa_pulumi must import without the engine
    from pulumi import automation as auto

PROJECT_NAME = "npa-fleet"
DEFAULT_BACKEND_URL = "file://~/.npa-pulumi/state"


class PassphraseError(NpaError):
    kind = "passphrase"


def resolve_backend_url(flag: str | None = None) -> str:
    """The backend URL handed to the engine. A file:// URL is always made absolute here: npa-pulumi
    expands `~` from $HOME, the engine from the user database, and where the two differ (a CI container
    with HOME set, `sudo -E`, a test harness) they would otherwise use different state directories; a
    relative path would be read from the engine's working directory (the workspace dir)."""
    url = flag or os.environ.get("PULUMI_BACKEND_URL") or DEFAULT_BACKEND_URL
    if url.startswith("file://"):
        location, sep, query = url[len("file://") :].partition("?")
        path = Path(os.path.abspath(os.path.expanduser(location)))
        if url == DEFAULT_BACKEND_URL and "NPA_PULUMI_HOME" in os.environ:
            # Tests and sandboxes move the whole npa home; keep the default backend inside it.
            path = Path(os.path.abspath(npa_home() / "state"))
        url = f"file://{path}{sep}{query}"
        path.mkdir(parents=True, exist_ok=True)
    elif "://" not in url:
        raise UserInputError(
            f"backend URL {url!r} has no scheme; expected e.g. file:///path, s3://bucket or https://"
        )
    elif url.startswith("s3://"):
        # A backend in the local cloud's buckets needs its S3 server running (the cloud layer knows).
        ensure_backend_served(url)
    return url


def engine_backend_url(url: str) -> str:
    """The backend URL as the engines get it. A file:// backend is opened with `metadata=skip` (a
    parameter of gocloud's fileblob, the engine's file store): otherwise every write also rewrites a
    `.attrs` sidecar beside the file in place (truncate, then write), and an engine reading that file at
    the moment, which every read of a blob does, fails with "failed to load checkpoint: EOF" (a cluster
    stack's StackReference to its project stack while `refresh` writes it, a `preview` beside another
    run's `up`). Without sidecars each write is one rename. The sidecars hold a content type and an MD5
    that the engine never reads; a `metadata` parameter the user set is kept."""
    if not url.startswith("file://"):
        return url
    location, _, query = url.partition("?")
    params = urllib.parse.parse_qsl(query, keep_blank_values=True)
    if any(name == "metadata" for name, _ in params):
        return url
    return f"{location}?{urllib.parse.urlencode([*params, ('metadata', 'skip')])}"


@dataclass(frozen=True)
class SecretsSettings:
    """How the passphrase reaches the engine: exactly one of the two env vars is set."""

    env: dict[str, str]
    source: str  # "env" | "file:<path>" | "generated:<path>"


PASSPHRASE = "passphrase"
SECRETS_PROVIDER_ENV = "NPA_SECRETS_PROVIDER"
# The engine's cloud secrets managers (gocloud.dev/secrets URLs): a data key per stack, kept encrypted by
# the key service and decrypted once per engine process, instead of a passphrase derivation (1,000,000
# rounds of PBKDF2-SHA256) in every engine process that opens the stack.
CLOUD_SECRETS_SCHEMES = ("awskms", "azurekeyvault", "gcpkms", "hashivault")


def resolve_secrets_provider(chosen: str | None = None) -> str:
    """The secrets provider new stacks are created with: `chosen` (--secrets-provider), else
    $NPA_SECRETS_PROVIDER, else the passphrase. A stack keeps the provider it was created with."""
    value = (chosen or os.environ.get(SECRETS_PROVIDER_ENV) or PASSPHRASE).strip()
    if value == PASSPHRASE:
        return value
    scheme = value.split("://", 1)[0] if "://" in value else ""
    if scheme not in CLOUD_SECRETS_SCHEMES:
        expected = ", ".join(f"{name}://..." for name in CLOUD_SECRETS_SCHEMES)
        raise UserInputError(
            f"secrets provider {value!r} is not one the engine offers; expected {PASSPHRASE!r} or a key "
            f"service URL ({expected}), e.g. awskms://KEY_ID?region=eu-north1"
        )
    return value


def _check_private(path: Path) -> None:
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        # A readable passphrase file is a leaked secret; tighten it rather than refuse to run.
        path.chmod(0o600)


def resolve_secrets(passphrase_file: str | Path | None = None) -> SecretsSettings:
    if passphrase_file:
        path = Path(passphrase_file).expanduser().resolve()
        if not path.is_file():
            raise PassphraseError(f"passphrase file {path} does not exist")
        _check_private(path)
        return SecretsSettings({"PULUMI_CONFIG_PASSPHRASE_FILE": str(path)}, f"file:{path}")
    from_env = os.environ.get("PULUMI_CONFIG_PASSPHRASE")
    if from_env:
        return SecretsSettings({}, "env")
    env_file = os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE")
    if env_file:
        return resolve_secrets(env_file)
    path = npa_home() / "passphrase"
    if not path.exists():
        with contextlib.suppress(FileExistsError):  # another process generated it first
            create_private_file(path, secrets.token_urlsafe(32) + "\n")
    _check_private(path)
    return SecretsSettings({"PULUMI_CONFIG_PASSPHRASE_FILE": str(path)}, f"generated:{path}")


def engine_env(pulumi_bin: Path | None = None) -> dict[str, str]:
    """Environment overrides for every Pulumi call: offline, no update checks, the right Python.

    * no update checks and no automatic plugin downloads (a missing plugin is an error, not a network call);
    * the engine's own directory (where the binary really lives, as `pulumi_command` runs it) on PATH, so
      its bundled helper scripts are found; not the directory of a link to it (`.tools/bin`), which also
      holds an unguarded Kubernetes provider;
    * dynamic providers and policy packs run with this interpreter, which can import npa_pulumi, through
      `plugin_python_wrapper` so that each host watches the run that started it from its first moment.
    """
    pulumi_bin = pulumi_bin or find_pulumi()
    bin_dirs = [str(pulumi_bin.resolve().parent)]
    provider = find_kubernetes_provider()
    if provider is not None:
        # An ambient plugin: found on PATH, never downloaded; first on PATH, its guard (see
        # runtime/plugin_guard.py), so it stops with the run that started it.
        guarded = guarded_plugin_dir(provider)
        bin_dirs.insert(0, str(guarded) if guarded else str(provider.parent))
    python_dir = str(Path(sys.executable).parent)
    path = os.pathsep.join([*bin_dirs, python_dir, os.environ.get("PATH", "")])
    return {
        "PATH": path,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_PYTHON_CMD": plugin_python_wrapper(),
        "PULUMI_SKIP_CONFIRMATIONS": "true",
    }


def guarded_plugin_dir(binary: Path) -> Path | None:
    """A directory holding one executable named like `binary` that runs it under
    `npa_pulumi.runtime.plugin_guard`, written once per (interpreter, binary) under `<npa home>/bin/`;
    None where that cannot be written (the plugin then runs unguarded)."""
    real = binary.resolve()
    text = (
        f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m npa_pulumi.runtime.plugin_guard "
        f'{shlex.quote(str(real))} "$@"\n'
    )
    key = cache_key(f"{sys.executable} {real}")[:12]
    directory = npa_home() / "bin" / f"guarded-{key}"
    path = directory / binary.name
    try:
        if path.read_text() == text and os.access(path, os.X_OK):
            return directory
    except OSError:
        pass
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_atomically(path, text, mode=0o755)
    except OSError:
        return None
    return directory


def plugin_python_wrapper() -> str:
    """An executable that runs this interpreter with `npa_pulumi.runtime.plugin_host` in front of the
    engine's plugin hosts (`$PULUMI_PYTHON_CMD -u -m pulumi.dynamic ...`); see that module for why. A policy
    host the command's shared host serves starts as the light relay instead (runtime/analyzer_relay.py:
    `python -I -S`, this package found from its own place, not through the site packages). It is written
    once per interpreter and package into `<npa home>/bin/`; where that cannot be written, the plain
    interpreter is used (the hosts then start their watchdog on their first request, as before)."""
    python = shlex.quote(sys.executable)
    package_root = str(Path(__file__).resolve().parents[3])  # the directory holding npa_pulumi/
    relay = shlex.quote(
        f"import sys; sys.path.insert(0, {package_root!r}); "
        "from npa_pulumi.runtime.analyzer_relay import main; main(sys.argv)"
    )
    text = (
        "#!/bin/sh\n"
        f'if [ -n "${{{ANALYZER_SOCKET_ENV}:-}}" ] && [ "$1 $2 $3" = "-u -m pulumi.policy" ]; then\n'
        f'  exec {python} -I -S -c {relay} "$@"\n'
        "fi\n"
        f'exec {python} -u -m npa_pulumi.runtime.plugin_host "$@"\n'
    )
    path = npa_home() / "bin" / f"plugin-python-{cache_key(sys.executable, package_root)[:12]}"
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


@dataclass
class EngineSettings:
    backend_url: str
    secrets: SecretsSettings
    work_dir: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    # What new stacks are created with (resolve_secrets_provider); existing stacks keep their own. The
    # passphrase stays resolved either way: stacks made with it still open with it.
    secrets_provider: str = PASSPHRASE

    @classmethod
    def resolve(
        cls,
        backend: str | None = None,
        passphrase_file: str | Path | None = None,
        extra_env: dict[str, str] | None = None,
        secrets_provider: str | None = None,
    ) -> EngineSettings:
        if os.environ.get("PULUMI_CONFIG_PASSPHRASE") == "":
            # An exported *empty* passphrase shadows the file (an engine gotcha); treat it as unset.
            del os.environ["PULUMI_CONFIG_PASSPHRASE"]
        work_dir = npa_home() / "workspace"
        work_dir.mkdir(parents=True, exist_ok=True)
        return cls(
            backend_url=resolve_backend_url(backend),
            secrets=resolve_secrets(passphrase_file),
            work_dir=work_dir,
            extra_env=dict(extra_env or {}),
            secrets_provider=resolve_secrets_provider(secrets_provider),
        )

    def env(self) -> dict[str, str]:
        env = engine_env()
        env["PULUMI_BACKEND_URL"] = engine_backend_url(self.backend_url)
        env.update(self.secrets.env)
        env.update(self.extra_env)
        return env


def _version_key(binary: Path) -> str:
    """The disk-cache key of the engine's checked version: this binary (path, size, mtime) and this SDK."""
    from importlib.metadata import version as distribution_version

    return cache_key("pulumi-version", binary_identity(binary), distribution_version("pulumi"))


def engine_version() -> str | None:
    """The engine's version without importing the Pulumi SDK (~0.3 s of CPU) or starting the engine, where
    the disk cache knows it (`pulumi_command` remembers it); else through `pulumi_command`."""
    try:
        known = disk_cache.load("tool-versions", _version_key(find_pulumi().resolve()))
    except OSError:
        known = None
    if isinstance(known, str):
        return known
    version = pulumi_command().version
    return str(version) if version is not None else None


@lru_cache(maxsize=1)
def pulumi_command() -> auto.PulumiCommand:
    """The engine binary for the Automation API. `PulumiCommand` runs `pulumi version` (~0.6 s) to check
    the CLI against the SDK's minimum; that check passed once for this very binary (same path, size and
    mtime) and this SDK is remembered in the disk cache, so later commands skip the engine start."""
    from pulumi import automation as auto

    # The binary where it really lives, not a link to it (`.tools/bin/pulumi`): the engine puts its own
    # directory first on its plugins' PATH, and `.tools/bin` also holds the Kubernetes provider, which must
    # be found through its guard (runtime/plugin_guard.py) so that it stops with the run that started it.
    binary = find_pulumi().resolve()
    # PulumiCommand(root=R) runs R/bin/pulumi; both .tools/bin and the toolchain cache fit that shape.
    root = str(binary.parent.parent)
    try:
        key = _version_key(binary)
    except OSError:
        return auto.PulumiCommand(root=root)
    known = disk_cache.load("tool-versions", key)
    if isinstance(known, str):
        from semver import VersionInfo

        known_version: str = known

        class _CheckedCommand(auto.PulumiCommand):
            def __init__(self) -> None:  # deliberately not calling super(): that is the version run
                self.command = os.path.join(root, "bin", "pulumi")
                self.version = VersionInfo.parse(known_version)

        with contextlib.suppress(ValueError):
            return _CheckedCommand()
    command = auto.PulumiCommand(root=root)
    if command.version is not None:
        disk_cache.store("tool-versions", key, str(command.version))
    return command


_PROJECT_FILE_LOCK = threading.Lock()


def ensure_project_file(work_dir: Path, project_name: str, backend_url: str) -> None:
    """Write the workspace's Pulumi.yaml when it differs from what it should say, atomically.

    Every stack's Automation API workspace shares this directory. Handed `project_settings`, each one
    rewrote Pulumi.yaml in place (truncate, then write) when it was created, so with stacks running in
    parallel an engine could read it half-written ("expected project to be an object, was '<nil>'"). It
    is now written once, by rename, and the workspaces only read it."""
    import yaml
    from pulumi import automation as auto

    settings = auto.ProjectSettings(
        name=project_name,
        runtime="python",
        backend=auto.ProjectBackend(url=engine_backend_url(backend_url)),
        main=os.getcwd(),  # what the Automation API sets for an inline program
    )
    text = yaml.dump(settings.to_dict())
    path = work_dir / "Pulumi.yaml"
    with _PROJECT_FILE_LOCK:
        try:
            if path.read_text(encoding="utf-8") == text:
                return
        except OSError:
            pass
        write_atomically(path, text)


def workspace_options(
    settings: EngineSettings,
    program: Callable[[], None] | None = None,
    project_name: str = PROJECT_NAME,
) -> auto.LocalWorkspaceOptions:
    from pulumi import automation as auto

    ensure_project_file(settings.work_dir, project_name, settings.backend_url)
    return auto.LocalWorkspaceOptions(
        work_dir=str(settings.work_dir),
        program=program,
        env_vars=settings.env(),
        secrets_provider=settings.secrets_provider,
        pulumi_command=pulumi_command(),
    )


def select_or_create_stack(
    settings: EngineSettings,
    stack_name: str,
    program: Callable[[], None],
    project_name: str = PROJECT_NAME,
) -> auto.Stack:
    from pulumi import automation as auto

    return auto.create_or_select_stack(
        stack_name,
        project_name=project_name,
        program=program,
        opts=workspace_options(settings, program, project_name),
    )
