"""The original tool's own configuration, `~/.npa/config.yaml`: the last place a run looks for the tenant
and the region when the spec leaves them empty.

Order (docs/spec.md): the spec (`tenant_id`, `region`, a project's `region`); then the selected
`~/.nebius/config.yaml` profile (its tenant, and the region of its `parent-id` project); then
`~/.npa/config.yaml` (`tenant_id` / `tenant-id`, `region`). A file that is missing says nothing; one that
is not a YAML mapping is refused, naming the file, rather than silently ignored.

The original's configuration directory is `$NPA_CONFIG_DIR`, else `~/.npa` (`original_config_dir`): its
`config.yaml`, and the cluster registrations its other commands read (`clusters/<context>/`,
engine/registrations/npa_records.py). Its per-cluster Terraform directories stay under `~/.npa/fleet` whatever
`NPA_CONFIG_DIR` says, as the original kept them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from npa_pulumi.errors import UserInputError


@dataclass(frozen=True)
class UserDefaults:
    tenant_id: str = ""
    region: str = ""


def original_config_dir() -> Path:
    """The original tool's configuration directory: `$NPA_CONFIG_DIR`, else `~/.npa`."""
    configured = os.environ.get("NPA_CONFIG_DIR", "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".npa"


def user_config_path() -> Path:
    return original_config_dir() / "config.yaml"


def _text(document: dict[object, object], *keys: str) -> str:
    for key in keys:
        value = document.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def user_defaults(path: Path | None = None) -> UserDefaults:
    path = path or user_config_path()
    try:
        text = path.read_text()
    except FileNotFoundError:
        return UserDefaults()
    except OSError as err:
        raise UserInputError(f"cannot read {path}: {err}") from err
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise UserInputError(f"{path} is not valid YAML: {err}") from err
    if document is None:
        return UserDefaults()
    if not isinstance(document, dict):
        raise UserInputError(f"{path} must be a YAML mapping (keys tenant_id, region)")
    return UserDefaults(
        tenant_id=_text(document, "tenant_id", "tenant-id", "tenant"),
        region=_text(document, "region"),
    )
