"""Policy logic of the `fleet-guardrails` CrossGuard pack (policies/fleet-guardrails).

Installed as `npa_pulumi.policies.fleet_guardrails_lib`; the pack directory's name has a hyphen, so the
logic lives here where it can be imported by the pack, by tests and by tools. Modules use relative
imports so the pack also runs from a plain source checkout (see the pack's `__main__.py`).
"""

from __future__ import annotations

from .pack import build_policies, build_policy_pack_kwargs
from .secret_marking import install_secret_marking, secrets_visible

__all__ = ["build_policies", "build_policy_pack_kwargs", "install_secret_marking", "secrets_visible"]
