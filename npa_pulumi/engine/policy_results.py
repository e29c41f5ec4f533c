"""The policy results of a stack's last engine run, kept per fingerprint, so a preview can skip the engine
for a stack that is provably unchanged and still report what its policies say.

A preview skips a stack only when its fingerprint (its plan, the toolchain, the policy packs and their
config: engine/fingerprint.py) matches what the stack was deployed from, its live objects match what it
recorded (no drift), *and* this machine holds the policy results of an engine run over exactly that
fingerprint: those are what the engine's analyzers would report again, since their inputs are the same.
Without them (another machine, a cleared home) the stack's preview runs the engine, which records them for
the next time. Written after every successful `up` and every engine preview that found nothing to change.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from npa_pulumi.output.results import PolicyViolation
from npa_pulumi.runtime.disk_cache import cache_key
from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.home import npa_home


def _path(backend_url: str, stack: str) -> Path:
    return npa_home() / "policy-results" / f"{stack}.{cache_key(backend_url)[:12]}.json"


def load(backend_url: str, stack: str, fingerprint: str) -> list[PolicyViolation] | None:
    """The policy results recorded for `stack` at `fingerprint`; None when there are none."""
    try:
        record = json.loads(_path(backend_url, stack).read_text(encoding="utf-8"))
        if record.get("fingerprint") != fingerprint:
            return None
        return [PolicyViolation.model_validate(v) for v in record["policy"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(backend_url: str, stack: str, fingerprint: str, policy: list[PolicyViolation]) -> None:
    path = _path(backend_url, stack)
    record = {"fingerprint": fingerprint, "policy": [v.model_dump() for v in policy]}
    with contextlib.suppress(OSError):  # a cache: without it the next preview runs the engine
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, json.dumps(record, sort_keys=True))


def forget(backend_url: str, stack: str) -> None:
    with contextlib.suppress(OSError):
        _path(backend_url, stack).unlink()
