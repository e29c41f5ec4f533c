"""Where terraform finds the providers of a real recipe on the local cloud.

Upstream k8s-training requires providers that only a registry serves (nebius, helm, kubernetes, kubectl,
units, random, time, http). On `--cloud local` the local cloud serves each of them itself at the plugin
protocol seam (tools/localcloud-providers, built by `make tools` into a filesystem mirror), so the module a
tenant runs is the module the local cloud runs. This module writes the Terraform CLI configuration that
installs every provider of those addresses from that mirror and nothing from the network, and the
environment the local providers read (which local cloud, which Python). It is used for `--cloud local`
only: with `--cloud nebius` terraform installs the real providers as usual.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Final

from npa_pulumi.errors import NpaError
from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.toolchain import find_local_provider_mirror

# Every host the module names a provider under: the public registries (terraform's and OpenTofu's
# default host for `nebius/nebius`, `hashicorp/helm`, …) and the Nebius provider mirror some modules use.
MIRRORED_HOSTS: Final = (
    "registry.terraform.io",
    "registry.opentofu.org",
    "terraform-provider.storage.eu-north1.nebius.cloud",
)
CLI_CONFIG_NAME: Final = "local-cloud-providers.tfrc"


class LocalProvidersMissing(NpaError):
    """The local cloud's providers are not built (exit 1: `make tools` builds them)."""

    kind = "toolchain"


def cli_config_text(mirror: Path) -> str:
    """A CLI configuration that installs the mirrored hosts' providers from `mirror` only."""
    include = ", ".join(f'"{host}/*/*"' for host in MIRRORED_HOSTS)
    return (
        "# Written by npa-pulumi (npa_pulumi/bridge/local_providers.py) for --cloud local only.\n"
        "provider_installation {\n"
        "  filesystem_mirror {\n"
        f"    path    = {_hcl_string(str(mirror))}\n"
        f"    include = [{include}]\n"
        "  }\n"
        "  direct {\n"
        f"    exclude = [{include}]\n"
        "  }\n"
        "}\n"
    )


def _hcl_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_cli_config(directory: Path, mirror: Path | None = None) -> Path:
    """The CLI configuration file in `directory` (written when its content changes), for `mirror` or the
    toolchain's. Raises LocalProvidersMissing when no mirror is built."""
    found = mirror or find_local_provider_mirror()
    if found is None or not found.is_dir():
        raise LocalProvidersMissing(
            "the local cloud's Terraform providers are not built: run `make tools` (or set "
            "NPA_LOCAL_PROVIDER_MIRROR to a filesystem mirror holding them)"
        )
    text = cli_config_text(found.resolve())
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    path = directory / f"{digest}-{CLI_CONFIG_NAME}"
    if not path.is_file() or path.read_text() != text:
        directory.mkdir(parents=True, exist_ok=True)
        write_atomically(path, text)
    return path


LOCAL_CLOUD_DIR_ENV: Final = "NPA_LOCAL_CLOUD_DIR"  # what the local providers act on (the simulator's own)


def terraform_env(config_dir: Path, local_cloud_dir: Path, mirror: Path | None = None) -> dict[str, str]:
    """What a terraform process running a real recipe on the local cloud needs in its environment: the CLI
    configuration above, the local cloud the providers act on (the adapter's directory), and the Python
    their worker runs on."""
    return {
        "TF_CLI_CONFIG_FILE": str(write_cli_config(config_dir, mirror)),
        LOCAL_CLOUD_DIR_ENV: str(local_cloud_dir.resolve()),
        "NPA_PYTHON": os.environ.get("NPA_PYTHON") or sys.executable,
    }
