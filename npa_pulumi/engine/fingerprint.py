"""Fingerprints of what a stack was deployed from, so an unchanged stack can be skipped.

A stack's fingerprint covers its plan (every input the program passes to its components: tfvars, recipe
digest, identity, storage settings, ...) and the toolchain versions. The programs export it as
`npa_fingerprint`. `up` skips a stack only when the fingerprint matches *and* the live cloud still has what
the stack says it created (checked by the caller); `up --refresh` never skips.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, is_dataclass
from typing import Any

from npa_pulumi import __version__

FINGERPRINT_OUTPUT = "npa_fingerprint"


def fingerprint(plan: Any, cloud: str, profile: str) -> str:
    body = asdict(plan) if is_dataclass(plan) and not isinstance(plan, type) else dict(plan)
    payload = json.dumps(
        {"plan": body, "cloud": cloud, "profile": profile, "npa": __version__}, sort_keys=True, default=str
    )
    return hashlib.sha256(payload.encode()).hexdigest()
