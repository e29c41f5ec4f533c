"""`npa-pulumi doctor`: what the fleet needs on this machine for the chosen cloud, checked read-only, each
with how to fix it. Nothing is created or changed: the backend is only looked at, the passphrase only
located (never generated), a Nebius token only minted (never printed or stored). The exceptions: with
`--auth federated` and an s3:// backend without AWS credentials, a key to the state bucket is minted for
ten minutes, used to read the bucket and deleted, as every such run does (the `state-key` check); and the
explicit opt-in `--install-plugins` runs `pulumi plugin install` for a missing pinned provider plugin.

What `up` on the chosen cloud needs is `fail` when missing (the command exits 1); what only some commands
or fleets need (kubectl, the Kubernetes binaries of the local cloud's API servers, disk headroom) is `warn`.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from npa_pulumi import __version__
from npa_pulumi.cloud.factory import TENANT_ENV
from npa_pulumi.errors import NpaError
from npa_pulumi.machine.nebius_auth import PROJECTS, FleetProject, identity_checks
from npa_pulumi.output.doctor import Check, CheckStatus, DoctorReport
from npa_pulumi.runtime import toolchain
from npa_pulumi.runtime.home import npa_home

MIN_FREE_GIB = 2.0  # work dirs, plugin and provider caches, a local cloud's etcd data
LOW_FREE_GIB = 10.0
PROBE_KEY_LIFE_S = 600  # the state-key probe's key: deleted at once, expired in minutes if it is not
OK, WARN, FAIL, SKIP = CheckStatus.OK, CheckStatus.WARN, CheckStatus.FAIL, CheckStatus.SKIP


def _version(text: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in text)


def check_python() -> Check:
    found = sys.version_info[:3]
    summary = f"Python {_version(found)} ({sys.executable})"
    if found < (3, 11):
        return Check("python", FAIL, summary, "install Python >= 3.11 (pipx install --python python3.11 ...)")
    return Check("python", OK, summary, details={"version": _version(found), "executable": sys.executable})


def _package_data() -> dict[str, Path | None]:
    """Where this installation's run-time data is (None: missing), found the way the commands find it."""
    from importlib import resources, util

    def package_dir(name: str, *rel: str) -> Path | None:
        spec = util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            return None
        path = Path(next(iter(spec.submodule_search_locations))).joinpath(*rel)
        return path if path.exists() else None

    tenant = Path(str(resources.files("npa_pulumi") / "data" / "local-tenant.yaml"))
    return {
        # The one recipe the package ships: soperator's local stand-in (k8s-training has none, the local
        # cloud deploys the default recipe, which `check_recipe` looks at).
        "soperator-stand-in": package_dir("npa_pulumi.recipes", "local-soperator", "variables.tf"),
        "policy-pack": package_dir("npa_pulumi.policies", "fleet-guardrails", "PulumiPolicy.yaml"),
        "components": package_dir("npa_pulumi.components", "terraform_module.py"),
        "local-tenant": tenant if tenant.is_file() else None,
    }


def check_package() -> Check:
    root = Path(__file__).resolve().parents[1]
    data = _package_data()
    missing = [name for name, path in data.items() if path is None]
    try:
        dist = importlib.metadata.version("npa-pulumi")
    except importlib.metadata.PackageNotFoundError:
        dist = "not installed (running from source)"
    details = {
        "version": __version__,
        "distribution": dist,
        "location": str(root),
        "data": {name: str(path) if path else None for name, path in data.items()},
    }
    summary = f"npa-pulumi {__version__} at {root}"
    if missing:
        fix = "reinstall the package (pipx reinstall npa-pulumi, or pip install . from a checkout)"
        return Check("package", FAIL, f"{summary}; missing {', '.join(missing)}", fix, details)
    return Check(
        "package",
        OK,
        summary + " (soperator stand-in, policy pack, components, tenant fixture)",
        details=details,
    )


def check_engine() -> Check:
    range_text = toolchain.pulumi_supported_range()
    try:
        choice = toolchain.choose_pulumi()
    except toolchain.ToolchainMissing as err:
        return Check("engine", FAIL, str(err), "install a supported pulumi or run `make tools` in a checkout")
    reported = choice.version or toolchain.reported_version(choice.path)
    details: dict[str, Any] = {
        "path": str(choice.path),
        "source": choice.source,
        "version": reported,
        "pin": f"v{toolchain.pulumi_pin()}",
        "supported": range_text,
        "strict": toolchain.strict_toolchain(),
    }
    if reported is None:
        fix = f"check that {choice.path} runs (`{choice.path} version`)"
        return Check("engine", FAIL, f"pulumi at {choice.path} does not run", fix, details)
    kind = "the pin" if reported == f"v{toolchain.pulumi_pin()}" else f"supported range {range_text}"
    where = {"override": "NPA_PULUMI_BIN", "tools": ".tools/bin", "cache": "the toolchain cache"}.get(
        choice.source, "PATH"
    )
    summary = f"pulumi {reported} from {where} ({choice.path}; {kind})"
    parsed = toolchain.parse_version(reported)
    if choice.source == "override" and (parsed is None or not toolchain.pulumi_version_supported(parsed)):
        fix = f"NPA_PULUMI_BIN is used as given; a supported engine is {range_text}"
        return Check("engine", WARN, summary + ", outside the supported range", fix, details)
    missing = [
        name
        for name in ("pulumi-language-python-exec", "pulumi-resource-pulumi-python")
        if not os.access(choice.path.resolve().parent / name, os.X_OK)
        and not os.access(choice.path.parent / name, os.X_OK)
    ]
    if missing:
        details["missing_helpers"] = missing
        fix = "install pulumi from its official distribution (it ships these beside the binary)"
        return Check("engine", FAIL, f"{summary}; {', '.join(missing)} not beside it", fix, details)
    return Check("engine", OK, summary, details=details)


def _recipe_roots(recipe_dir: str | None) -> tuple[list[Path], str]:
    """The module dirs of the k8s-training recipe a run would use (the given checkout's, else the default
    recipe's as this machine has it: the mirror or a cached checkout) and where they came from. Empty when
    the default recipe is not here yet (the first run fetches it). Raises RecipeError for a recipe that
    cannot be read."""
    from npa_pulumi.bridge.recipe import default_recipe_library, module_roots
    from npa_pulumi.runtime.home import cache_dir

    if recipe_dir:
        library, origin = Path(recipe_dir).expanduser(), "--recipe-dir"
    else:
        found = default_recipe_library(cache_dir())
        if found is None:
            return [], "default (not fetched yet)"
        library, origin = found, "default"
    return module_roots(library), origin


def _recipe_constraint(recipe_dir: str | None) -> str:
    """Every `required_version` of the recipe's modules, joined (upstream's is in modules/k8s-rbac-bindings),
    or "" when the recipe cannot be read here (check_recipe says why)."""
    from npa_pulumi.bridge.recipe import RecipeError
    from npa_pulumi.bridge.versions import required_versions

    try:
        roots, _ = _recipe_roots(recipe_dir)
    except RecipeError:
        return ""
    return ", ".join(dict.fromkeys(c.expression for c in required_versions(roots)))


def check_recipe(recipe_dir: str | None) -> Check:
    """The k8s-training recipe `up` deploys, on either cloud: `--recipe-dir`, else the default recipe
    (upstream at the pinned commit plus the fleet's override files) from `$NPA_K8S_TRAINING_MIRROR`, a
    cached checkout, or GitHub on first use. Read only: nothing is fetched."""
    from npa_pulumi.bridge.overrides import DEFAULT_K8S_TRAINING_COMMIT
    from npa_pulumi.bridge.recipe import MIRROR_ENV, RecipeError, default_source

    details: dict[str, Any] = {"source": "dir" if recipe_dir else "default"}
    if not recipe_dir:
        details["commit"] = DEFAULT_K8S_TRAINING_COMMIT
    try:
        roots, origin = _recipe_roots(recipe_dir)
    except RecipeError as err:
        fix = (
            "pass a checkout of nebius-solutions-library (or of its k8s-training/)"
            if recipe_dir
            else f"set {MIRROR_ENV} to a copy of nebius-solutions-library at {DEFAULT_K8S_TRAINING_COMMIT}"
        )
        return Check("recipe", FAIL, str(err), fix, details)
    if not roots:
        location = default_source().location
        details["location"] = location
        fix = (
            f"on a machine that cannot reach GitHub, set {MIRROR_ENV} to a copy of nebius-solutions-library "
            f"at commit {DEFAULT_K8S_TRAINING_COMMIT} (docs/default-recipe.md)"
        )
        return Check("recipe", WARN, f"default recipe: fetched from {location} on first use", fix, details)
    details["location"] = str(roots[0])
    what = "--recipe-dir" if recipe_dir else f"default recipe at {DEFAULT_K8S_TRAINING_COMMIT[:12]}"
    return Check("recipe", OK, f"{what}: {roots[0]} ({origin})", details=details)


def check_terraform(recipe_dir: str | None) -> Check:
    from npa_pulumi.bridge.terraform import MIN_TERRAFORM, TerraformError, terraform_version

    constraint = _recipe_constraint(recipe_dir)
    minimum = MIN_TERRAFORM
    for op, text in _constraint_parts(constraint):
        parsed = toolchain.parse_version(text)
        if op == ">=" and parsed and parsed > minimum:
            minimum = parsed
    fix = (
        f"install terraform or OpenTofu >= {_version(minimum)} (or set NPA_TERRAFORM_BIN; "
        "`make tools` builds OpenTofu in a checkout)"
    )
    try:
        binary = toolchain.find_terraform()
        found = terraform_version(binary)
    except (toolchain.ToolchainMissing, TerraformError, OSError) as err:
        return Check("terraform", FAIL, str(err).splitlines()[0], fix, {"constraint": constraint})
    details = {
        "path": str(binary),
        "version": _version(found),
        "minimum": _version(minimum),
        "constraint": constraint or f">= {_version(MIN_TERRAFORM)}",
    }
    summary = f"{binary.name} {_version(found)} ({binary}); recipe needs {details['constraint']}"
    if found < minimum:
        return Check("terraform", FAIL, summary, fix, details)
    return Check("terraform", OK, summary, details=details)


def _constraint_parts(constraint: str) -> list[tuple[str, str]]:
    parts = []
    for piece in constraint.split(","):
        piece = piece.strip()
        for op in (">=", "<=", "~>", "!=", ">", "<", "="):
            if piece.startswith(op):
                parts.append((op, piece[len(op) :].strip()))
                break
    return parts


def check_plugins(install: bool = False) -> Check:
    """The pinned Kubernetes provider plugin; with `install` (doctor --install-plugins, the one thing
    doctor may change) a missing one is installed with the engine's own `pulumi plugin install` first."""
    provider = toolchain.find_kubernetes_provider()
    command = toolchain.kubernetes_plugin_install_command()
    version = toolchain.kubernetes_provider_version()
    details: dict[str, Any] = {
        "plugin": f"resource-kubernetes v{version}",
        "install": command,
    }
    failure = ""
    if provider is None and install:
        failure = install_kubernetes_plugin()
        provider = toolchain.find_kubernetes_provider()
        details["installed"] = provider is not None
    if provider is None:
        why = f"; `{command}` failed: {failure}" if failure else ""
        return Check(
            "plugins",
            FAIL,
            f"the Kubernetes provider plugin v{version} is not installed{why}",
            f"`{command}` (or `npa-pulumi doctor --install-plugins`; needs Pulumi's plugin source; offline: "
            "`make tools` builds it)",
            details,
        )
    details["path"] = str(provider)
    summary = f"pulumi-resource-kubernetes v{version} ({provider})"
    return Check("plugins", OK, summary, details=details)


PLUGIN_INSTALL_TIMEOUT_S = 600


def install_kubernetes_plugin() -> str:
    """Run `pulumi plugin install resource kubernetes v<pin>` with the engine npa-pulumi uses, its output
    on stderr (stdout stays the report). '' when it succeeded, else why not (the last line it printed)."""
    engine = toolchain.find_pulumi()
    argv = [str(engine), *toolchain.kubernetes_plugin_install_command().split()[1:]]
    print(f"doctor: installing the Kubernetes provider plugin: {' '.join(argv)}", file=sys.stderr)
    try:
        proc = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=sys.stderr,
            stderr=subprocess.PIPE,
            text=True,
            timeout=PLUGIN_INSTALL_TIMEOUT_S,
            env={**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{type(err).__name__}: {err}"
    sys.stderr.write(proc.stderr)
    if proc.returncode == 0:
        return ""
    lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit {proc.returncode}"


def check_kubectl() -> Check:
    kubectl = toolchain.find_kube_binary("kubectl")
    if kubectl is None:
        fix = "install kubectl (https://kubernetes.io/docs/tasks/tools/) to look inside clusters"
        return Check("kubectl", WARN, "kubectl not found (only needed to look inside clusters)", fix)
    return Check("kubectl", OK, f"kubectl ({kubectl})", details={"path": str(kubectl)})


def check_local_kubernetes() -> Check:
    if os.environ.get("NPA_LOCAL_CLOUD_KUBERNETES_API", "").strip() == "0":
        return Check(
            "local-kubernetes",
            SKIP,
            "the local cloud's API servers are off (NPA_LOCAL_CLOUD_KUBERNETES_API=0)",
        )
    missing = [name for name in toolchain.KUBE_BINARIES if toolchain.find_kube_binary(name) is None]
    if missing:
        fix = (
            "`make tools` in a checkout builds them, or turn the API servers off: "
            "`npa-pulumi local-cloud set kubernetes-api 0`"
        )
        return Check(
            "local-kubernetes",
            WARN,
            f"the local cloud's API servers need {', '.join(missing)}",
            fix,
            {"missing": missing},
        )
    return Check("local-kubernetes", OK, "kube-apiserver, etcd, kwok for the local cloud's API servers")


def check_nebius(
    cloud: str,
    profile: str | None,
    auth: str | None = None,
    projects: Sequence[FleetProject] | None = None,
    tenant_id: str | None = None,
) -> list[Check]:
    """The Nebius CLI, then the identity (machine/nebius_auth.py: the auth path, the principal, a token's
    lifetime and renewal) and whether it can read the fleet's `projects` (the spec's, else the tenant's)."""
    if cloud != "nebius":
        skip = "not needed for --cloud local"
        return [Check("nebius-cli", SKIP, skip), Check("nebius-profile", SKIP, skip)]
    from npa_pulumi.cloud.nebius.settings import ENV_AUTH, AuthMode

    federated = (auth or os.environ.get(ENV_AUTH, "")).strip().lower() == AuthMode.FEDERATED
    checks = []
    cli = shutil.which("nebius")
    if cli:
        checks.append(Check("nebius-cli", OK, f"nebius CLI ({cli})", details={"path": cli}))
    elif federated:
        summary = "the nebius CLI is not on PATH: kubeconfigs' exec plugin needs it, previews do not"
        checks.append(Check("nebius-cli", WARN, summary, "install it where kubectl is used"))
    else:
        fix = "install the Nebius CLI (https://docs.nebius.com/cli/install) and run `nebius profile create`"
        checks.append(Check("nebius-cli", WARN, "the nebius CLI is not on PATH", fix))
    # The spec's tenant, else the one the engine's providers are given: what a key file needs, and what a
    # profile of another tenant is refused for.
    tenant = tenant_id or os.environ.get(TENANT_ENV) or None
    if federated:
        checks += _nebius_federated(projects, tenant)
    else:
        checks += _nebius_profile(profile, projects, tenant)
    return checks


def _nebius_federated(projects: Sequence[FleetProject] | None, tenant: str | None) -> list[Check]:
    """Keyless CI: the settings, a fresh OIDC token, the exchange, and the authenticated calls (whose
    answers name the principal and its tenant). Tokens are dropped unprinted."""
    from npa_pulumi.cloud.errors import CloudError
    from npa_pulumi.cloud.nebius.profile import resolve_identity
    from npa_pulumi.cloud.nebius.settings import NebiusSettings

    name = "nebius-federated"
    fix = (
        "set NPA_NEBIUS_SERVICE_ACCOUNT_ID and run where an OIDC token is at hand (a GitHub Actions job with "
        "`permissions: id-token: write`, or NPA_NEBIUS_FEDERATED_TOKEN_FILE); see docs/ci-previews.md"
    )
    options: dict[str, Any] = {"auth": "federated", "tenant_id": tenant}
    try:
        identity = resolve_identity(NebiusSettings.from_options(options))
    except (NpaError, CloudError, OSError, ValueError) as err:
        return [Check(name, FAIL, f"federated auth is not usable: {err}", fix), _projects_skipped()]
    return identity_checks(name, identity, options, projects)


def _nebius_profile(
    profile: str | None, projects: Sequence[FleetProject] | None, tenant: str | None
) -> list[Check]:
    """A CLI profile, a service account's key file or a token in the environment: as the adapter picks."""
    from npa_pulumi.cloud.errors import CloudError
    from npa_pulumi.cloud.nebius.profile import resolve_identity
    from npa_pulumi.cloud.nebius.settings import NebiusSettings

    fix = "`nebius profile create` (or `--profile NAME`), with `tenant-id: <tenant>` in ~/.nebius/config.yaml"
    try:
        identity = resolve_identity(NebiusSettings.from_options({"profile": profile, "tenant_id": tenant}))
    except (NpaError, CloudError, OSError, ValueError) as err:
        return [Check("nebius-profile", FAIL, f"no usable Nebius profile: {err}", fix), _projects_skipped()]
    if identity.kind == "profile" and not identity.tenant_id:
        details = {"identity": identity.describe(), "tenant_id": None}
        failed = Check("nebius-profile", FAIL, f"{identity.describe()} has no tenant-id", fix, details)
        return [failed, _projects_skipped()]
    return identity_checks("nebius-profile", identity, {"profile": profile, "tenant_id": tenant}, projects)


def _projects_skipped() -> Check:
    return Check(PROJECTS, SKIP, "not checked: no usable identity")


def _account_home() -> Path | None:
    try:
        return Path(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        return None


def check_backend(backend: str | None) -> list[Check]:
    from npa_pulumi.engine.automation import DEFAULT_BACKEND_URL

    url = backend or os.environ.get("PULUMI_BACKEND_URL") or DEFAULT_BACKEND_URL
    checks = [_backend_reachable(url)]
    checks.append(_home_mismatch(url, explicit=bool(backend or os.environ.get("PULUMI_BACKEND_URL"))))
    return checks


def _file_backend_path(url: str) -> Path:
    location = url[len("file://") :].partition("?")[0]
    if url.startswith("file://~/.npa-pulumi/state") and "NPA_PULUMI_HOME" in os.environ:
        return npa_home() / "state"
    return Path(os.path.abspath(os.path.expanduser(location)))


def _backend_reachable(url: str) -> Check:
    from npa_pulumi.engine.automation import s3_state_bucket, stack_names

    if url.startswith("file://"):
        path = _file_backend_path(url)
        where = path if path.exists() else next((p for p in path.parents if p.exists()), path)
        if not os.access(where, os.W_OK):
            fix = f"make {where} writable, or choose another backend with --backend / PULUMI_BACKEND_URL"
            return Check(
                "backend", FAIL, f"file://{path} is not writable here", fix, {"url": f"file://{path}"}
            )
        locks = sorted(path.glob(".pulumi/locks/organization/*/*/*.json")) if path.is_dir() else []
        stacks = stack_names(f"file://{path}")
        details = {"url": f"file://{path}", "stacks": len(stacks), "locks": [str(p) for p in locks]}
        state = "created by the first run" if not path.exists() else f"{len(stacks)} stack(s)"
        summary = f"file://{path} ({state}; {len(locks)} lock(s) held)"
        if locks:
            stuck = sorted({p.parent.name for p in locks})
            fix = (
                "a run holds these stacks now, or one was killed: the next run removes a lock whose "
                f"process is gone; another host's needs `--break-lock` ({', '.join(stuck)})"
            )
            return Check("backend", WARN, summary, fix, details)
        return Check("backend", OK, summary, details=details)
    if url.startswith("s3://"):
        try:
            bucket = s3_state_bucket(url)
        except (NpaError, OSError, ValueError) as err:
            return Check("backend", FAIL, f"{url.split('?')[0]}: {err}", "check the URL and the access key")
        if bucket is None:
            fix = "export AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) for the state bucket"
            return Check("backend", WARN, f"{url.split('?')[0]}: no access key here to read it", fix)
        try:
            listed = stack_names(url)
        except (NpaError, OSError, ValueError) as err:
            fix = "check the endpoint, the key and the bucket policy (npa-pulumi backend init)"
            return Check("backend", FAIL, f"{url.split('?')[0]} is not reachable: {err}", fix)
        summary = f"{url.split('?')[0]} reachable ({len(listed)} stack(s))"
        return Check("backend", OK, summary, details={"url": url.split("?")[0]})
    return Check("backend", OK, f"{url} (not inspected: the engine reaches it)", details={"url": url})


def _home_mismatch(url: str, explicit: bool) -> Check:
    """The default backend as npa-pulumi resolves it ($NPA_PULUMI_HOME, else $HOME) against what the plain
    `pulumi` reads from the repository's Pulumi.yaml (`~` from the account's entry in the user database)."""
    account = _account_home()
    home = Path.home()
    details: dict[str, Any] = {"home": str(home), "account_home": str(account) if account else None}
    if explicit or not url.startswith("file://~") or account is None:
        return Check("home", OK, f"$HOME is {home}", details=details)
    ours = _file_backend_path(url)
    engines = account / ".npa-pulumi" / "state"
    if os.path.abspath(ours) == os.path.abspath(engines):
        return Check("home", OK, f"$HOME is {home}, the account's home", details=details)
    export = f"export PULUMI_BACKEND_URL=file://{ours}"
    details["export"] = export
    moved = "$NPA_PULUMI_HOME" if "NPA_PULUMI_HOME" in os.environ else f"$HOME ({home})"
    summary = (
        f"npa-pulumi keeps state in {ours} ({moved}), the plain `pulumi` would read {engines} (the "
        "account's home expands the `~` of Pulumi.yaml)"
    )
    return Check("home", WARN, summary, f"`{export}` before using the plain `pulumi`", details)


def check_passphrase(passphrase_file: str | None) -> Check:
    named = passphrase_file or os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE")
    if passphrase_file or (named and not os.environ.get("PULUMI_CONFIG_PASSPHRASE")):
        path = Path(str(named)).expanduser()
        source = "--passphrase-file" if passphrase_file else "PULUMI_CONFIG_PASSPHRASE_FILE"
        if not path.is_file():
            return Check(
                "passphrase", FAIL, f"{source} names {path}, which does not exist", "point it at the file"
            )
        return Check("passphrase", OK, f"from {source} ({path})", details={"source": source})
    if os.environ.get("PULUMI_CONFIG_PASSPHRASE"):
        return Check("passphrase", OK, "from PULUMI_CONFIG_PASSPHRASE", details={"source": "env"})
    path = npa_home() / "passphrase"
    if path.is_file():
        loose = path.stat().st_mode & 0o077
        fix = f"chmod 600 {path}" if loose else None
        status = WARN if loose else OK
        summary = f"generated file {path}" + (" (readable by others)" if loose else "")
        return Check("passphrase", status, summary, fix, {"source": "generated", "path": str(path)})
    summary = f"none yet: the first run generates {path} (0600); keep it with the backend"
    return Check("passphrase", OK, summary, details={"source": "generated", "path": str(path)})


def check_disk() -> Check:
    home = npa_home()
    where = home if home.exists() else next((p for p in home.parents if p.exists()), Path("/"))
    usage = shutil.disk_usage(where)
    free = usage.free / 2**30
    details = {"path": str(where), "free_gib": round(free, 1)}
    summary = f"{free:.1f} GiB free for {home}"
    fix = f"free space on {where}, or move the work dirs with NPA_PULUMI_HOME"
    if free < MIN_FREE_GIB:
        return Check("disk", FAIL, summary, fix, details)
    if free < LOW_FREE_GIB:
        return Check("disk", WARN, summary, fix, details)
    return Check("disk", OK, summary, details=details)


@contextlib.contextmanager
def state_key_probe(cloud: str, auth: str | None, backend: str | None) -> Iterator[list[Check]]:
    """A federated run against an s3:// backend with no AWS credentials mints a key to the state bucket
    (engine/automation/state_key.py): here one is minted the same way, for minutes, the backend check runs
    with it, and it is deleted; the `state-key` check (appended to the yielded list once the block ends)
    says how that went. Nothing when a run would mint none."""
    from npa_pulumi.cloud.factory import make_cloud
    from npa_pulumi.engine.automation import DEFAULT_BACKEND_URL, StateKeys

    found: list[Check] = []
    url = backend or os.environ.get("PULUMI_BACKEND_URL") or DEFAULT_BACKEND_URL  # as check_backend reads it
    keys = StateKeys()
    if not keys.wanted(url, cloud, auth):
        yield found
        return
    name = "state-key"
    fix = (
        "`npa-pulumi backend init --cloud nebius --ci-repository OWNER/REPO` prints the access permit that "
        "lets the account create keys for itself; or export AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"
    )
    adapter: Any = None
    try:
        adapter = make_cloud("nebius", auth="federated", call_timeout_s=20.0)
        minted = keys.ensure(url, cloud, auth, lambda: adapter, life_s=PROBE_KEY_LIFE_S)
    except Exception as err:  # any failure to mint is this check's failure, never a traceback
        _close(adapter)
        found.append(Check(name, FAIL, f"a run could not mint its key to the state bucket: {err}", fix))
        yield found
        return
    try:
        yield found
    finally:
        failures = keys.release()
        _close(adapter)
        if minted is None:  # not reached: wanted() said a key is needed
            found.append(Check(name, FAIL, "no key was minted", fix))
        elif failures:
            found.append(Check(name, WARN, f"{minted.describe()} was minted; " + "; ".join(failures), fix))
        else:
            summary = f"{minted.describe()} was minted, used by the backend check, and deleted"
            found.append(Check(name, OK, summary, details={"service_account_id": minted.account}))


def _close(adapter: Any) -> None:
    close = getattr(adapter, "close", None)
    if close is not None:
        close()


def _guarded(name: str, check: Callable[[], Check]) -> Check:
    """One check that broke is reported as failed, never as a traceback that hides the others."""
    try:
        return check()
    except Exception as err:
        return Check(name, FAIL, f"the check itself failed: {type(err).__name__}: {err}")


def run_doctor(
    cloud: str = "local",
    *,
    profile: str | None = None,
    backend: str | None = None,
    passphrase_file: str | None = None,
    recipe_dir: str | None = None,
    install_plugins: bool = False,
    auth: str | None = None,
    projects: Sequence[FleetProject] | None = None,
    tenant_id: str | None = None,
) -> DoctorReport:
    checks = [
        _guarded("python", check_python),
        _guarded("package", check_package),
        _guarded("engine", check_engine),
        _guarded("recipe", lambda: check_recipe(recipe_dir)),
        _guarded("terraform", lambda: check_terraform(recipe_dir)),
        _guarded("plugins", lambda: check_plugins(install_plugins)),
        _guarded("kubectl", check_kubectl),
    ]
    if cloud == "local":
        checks.append(_guarded("local-kubernetes", check_local_kubernetes))
    checks += check_nebius(cloud, profile, auth, projects, tenant_id)
    with state_key_probe(cloud, auth, backend) as probe:
        try:
            checks += check_backend(backend)  # with a federated run's key: the key's own proof of use
        except Exception as err:
            checks.append(Check("backend", FAIL, f"the check itself failed: {type(err).__name__}: {err}"))
    if probe:
        checks.append(probe[0])
    checks.append(_guarded("passphrase", lambda: check_passphrase(passphrase_file)))
    checks.append(_guarded("disk", check_disk))
    return DoctorReport(cloud=cloud, checks=checks)
