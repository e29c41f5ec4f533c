"""The `fleet-guardrails` CrossGuard policy pack.

The engine starts this file with `python -m pulumi.policy <engine> .` from this directory. The policy logic
is in `npa_pulumi.policies.fleet_guardrails_lib` (this directory's name has a hyphen, so it cannot be a
package); descriptions, levels and config schemas come from `npa_pulumi.policies.catalog`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pulumi_policy import PolicyPack

HERE = Path(__file__).resolve().parent

try:
    import npa_pulumi.policies  # noqa: F401
except ImportError:
    # A plain source checkout without `pip install -e .`: npa_pulumi is importable from the repository
    # root, and its `policies` link is this directory's parent.
    sys.path.insert(0, str(HERE.parent.parent))
from npa_pulumi.policies import fleet_guardrails_lib as lib  # noqa: E402

# Before the pack starts serving: keep secrets wrapped so policies can tell a secret from plaintext.
lib.install_secret_marking()

try:  # an analyzer whose engine was killed would otherwise wait forever (npa_pulumi/runtime/supervision.py)
    from npa_pulumi.runtime.supervision import watch_run

    watch_run(plugin_host=True)  # this file only ever runs in the engine's policy analyzer
except ImportError:
    pass

_readme = HERE / "README.md"
PolicyPack(
    **lib.build_policy_pack_kwargs(readme=_readme.read_text(encoding="utf-8") if _readme.is_file() else None)
)
