"""Running a Terraform recipe for one stack: materialize, render, init, plan, apply, output, destroy.

This module knows nothing about Pulumi; the `TerraformModule` dynamic resource (components/) drives it.
Its guarantees:

* each stack gets its own work dir (`<npa home>/work/<stack>/`) holding the materialized recipe, the
  rendered `terraform.tfvars.json`, the Terraform state and a full `terraform.log`;
* identity (tenant, project, region, subnet, token) and run-time secrets (capacity-block reservations) reach
  Terraform only as `TF_VAR_*` environment variables, never in files; the token minted for the run is also
  its `NEBIUS_IAM_TOKEN`, and an ambient `NEBIUS_IAM_TOKEN` is dropped unless `NPA_REUSE_IAM_TOKEN` is set;
* the provider plugin cache is shared, and `init` holds an exclusive lock on it so parallel stacks never
  corrupt it;
* Terraform state is never lost: it is handed back to the caller after every run (to be kept in Pulumi
  state), and a copy from Pulumi is restored only when it is newer than what the work dir holds (same
  lineage, higher serial) or the work dir has none — a half-failed apply's newer local state always wins.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from npa_pulumi.cloud.redaction import replace_secrets
from npa_pulumi.errors import NpaError
from npa_pulumi.runtime import disk_cache, pins, provider_env, supervision, tracing
from npa_pulumi.runtime.disk_cache import binary_identity, cache_key
from npa_pulumi.runtime.locks import FileLock
from npa_pulumi.runtime.retry import RetryPolicy, call_with_retry
from npa_pulumi.runtime.toolchain import find_terraform

log = logging.getLogger(__name__)

# tools/pins.toml [terraform] min_version: upstream k8s-training's validations need logical operators that
# short-circuit (terraform/OpenTofu 1.12); an older binary fails every plan of the default recipe.
MIN_TERRAFORM: tuple[int, int, int] = cast(
    tuple[int, int, int], tuple(int(part) for part in pins.pin("terraform", "min_version").split(".")[:3])
)
TFVARS_FILE = "terraform.tfvars.json"
LOG_FILE = "terraform.log"
# Written into .terraform after a successful init: what it was initialised for (TerraformWorkspace.init).
INIT_RECORD = "npa-init.json"
TAIL_LINES = 25
# Runs wait for a state lock rather than fail at once: it covers the moments in which a killed run's
# terraform is still stopping (runtime/supervision.py).
LOCK_TIMEOUT = "-lock-timeout=300s"

# Environment variables that must never reach Terraform or its provisioners.
_SCRUBBED_ENV = (
    "PULUMI_CONFIG_PASSPHRASE",
    "PULUMI_CONFIG_PASSPHRASE_FILE",
    "PULUMI_ACCESS_TOKEN",
    # Keyless CI: what lets the job ask for OIDC tokens stays with npa-pulumi; the recipe's providers and
    # provisioners get the IAM token minted for their run, never the means to mint the job's identity.
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
    "TF_CLI_ARGS",
    "TF_DATA_DIR",
    "TF_WORKSPACE",
)


class TerraformError(NpaError):
    kind = "terraform"

    def __init__(self, message: str, tail: str = "", log_path: Path | None = None) -> None:
        super().__init__(message)
        self.tail = tail
        self.log_path = log_path

    def __str__(self) -> str:
        parts = [self.args[0]]
        if self.tail:
            parts.append("terraform said:\n" + self.tail)
        if self.log_path:
            parts.append(f"full log: {self.log_path}")
        return "\n".join(parts)


def terraform_version(binary: Path) -> tuple[int, int, int]:
    """The binary's version; remembered per binary (path, size, mtime) in the disk cache, because every
    bridge run checks it and `version -json` costs a process start (~0.2 s)."""
    try:
        key = cache_key("terraform-version", binary_identity(binary))
    except OSError:
        key = None
    known = disk_cache.load("tool-versions", key) if key else None
    raw = known if isinstance(known, str) else _ask_terraform_version(binary)
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", raw)
    if not match:
        raise TerraformError(f"cannot parse terraform version {raw!r} from {binary}")
    if key and known is None:
        disk_cache.store("tool-versions", key, raw)
    major, minor, patch = (int(g) for g in match.groups())
    return major, minor, patch


def _ask_terraform_version(binary: Path) -> str:
    proc = subprocess.run(
        [str(binary), "version", "-json"], capture_output=True, text=True, env=_base_env(), check=False
    )
    if proc.returncode != 0:
        raise TerraformError(f"`{binary} version -json` failed", tail=_tail(proc.stdout + proc.stderr))
    return str(json.loads(proc.stdout).get("terraform_version", ""))


def check_terraform(binary: Path | None = None, minimum: tuple[int, int, int] = MIN_TERRAFORM) -> Path:
    binary = binary or find_terraform()
    version = terraform_version(binary)
    if version < minimum:
        raise TerraformError(
            f"{binary} is version {'.'.join(map(str, version))}; npa-pulumi needs terraform or tofu >= "
            f"{'.'.join(map(str, minimum))} (set NPA_TERRAFORM_BIN to a newer one)"
        )
    return binary


def _tail(text: str, lines: int = TAIL_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _base_env() -> dict[str, str]:
    from npa_pulumi.cloud.nebius.settings import ENV_IAM_TOKEN, ENV_REUSE_IAM_TOKEN, env_flag

    # provider_env: in a provider call the orchestrator serves, the engines' environment (the tenant, PATH).
    ambient = provider_env.environ()
    env = {k: v for k, v in ambient.items() if k not in _SCRUBBED_ENV and not k.startswith("TF_CLI_ARGS")}
    if not env_flag(ambient, ENV_REUSE_IAM_TOKEN):
        # As on the SDK path (cloud/nebius/profile.py): an ambient token, not the profile, would decide
        # the principal the recipe's provider and provisioners act as, and a stale one shadows the profile.
        env.pop(ENV_IAM_TOKEN, None)
    env.update({"TF_IN_AUTOMATION": "1", "TF_INPUT": "0", "CHECKPOINT_DISABLE": "1"})
    config = env.get("TF_CLI_CONFIG_FILE")
    if config and not Path(config).expanduser().is_file():
        # A CLI config that points nowhere only makes terraform print warnings into every run's log.
        del env["TF_CLI_CONFIG_FILE"]
    return env


def base_env() -> dict[str, str]:
    """The environment every terraform process starts from (secrets of the engine scrubbed)."""
    return _base_env()


def _hcl_value(value: Any) -> str:
    """A TF_VAR_* value: strings verbatim, everything else as JSON (valid HCL expression syntax)."""
    return value if isinstance(value, str) else json.dumps(value)


def runtime_env(
    identity: Mapping[str, str],
    runtime_vars: Mapping[str, Any],
    plugin_cache: Path | None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    env = _base_env()
    for name, value in {**identity, **runtime_vars}.items():
        env[f"TF_VAR_{name}"] = _hcl_value(value)
    if identity.get("iam_token"):
        # The recipe's nebius provider authenticates from NEBIUS_IAM_TOKEN (upstream's environment.sh
        # exports it): give it the token minted for this run from the fleet's own identity.
        env["NEBIUS_IAM_TOKEN"] = str(identity["iam_token"])
    if plugin_cache is not None:
        plugin_cache.mkdir(parents=True, exist_ok=True)
        env["TF_PLUGIN_CACHE_DIR"] = str(plugin_cache)
    env.update(extra or {})
    return env


TOKEN_VARIABLE = "iam_token"  # the recipe variable the minted IAM token is passed as

# Waiting out a state lock that a stopping terraform holds: every 2 s until the deadline.
STATE_LOCK_RETRY = RetryPolicy(max_attempts=1_000, initial_backoff_s=2.0, multiplier=1.0, jitter=0.0)


class _StateLocked(Exception):
    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        super().__init__("Error acquiring the state lock")
        self.proc = proc


@dataclass
class TerraformWorkspace:
    """One stack's Terraform work dir. `module_dir` is where terraform runs (the recipe root)."""

    root: Path
    module_subdir: str = "k8s-training"
    terraform_bin: Path | None = None
    # Run-time secrets (the IAM token, capacity-block ids) that Terraform may echo: plan output shows
    # attribute values and provisioners print what they were given. They are masked in terraform.log and
    # in error tails; the work dir itself (Terraform's working state holds plaintext) is private (0700).
    redact: tuple[str, ...] = ()
    # Token-path runs on Nebius: a fresh IAM token for every terraform invocation (a renewal through the
    # adapter's bearer), so a token has to outlive one invocation, not a whole create or update.
    renew_token: Callable[[], str] | None = field(default=None, repr=False)

    def scrub(self, text: str) -> str:
        return replace_secrets(text, self.redact)

    def _private(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o700)

    @property
    def module_dir(self) -> Path:
        return self.root / self.module_subdir

    @property
    def state_path(self) -> Path:
        return self.module_dir / "terraform.tfstate"

    @property
    def log_path(self) -> Path:
        return self.root / LOG_FILE

    def binary(self) -> Path:
        if self.terraform_bin is None:
            self.terraform_bin = check_terraform()
        return self.terraform_bin

    # -------------------------------------------------------------------------------- files

    def write_tfvars(self, file_vars: Mapping[str, Any]) -> Path:
        path = self.module_dir / TFVARS_FILE
        path.write_text(json.dumps(dict(file_vars), indent=2, sort_keys=True) + "\n")
        return path

    def read_state(self) -> dict[str, Any] | None:
        if not self.state_path.is_file():
            return None
        text = self.state_path.read_text()
        return json.loads(text) if text.strip() else None

    def read_state_text(self) -> str | None:
        """The state file verbatim. Pulumi keeps it as a string: its property values are float64, and a
        state object round-tripped through them comes back with `"version": 4.0`, which Terraform refuses."""
        if not self.state_path.is_file():
            return None
        text = self.state_path.read_text()
        return text if text.strip() else None

    def restore_state(self, saved: str | Mapping[str, Any] | None) -> bool:
        """Put `saved` (the state text kept in Pulumi) into the work dir unless the work dir already holds
        the same or a newer revision of it. Returns True when the file was written."""
        if not saved:
            return False
        state: dict[str, Any] = json.loads(saved) if isinstance(saved, str) else _integral(dict(saved))
        current = self.read_state()
        if current is not None:
            same_lineage = current.get("lineage") == state.get("lineage")
            if not same_lineage or int(current.get("serial", 0)) >= int(state.get("serial", 0)):
                return False
        self.module_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tfstate.tmp")
        tmp.write_text(saved if isinstance(saved, str) else json.dumps(state, indent=2))
        tmp.chmod(0o600)
        tmp.replace(self.state_path)
        return True

    # -------------------------------------------------------------------------------- runs

    def _run(self, args: list[str], env: Mapping[str, str], what: str) -> str:
        if self.renew_token is not None and env.get(f"TF_VAR_{TOKEN_VARIABLE}"):
            env = self._with_fresh_token(env)
        # Traced (runtime/tracing.py): a span per command under its stack's (the work dir is named after
        # the stack), whose context terraform is given as TRACEPARENT.
        with tracing.span(f"terraform {what}", {"npa.stack": self.root.name}, stack=self.root.name):
            parent = tracing.traceparent(self.root.name)
            return self._run_untraced(args, {**env, "TRACEPARENT": parent} if parent else env, what)

    def _with_fresh_token(self, env: Mapping[str, str]) -> dict[str, str]:
        assert self.renew_token is not None
        token = self.renew_token()
        self.redact = (*self.redact, token)  # masked in terraform.log like the first one
        return {**env, f"TF_VAR_{TOKEN_VARIABLE}": token, "NEBIUS_IAM_TOKEN": token}

    def _run_untraced(self, args: list[str], env: Mapping[str, str], what: str) -> str:
        cmd = [str(self.binary()), *args]
        started = time.monotonic()

        def attempt() -> subprocess.CompletedProcess[str]:
            proc = supervision.run(cmd, self.module_dir, env)  # stopped if the run that started us is killed
            if proc.returncode != 0 and "Error acquiring the state lock" in proc.stderr + proc.stdout:
                raise _StateLocked(proc)
            return proc

        # A killed run's terraform may still be stopping (runtime/supervision.py) and hold the state lock;
        # the local backend can fail at once instead of honouring -lock-timeout. Nothing ran: retry, for as
        # long as such a terraform may take to stop.
        try:
            proc = call_with_retry(
                attempt,
                retry_on=_StateLocked,
                what=f"terraform {what} (state locked)",
                policy=STATE_LOCK_RETRY,
                deadline=started + supervision.GRACE_S * 2,
            )
        except _StateLocked as locked:
            proc = locked.proc
        output = self.scrub(proc.stdout + proc.stderr)
        self._private()
        with self.log_path.open("a") as handle:
            handle.write(
                f"\n===== {time.strftime('%Y-%m-%dT%H:%M:%S')} terraform {' '.join(args)}"
                f" (exit {proc.returncode}, {time.monotonic() - started:.1f}s)\n"
            )
            handle.write(output)
        self.log_path.chmod(0o600)
        if proc.returncode != 0:
            raise TerraformError(
                f"terraform {what} failed in {self.module_dir}", _tail(output), self.log_path
            )
        return proc.stdout

    def init(
        self, env: Mapping[str, str], plugin_cache_lock: Path | None = None, recipe_digest: str | None = None
    ) -> None:
        """`terraform init`, unless this work dir was initialised for the same recipe (`recipe_digest`, the
        override files included), terraform binary, CLI configuration, plugin cache and lock file, with
        every module and provider that init installed still in place: init then has nothing to do, and on
        upstream k8s-training (a dozen providers, twenty modules) it is a second or two of CPU per run."""
        key = self._init_key(env, recipe_digest) if recipe_digest else None
        if key is not None and self._initialised_for(key):
            return
        args = ["init", "-input=false", "-no-color"]
        if plugin_cache_lock is None:
            self._run(args, env, "init")
        else:
            # The plugin cache is shared by every stack; concurrent inits into it can corrupt it.
            with FileLock(plugin_cache_lock):
                self._run(args, env, "init")
        if key is not None:
            self._record_init(env, recipe_digest or "")

    def _init_key(self, env: Mapping[str, str], recipe_digest: str) -> str | None:
        lock = self.module_dir / ".terraform.lock.hcl"
        cli_config = Path(env["TF_CLI_CONFIG_FILE"]) if env.get("TF_CLI_CONFIG_FILE") else None
        try:
            parts = [
                recipe_digest,
                json.dumps(binary_identity(self.binary())),
                cli_config.read_text() if cli_config and cli_config.is_file() else "",
                env.get("TF_PLUGIN_CACHE_DIR", ""),
                lock.read_text() if lock.is_file() else "",
            ]
        except OSError:
            return None
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()

    def _initialised_for(self, key: str) -> bool:
        dot = self.module_dir / ".terraform"
        try:
            recorded = json.loads((dot / INIT_RECORD).read_text()).get("key")
        except (OSError, ValueError, AttributeError):
            return False
        if recorded != key:
            return False
        # A provider init linked from the plugin cache that is gone since (a cleaned cache) needs init again.
        return not any(p.is_symlink() and not p.exists() for p in (dot / "providers").rglob("*"))

    def _record_init(self, env: Mapping[str, str], recipe_digest: str) -> None:
        key = self._init_key(env, recipe_digest)  # after init: the lock file it wrote is part of it
        dot = self.module_dir / ".terraform"
        if key is not None and dot.is_dir():
            (dot / INIT_RECORD).write_text(json.dumps({"key": key}))

    def adopt_init(self, other: TerraformWorkspace) -> None:
        """Start from `other`'s initialised work dir (its `.terraform` and lock file), as a preview's
        throw-away copy does: the provider links and installed modules are the same for the same
        recipe, so `init` (with the same `recipe_digest`) has nothing to do."""
        source = other.module_dir / ".terraform"
        if not source.is_dir():
            return
        self.module_dir.mkdir(parents=True, exist_ok=True)
        shutil.copytree(source, self.module_dir / ".terraform", symlinks=True, dirs_exist_ok=True)
        lock = other.module_dir / ".terraform.lock.hcl"
        if lock.is_file():
            shutil.copy2(lock, self.module_dir / ".terraform.lock.hcl")

    def apply(self, env: Mapping[str, str], replace: Sequence[str] = ()) -> None:
        """`replace`: addresses to re-create (objects deleted or changed outside the fleet), those of them
        that the state still holds (a replace of an address the state lacks is refused)."""
        held = self.state_addresses()
        targets = [f"-replace={address}" for address in replace if address in held]
        self._run(
            ["apply", "-auto-approve", "-input=false", "-no-color", LOCK_TIMEOUT, *targets], env, "apply"
        )

    def state_addresses(self) -> set[str]:
        """The managed resource instances the state holds, as Terraform addresses."""
        found: set[str] = set()
        for resource in (self.read_state() or {}).get("resources") or []:
            if resource.get("mode") != "managed":
                continue
            module = f"{resource['module']}." if resource.get("module") else ""
            base = f"{module}{resource['type']}.{resource['name']}"
            for instance in resource.get("instances") or []:
                key = instance.get("index_key")
                found.add(base if key is None else f"{base}[{json.dumps(key)}]")
        return found

    def plan_changes(self, env: Mapping[str, str]) -> bool:
        """True when a plan would change something (`-detailed-exitcode` 2)."""
        cmd = [str(self.binary()), "plan", "-input=false", "-no-color", "-detailed-exitcode", "-lock=false"]
        with tracing.span("terraform plan", {"npa.stack": self.root.name}, stack=self.root.name):
            parent = tracing.traceparent(self.root.name)
            proc = subprocess.run(
                cmd,
                cwd=self.module_dir,
                env={**env, "TRACEPARENT": parent} if parent else dict(env),
                capture_output=True,
                text=True,
                check=False,
            )
        if proc.returncode == 1:
            raise TerraformError(
                f"terraform plan failed in {self.module_dir}",
                _tail(self.scrub(proc.stdout + proc.stderr)),
                self.log_path,
            )
        return proc.returncode == 2

    def plan_json(self, env: Mapping[str, str], plan_dir: Path) -> dict[str, Any]:
        """`terraform plan` read-only (no state lock, the plan file in `plan_dir`), then `terraform show
        -json` of it: the document npa_pulumi/bridge/plan_summary.py reads. The show output holds variable
        values, so it is parsed here and never written to terraform.log."""
        plan_file = plan_dir / "preview.tfplan"
        args = ["plan", "-input=false", "-no-color", "-lock=false", f"-out={plan_file}"]
        self._run(args, env, "plan")
        proc = supervision.run([str(self.binary()), "show", "-json", str(plan_file)], self.module_dir, env)
        if proc.returncode != 0:
            raise TerraformError(
                f"terraform show failed in {self.module_dir}", _tail(self.scrub(proc.stderr)), self.log_path
            )
        shown = json.loads(proc.stdout)
        return shown if isinstance(shown, dict) else {}

    def refresh(self, env: Mapping[str, str]) -> None:
        args = ["apply", "-refresh-only", "-auto-approve", "-input=false", "-no-color", LOCK_TIMEOUT]
        self._run(args, env, "refresh")

    def outputs(self, env: Mapping[str, str]) -> dict[str, Any]:
        """`terraform output -json`: {name: {value, type, sensitive}}. Read from the local state file the
        apply just wrote when it has the v4 layout (`output -json` reads the same), sparing a terraform
        process per stack; otherwise asked of terraform."""
        state = self.read_state()
        if state is not None and state.get("version") == 4 and isinstance(state.get("outputs"), dict):
            return {
                name: {"sensitive": False, **entry}  # the state omits `sensitive` when false
                for name, entry in state["outputs"].items()
                if isinstance(entry, dict)
            }
        raw = json.loads(self._run(["output", "-json", "-no-color"], env, "output") or "{}")
        return {name: entry for name, entry in raw.items()}

    def destroy(self, env: Mapping[str, str]) -> None:
        self._run(["destroy", "-auto-approve", "-input=false", "-no-color", LOCK_TIMEOUT], env, "destroy")

    def state_is_empty(self) -> bool:
        state = self.read_state()
        return state is None or not state.get("resources")

    def retire(self, keep_log_as: Path) -> None:
        """After a destroy whose state is verified empty: nothing of the work dir is needed any more, and
        its Terraform state copies (`terraform.tfstate.backup` still lists every destroyed resource, a
        capacity-block id included) and tfvars must not outlive the stack. Only the (masked) log is kept,
        moved to `keep_log_as`."""
        import shutil

        if not self.state_is_empty():
            raise RuntimeError(f"{self.state_path} still lists resources: the work dir is kept for a retry")
        if self.log_path.is_file():
            keep_log_as.parent.mkdir(parents=True, exist_ok=True)
            self.log_path.replace(keep_log_as)
        shutil.rmtree(self.root, ignore_errors=True)


def _integral(value: Any) -> Any:
    """Whole floats back to ints (a state object that went through Pulumi's float64 property values)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


def split_outputs(raw: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`terraform output -json` entries → (plain values, sensitive values)."""
    plain: dict[str, Any] = {}
    sensitive: dict[str, Any] = {}
    for name, entry in raw.items():
        (sensitive if entry.get("sensitive") else plain)[name] = entry.get("value")
    return plain, sensitive
