"""Reading resource properties the way CrossGuard hands them over: secrets, unknowns and loose types.

Secrets. The engine sends an analyzer every property with secrets kept (`KeepSecrets: true` in
pkg/resource/plugin/analyzer_plugin.go), i.e. as the signature object
`{"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": ...}`. The Python SDK's
`Analyze`/`AnalyzeStack` then call `deserialize_properties(...)` *without* `proxy_secrets`, which unwraps
each secret to its plain value: a stock Python pack cannot tell a secret from a plaintext value. The pack
therefore installs `secret_marking` (secrets arrive wrapped in `pulumi_policy.Secret`). Everything here
accepts all three shapes: a `Secret` wrapper, a raw signature object, and a plain value.

Unknowns. During preview, computed inputs arrive as sentinel strings; the SDK's proxy raises
`UnknownValueError` when one is read, and the SDK turns that into an advisory "can't run policy during
preview" note. Values revealed from a secret are re-wrapped in that proxy so unknowns inside secrets
behave the same way.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy import Secret
from pulumi_policy.proxy import unknown_checking_proxy

from npa_pulumi.runtime import presets

SPECIAL_SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"

MASK = "<masked>"


def is_secret(value: Any) -> bool:
    """True when `value` is visibly a secret (wrapper or raw signature object)."""
    if isinstance(value, Secret):
        return True
    if isinstance(value, Mapping):
        try:
            return value.get(SPECIAL_SIG_KEY) == SECRET_SIG
        except Exception:  # an unknown under the signature key is not a secret marker
            return False
    return False


def reveal(value: Any, path: str = "value") -> tuple[Any, bool]:
    """(plain value, was it a secret). Nested secrets inside a secret are unwrapped too."""
    secret = False
    while is_secret(value):
        secret = True
        value = value.value if isinstance(value, Secret) else value["value"]
    if secret:
        # Re-apply the SDK's unknown checks, which do not see through a secret wrapper.
        value = unknown_checking_proxy({path: value})[path]
    return value, secret


def plain(value: Any, path: str = "value") -> Any:
    return reveal(value, path)[0]


def get(props: Mapping[str, Any] | None, key: str, default: Any = None) -> Any:
    """props[key], secret or not, unwrapped (unknowns still raise UnknownValueError)."""
    if props is None or key not in props:
        return default
    return plain(props[key], key)


def as_mapping(value: Any) -> Mapping[str, Any] | None:
    value = plain(value)
    return value if isinstance(value, Mapping) and not is_secret(value) else None


def as_list(value: Any) -> Sequence[Any] | None:
    value = plain(value)
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return value
    return None


def as_str(value: Any) -> str | None:
    value = plain(value)
    return value if isinstance(value, str) else None


def as_bool(value: Any) -> bool | None:
    """Terraform-ish booleans: True/False, or the strings "true"/"false"."""
    value = plain(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def as_int(value: Any) -> int | None:
    """Integers as tfvars carry them: 2, 2.0 (JSON numbers through protobuf Struct) or "128"."""
    value = plain(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    return None


def fingerprint(value: str) -> str:
    """A one-way stand-in for a sensitive id, used only for in-memory equality checks."""
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def show(value: Any, limit: int = 48) -> str:
    """A short, safe rendering of a non-sensitive value (versions, platforms) for messages."""
    if value is None:
        return "unset"
    text = repr(plain(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def gpus_per_node(preset: str | None) -> int | None:
    """`8gpu-128vcpu-1600gb` -> 8 (the product's one preset reading, runtime/presets.py); None when the
    preset names no GPU count."""
    return presets.gpus_per_node(preset or "") or None
