"""Make secrets visible to this pack's policies.

pulumi-policy's `Analyze`/`AnalyzeStack` deserialize resource properties with
`deserialize_properties(props)` (no `proxy_secrets`), which unwraps every secret to its plain value, so a
policy cannot check "is this token a secret?". The engine does send the secret marks (the analyzer
plugin marshals with `KeepSecrets: true`). `install_secret_marking()` swaps the module-level
`deserialize_properties` that `pulumi_policy.policy` calls for one that keeps each secret wrapped in
`pulumi_policy.Secret`. Remediation calls (`proxy_secrets=True`) go to the original untouched.

This only affects the process it runs in: the pack's own analyzer process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pulumi_policy import Secret

from .values import SECRET_SIG, SPECIAL_SIG_KEY

_state: dict[str, Any] = {"active": False, "original": None}


def _mark(prop: Any, original: Callable[..., Any]) -> Any:
    if isinstance(prop, list):
        return [_mark(e, original) for e in prop]
    if isinstance(prop, dict):
        if SPECIAL_SIG_KEY in prop:
            if prop[SPECIAL_SIG_KEY] == SECRET_SIG:
                if "value" not in prop:
                    raise AssertionError("Invalid secret encountered when unmarshaling resource property")
                return Secret(_mark(prop["value"], original))
            # Assets and archives: let the SDK build them.
            return original({"_": prop})["_"]
        return {k: _mark(v, original) for k, v in prop.items()}
    return prop


def install_secret_marking() -> bool:
    """Patch pulumi_policy in this process; True when secrets are now visible to policies."""
    try:
        import pulumi_policy.policy as policy_module
    except ImportError:  # pragma: no cover - pulumi-policy is a hard dependency
        return False
    current = getattr(policy_module, "deserialize_properties", None)
    if not callable(current):
        return False
    if getattr(current, "_npa_secret_marking", False):
        _state["active"] = True
        return True
    original = current

    def deserialize_properties(props: dict[str, Any], proxy_secrets: bool = False) -> Any:
        if proxy_secrets:
            return original(props, proxy_secrets)
        return {k: _mark(v, original) for k, v in props.items()}

    deserialize_properties._npa_secret_marking = True  # type: ignore[attr-defined]
    # The SDK's own (private) name, patched in this process only: see the module docstring.
    policy_module.deserialize_properties = deserialize_properties  # type: ignore[attr-defined]
    _state["active"] = True
    _state["original"] = original
    return True


def uninstall_secret_marking() -> None:
    """Undo install_secret_marking (tests)."""
    import pulumi_policy.policy as policy_module

    if _state["original"] is not None:
        policy_module.deserialize_properties = _state["original"]  # type: ignore[attr-defined]
    _state["active"] = False
    _state["original"] = None


def secrets_visible() -> bool:
    """True when this process's policies see secrets as `Secret` wrappers (plain means plaintext)."""
    return bool(_state["active"])
