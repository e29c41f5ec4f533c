"""`npa-pulumi doctor` (issue 32, item 3): one JSON document on stdout, every check that is not ok says how
to fix it, exit 1 when something `up` needs is missing, and a $HOME that is not the account's home is
warned about with the export to use. The machine it looks at is made of fakes here (the engine, terraform
and the plugin, through the documented overrides); tests/integration/test_wheel.py runs it for real."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from upstream_library import upstream_library

from npa_pulumi.runtime import toolchain

REPO = Path(__file__).resolve().parents[3]
PIN = toolchain.pulumi_pin()
PLUGIN = toolchain.kubernetes_provider_version()


def _executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def machine(tmp_path: Path) -> dict[str, str]:
    engine = tmp_path / "engine"
    _executable(engine / "pulumi", f"#!/bin/sh\necho v{PIN}\n")
    for helper in ("pulumi-language-python-exec", "pulumi-resource-pulumi-python"):
        _executable(engine / helper, "#!/bin/sh\n")
    terraform = _executable(
        tmp_path / "tf" / "terraform", '#!/bin/sh\necho \'{"terraform_version": "1.12.6"}\'\n'
    )
    provider = _executable(tmp_path / "plugins" / "pulumi-resource-kubernetes", "#!/bin/sh\n")
    home = tmp_path / "home"
    home.mkdir()
    return {
        "HOME": str(home),
        "NPA_PULUMI_HOME": str(home / ".npa-pulumi"),
        "PULUMI_HOME": str(home / ".pulumi"),
        "NPA_PULUMI_BIN": str(engine / "pulumi"),
        "NPA_TERRAFORM_BIN": str(terraform),
        "NPA_KUBERNETES_PROVIDER_BIN": str(provider),
        "NPA_K8S_TRAINING_MIRROR": str(upstream_library()),
    }


def doctor(env: dict[str, str], *args: str, drop: tuple[str, ...] = ()) -> tuple[int, Any, str]:
    full = {**os.environ, **env}
    for name in (*drop, "PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE"):
        full.pop(name, None)
    proc = subprocess.run(
        [sys.executable, "-m", "npa_pulumi.cli.main", "doctor", "--output", "json", *args],
        capture_output=True,
        text=True,
        env=full,
        cwd=REPO,
        timeout=120,
    )
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def _checks(document: Any) -> dict[str, Any]:
    return {c["name"]: c for c in document["checks"]}


def test_a_ready_machine_passes_with_one_document(machine: dict[str, str]) -> None:
    code, document, _ = doctor(machine)
    checks = _checks(document)
    assert code == 0, document
    assert document["ok"] is True and document["cloud"] == "local"
    ready = ("python", "package", "engine", "recipe", "terraform", "plugins", "backend", "passphrase", "disk")
    for name in ready:
        assert checks[name]["status"] == "ok", checks[name]
    assert checks["engine"]["details"]["version"] == f"v{PIN}"
    assert checks["engine"]["details"]["source"] == "override"
    # --cloud local deploys the default recipe: doctor reads it where a run would (here the mirror).
    recipe = checks["recipe"]["details"]
    assert recipe["source"] == "default" and recipe["location"] == str(upstream_library() / "k8s-training")
    # upstream's own, in modules/k8s-rbac-bindings
    assert checks["terraform"]["details"]["constraint"] == ">= 1.11.0"
    assert checks["package"]["details"]["data"]["soperator-stand-in"]
    assert checks["nebius-profile"]["status"] == "skip"
    for check in document["checks"]:
        if check["status"] in ("warn", "fail"):
            assert check["fix"], check


def test_a_missing_plugin_fails_with_the_install_command(machine: dict[str, str], tmp_path: Path) -> None:
    # Nowhere doctor looks has the plugin: no override, an empty tools dir (past the checkout's
    # .tools/bin), an empty toolchain cache, a PATH without it and a PULUMI_HOME without plugins.
    env = {
        **machine,
        "NPA_TOOLS_BIN": str(tmp_path / "no-tools"),
        "XDG_CACHE_HOME": str(tmp_path / "no-cache"),
        "PATH": "/usr/bin:/bin",
    }
    env.pop("NPA_KUBERNETES_PROVIDER_BIN")
    code, document, _ = doctor(env, drop=("NPA_KUBERNETES_PROVIDER_BIN",))
    plugins = _checks(document)["plugins"]
    assert code == 1 and document["ok"] is False
    assert plugins["status"] == "fail"
    assert f"pulumi plugin install resource kubernetes v{PLUGIN}" in plugins["fix"]


def _installing_engine(tmp_path: Path, *, works: bool) -> Path:
    """A stand-in engine whose `plugin install` puts the plugin where Pulumi does (or fails offline),
    recording the command it was given."""
    install = (
        'mkdir -p "$PULUMI_HOME/plugins/resource-kubernetes-$5" && '
        'printf "#!/bin/sh\\n" > "$PULUMI_HOME/plugins/resource-kubernetes-$5/pulumi-resource-kubernetes" && '
        'chmod +x "$PULUMI_HOME/plugins/resource-kubernetes-$5/pulumi-resource-kubernetes"'
        if works
        else 'echo "error: could not reach the plugin source" >&2; exit 1'
    )
    script = (
        f'#!/bin/sh\necho "$@" >> "{tmp_path / "engine-calls"}"\n'
        f'if [ "$1" = plugin ]; then {install}; exit 0; fi\necho v{PIN}\n'
    )
    for helper in ("pulumi-language-python-exec", "pulumi-resource-pulumi-python"):
        _executable(tmp_path / "installing" / helper, "#!/bin/sh\n")
    return _executable(tmp_path / "installing" / "pulumi", script)


def _nothing_installed(machine: dict[str, str], tmp_path: Path, engine: Path) -> dict[str, str]:
    env = {
        **machine,
        "NPA_PULUMI_BIN": str(engine),
        "NPA_TOOLS_BIN": str(tmp_path / "no-tools"),
        "XDG_CACHE_HOME": str(tmp_path / "no-cache"),
        "PATH": "/usr/bin:/bin",
    }
    env.pop("NPA_KUBERNETES_PROVIDER_BIN")
    return env


def _install_plugins(machine: dict[str, str], tmp_path: Path, *, works: bool) -> tuple[int, Any, str, Any]:
    """doctor --install-plugins on a machine without the plugin: (exit, document, stderr, plugins check)."""
    env = _nothing_installed(machine, tmp_path, _installing_engine(tmp_path, works=works))
    code, document, stderr = doctor(env, "--install-plugins", drop=("NPA_KUBERNETES_PROVIDER_BIN",))
    return code, document, stderr, _checks(document)["plugins"]


def test_install_plugins_installs_the_missing_plugin_with_the_engine(
    machine: dict[str, str], tmp_path: Path
) -> None:
    code, _, stderr, plugins = _install_plugins(machine, tmp_path, works=True)
    assert plugins["status"] == "ok" and plugins["details"]["installed"] is True, plugins
    assert plugins["details"]["path"].startswith(machine["PULUMI_HOME"])
    assert f"plugin install resource kubernetes v{PLUGIN}" in (tmp_path / "engine-calls").read_text()
    assert "installing the Kubernetes provider plugin" in stderr and code == 0
    # without the opt-in doctor changes nothing: a second machine without the plugin just fails
    other = tmp_path / "other-home"
    env = _nothing_installed(machine, tmp_path, tmp_path / "installing" / "pulumi")
    code, document, _ = doctor({**env, "PULUMI_HOME": str(other)}, drop=("NPA_KUBERNETES_PROVIDER_BIN",))
    assert code == 1 and _checks(document)["plugins"]["status"] == "fail" and not other.exists()


def test_install_plugins_offline_fails_with_the_engine_s_reason(
    machine: dict[str, str], tmp_path: Path
) -> None:
    code, _, _, plugins = _install_plugins(machine, tmp_path, works=False)
    assert code == 1 and plugins["status"] == "fail" and plugins["details"]["installed"] is False
    assert "could not reach the plugin source" in plugins["summary"]
    assert f"pulumi plugin install resource kubernetes v{PLUGIN}" in plugins["fix"]


def test_an_old_terraform_fails_against_the_recipe(machine: dict[str, str], tmp_path: Path) -> None:
    old = _executable(tmp_path / "old" / "terraform", '#!/bin/sh\necho \'{"terraform_version": "1.3.2"}\'\n')
    code, document, _ = doctor({**machine, "NPA_TERRAFORM_BIN": str(old)})
    terraform = _checks(document)["terraform"]
    assert code == 1
    assert terraform["status"] == "fail" and "1.3.2" in terraform["summary"]
    assert ">= 1.12.0" in terraform["fix"]  # the product's floor (upstream needs 1.12), above the recipe's


def test_the_default_recipe_not_here_yet_is_a_warning_naming_the_mirror(machine: dict[str, str]) -> None:
    # No mirror and no cached checkout: the first `up` fetches the pinned commit; doctor fetches nothing.
    code, document, _ = doctor(machine, drop=("NPA_K8S_TRAINING_MIRROR",))
    recipe = _checks(document)["recipe"]
    assert code == 0 and recipe["status"] == "warn", recipe
    assert "NPA_K8S_TRAINING_MIRROR" in recipe["fix"] and recipe["details"]["commit"] in recipe["fix"]
    assert recipe["details"]["location"].startswith("https://github.com/nebius/nebius-solutions-library@")
    assert not (Path(machine["NPA_PULUMI_HOME"]) / "cache" / "recipes").exists()


def test_a_mirror_without_the_module_fails(machine: dict[str, str], tmp_path: Path) -> None:
    code, document, _ = doctor({**machine, "NPA_K8S_TRAINING_MIRROR": str(tmp_path)})
    recipe = _checks(document)["recipe"]
    assert code == 1 and recipe["status"] == "fail", recipe
    assert "holds no k8s-training/" in recipe["summary"] and "NPA_K8S_TRAINING_MIRROR" in recipe["fix"]


def test_a_foreign_home_is_warned_with_the_export(machine: dict[str, str]) -> None:
    account = pwd.getpwuid(os.getuid()).pw_dir
    assert account != machine["HOME"]
    code, document, _ = doctor(machine, drop=("NPA_PULUMI_HOME",))
    home = _checks(document)["home"]
    assert code == 0  # a warning: npa-pulumi itself works there
    assert home["status"] == "warn"
    assert (
        home["details"]["export"] == f"export PULUMI_BACKEND_URL=file://{machine['HOME']}/.npa-pulumi/state"
    )
    assert home["details"]["export"] in home["fix"]
    assert _checks(document)["backend"]["details"]["url"] == f"file://{machine['HOME']}/.npa-pulumi/state"


def test_doctor_changes_nothing(machine: dict[str, str]) -> None:
    doctor(machine)
    npa_home = Path(machine["NPA_PULUMI_HOME"])
    assert not (npa_home / "passphrase").exists()
    assert not (npa_home / "state").exists()


def test_nebius_without_a_profile_fails_and_says_how(machine: dict[str, str]) -> None:
    code, document, stderr = doctor(machine, "--cloud", "nebius")
    profile = _checks(document)["nebius-profile"]
    assert code == 1, stderr
    assert profile["status"] == "fail" and "nebius profile create" in profile["fix"]
    assert "Traceback" not in stderr


def test_nebius_federated_without_an_account_fails_and_says_how(machine: dict[str, str]) -> None:
    drop = ("NPA_NEBIUS_SERVICE_ACCOUNT_ID", "ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN")
    code, document, stderr = doctor(machine, "--cloud", "nebius", "--auth", "federated", drop=drop)
    checks = _checks(document)
    assert "nebius-profile" not in checks  # federated auth reads no CLI profile
    federated = checks["nebius-federated"]
    assert code == 1, stderr
    assert federated["status"] == "fail" and "NPA_NEBIUS_SERVICE_ACCOUNT_ID" in federated["summary"]
    assert "id-token: write" in federated["fix"] and "Traceback" not in stderr

    with_account = {**machine, "NPA_NEBIUS_SERVICE_ACCOUNT_ID": "serviceaccount-e00ci"}
    _, document, _ = doctor(with_account, "--cloud", "nebius", "--auth", "federated", drop=drop[1:])
    assert "no OIDC token to exchange" in _checks(document)["nebius-federated"]["summary"]


def test_text_output_names_each_fix(machine: dict[str, str], tmp_path: Path) -> None:
    old = _executable(tmp_path / "old" / "terraform", '#!/bin/sh\necho \'{"terraform_version": "1.3.2"}\'\n')
    proc = subprocess.run(
        [sys.executable, "-m", "npa_pulumi.cli.main", "doctor"],
        capture_output=True,
        text=True,
        env={**os.environ, **machine, "NPA_TERRAFORM_BIN": str(old)},
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "FAIL terraform" in proc.stdout and "fix:" in proc.stdout and "not ready" in proc.stdout
