"""Kubeconfig documents: building them for a cluster, writing them privately, merging them.

Two kinds of credential exist: a client certificate (the local cloud's API servers) and an exec
credential plugin (Nebius: the `nebius` CLI mints a short-lived token per call, pinned to a profile, so no
long-lived secret is ever written to disk).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from npa_pulumi.runtime.files import write_atomically


@dataclass(frozen=True)
class ExecCredential:
    """A `client.authentication.k8s.io/v1` exec plugin: `command args...` prints an ExecCredential."""

    command: str
    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)

    def as_user(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": self.command,
            "args": list(self.args),
            "interactiveMode": "Never",
            "provideClusterInfo": False,
        }
        if self.env:
            spec["env"] = [{"name": k, "value": v} for k, v in sorted(self.env.items())]
        return {"exec": spec}


@dataclass(frozen=True)
class ClientCertificate:
    certificate_pem: str
    key_pem: str = field(repr=False)  # a private key: never in a repr or a log line

    def as_user(self) -> dict[str, Any]:
        return {
            "client-certificate-data": _b64(self.certificate_pem),
            "client-key-data": _b64(self.key_pem),
        }


@dataclass(frozen=True)
class ClusterAccess:
    """Everything a kubeconfig for one cluster says: where the API is, whom to trust, how to log in."""

    server: str
    ca_pem: str
    credential: ExecCredential | ClientCertificate

    def kubeconfig(self, context: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": context,
                    "cluster": {"server": self.server, "certificate-authority-data": _b64(self.ca_pem)},
                }
            ],
            "users": [{"name": context, "user": self.credential.as_user()}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
            "current-context": context,
            "preferences": {},
        }


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def dump(config: dict[str, Any]) -> str:
    return yaml.safe_dump(config, sort_keys=False)


def load(text: str) -> dict[str, Any]:
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise ValueError("a kubeconfig must be a YAML mapping")
    return data


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` readable by the owner only (0600), atomically: a kubeconfig may hold a
    client key, and a reader must never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomically(path, text, mode=0o600)


def merge(base: dict[str, Any], addition: dict[str, Any]) -> dict[str, Any]:
    """`base` with every cluster, user and context of `addition` added or replaced by name; the current
    context is left as it was (or taken from `addition` when `base` has none)."""
    merged: dict[str, Any] = dict(base) if base else {"apiVersion": "v1", "kind": "Config", "preferences": {}}
    for section in ("clusters", "users", "contexts"):
        entries: dict[str, Any] = {e["name"]: e for e in (merged.get(section) or [])}
        for entry in addition.get(section) or []:
            entries[entry["name"]] = entry
        merged[section] = list(entries.values())
    if not merged.get("current-context"):
        merged["current-context"] = addition.get("current-context", "")
    return merged
