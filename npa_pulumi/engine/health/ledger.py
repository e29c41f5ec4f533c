"""Where the repair ladder keeps its state between reads: the fleet's incidents (each with the rungs taken)
and its circuit breakers, one JSON document per fleet beside the requalification records
(`<npa home>/health/remediation/<fleet>.json`, 0600; engine/health/requalification.py keeps those). It
goes where the watch runs: `health --watch` writes it after every read (with `--remediate`, the rungs it
took); `health` and `--remediate --dry-run` only read it. Names, reason codes, times and masked
capacity-block ids: nothing secret.

Closing a breaker takes a person: `health breaker reset --scope S` by an identity other than the one
that watched when it tripped (`opened_by`), so the watcher can never talk itself back into acting.

One watcher per shard, as the sharded CI runs are: `health --watch --shard K/N` keeps its own ledger
(`<fleet>.shard-K-of-N.json`), so shards never overwrite each other's. A read of the whole fleet (no
`--shard`) merges every ledger of the fleet (`load_all`): all incidents, and a scope's breaker open when it
is open in any of them; a reset without `--shard` closes the scope in every ledger where it is open.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from npa_pulumi.engine.health.remediation import Breaker, Incident
from npa_pulumi.errors import NpaError, UserInputError
from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.home import npa_home

SCHEMA = "npa.remediation/v1"
KEEP_CLOSED_DAYS = 30  # closed incidents older than this leave the ledger (the numbers' horizon)


class ResetRefused(NpaError):
    """A breaker reset by the identity that watched when it tripped (exit 1)."""

    kind = "breaker-reset-refused"


@dataclass
class Ledger:
    incidents: list[Incident] = field(default_factory=list)
    breakers: dict[str, Breaker] = field(default_factory=dict)
    resets: list[dict[str, str]] = field(default_factory=list)  # who closed which breaker when

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "incidents": [i.to_json() for i in self.incidents],
            "breakers": {scope: b.to_json() for scope, b in sorted(self.breakers.items())},
            "resets": self.resets,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Ledger:
        return cls(
            incidents=[Incident.from_json(i) for i in data.get("incidents") or []],
            breakers={s: Breaker.from_json(b) for s, b in (data.get("breakers") or {}).items()},
            resets=[dict(r) for r in data.get("resets") or []],
        )

    def pruned(self, now: datetime) -> Ledger:
        keep = [
            i for i in self.incidents if i.closed_at is None or (now - i.closed_at).days < KEEP_CLOSED_DAYS
        ]
        return replace(self, incidents=keep)


def ledger_path(fleet: str, shard: str | None = None) -> Path:
    """The fleet's ledger, or shard `K/N`'s own."""
    folder = npa_home() / "health" / "remediation"
    if not shard:
        return folder / f"{fleet}.json"
    index, count = shard.split("/", 1)
    return folder / f"{fleet}.shard-{index}-of-{count}.json"


def shards(fleet: str) -> list[str | None]:
    """The ledgers the fleet has: None (the unsharded one) and each shard's `K/N`, in that order."""
    folder = ledger_path(fleet).parent
    found: list[str | None] = [None] if ledger_path(fleet).exists() else []
    for path in sorted(folder.glob(f"{fleet}.shard-*-of-*.json")):
        index, _, count = path.name[len(fleet) + len(".shard-") : -len(".json")].partition("-of-")
        if index.isdigit() and count.isdigit():
            found.append(f"{index}/{count}")
    return found


def load_all(fleet: str) -> Ledger:
    """Every ledger of the fleet as one, for a read of the whole fleet: all their incidents, each scope's
    breaker open when it is open in any of them (a closed one otherwise), all resets."""
    merged = Ledger()
    for shard in shards(fleet):
        ledger = load(fleet, shard)
        merged.incidents += ledger.incidents
        merged.resets += ledger.resets
        for scope, breaker in ledger.breakers.items():
            if scope not in merged.breakers or (breaker.open and not merged.breakers[scope].open):
                merged.breakers[scope] = breaker
    return merged


def load(fleet: str, shard: str | None = None) -> Ledger:
    """The fleet's ledger, or shard `K/N`'s (empty when there is none yet); a ledger that cannot be read
    is bad state."""
    path = ledger_path(fleet, shard)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Ledger()
    except OSError as err:
        raise NpaError(f"the remediation ledger {path} could not be read: {err}") from None
    try:
        return Ledger.from_json(json.loads(text))
    except (ValueError, KeyError, TypeError) as err:
        raise NpaError(
            f"the remediation ledger {path} is damaged ({err}): move it aside to start over"
        ) from None


def save(fleet: str, ledger: Ledger, shard: str | None = None) -> Path:
    path = ledger_path(fleet, shard)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomically(path, json.dumps(ledger.to_json(), indent=2, sort_keys=True) + "\n", mode=0o600)
    return path


def reset_breaker(
    fleet: str, scope: str, caller: str, now: datetime | None = None, shard: str | None = None
) -> tuple[str, Breaker]:
    """Close `scope`'s breaker for `caller` in shard `K/N`'s ledger, or (no shard) in every ledger of the
    fleet where it is open: (who tripped it, the breaker now); refused when the caller is a watcher that
    tripped it, or when the scope has no open breaker."""
    where = [shard] if shard else (shards(fleet) or [None])
    ledgers = {s: load(fleet, s) for s in where}
    found = {s: ledger.breakers[scope] for s, ledger in ledgers.items() if _is_open(ledger, scope)}
    if not found:
        known = sorted({sc for ledger in ledgers.values() for sc, b in ledger.breakers.items() if b.open})
        named = f" shard {shard}" if shard else ""
        listed = ", ".join(known) or "none"
        raise UserInputError(f"no open breaker for scope {scope!r} in fleet {fleet}{named} (open: {listed})")
    for breaker in found.values():
        if not caller or caller == breaker.opened_by:
            raise ResetRefused(
                f"breaker {scope} was tripped by the watcher {breaker.opened_by!r}: it cannot be reset by "
                "that same identity; a person (another identity) resets it after looking at the nodes"
            )
    at = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    for s, breaker in found.items():
        ledger = ledgers[s]
        ledger.breakers[scope] = replace(breaker, opened_at=None, opened_by="")
        ledger.resets.append({"scope": scope, "by": caller, "at": at, "opened_by": breaker.opened_by})
        save(fleet, ledger, s)
    first = next(iter(found))
    return found[first].opened_by, ledgers[first].breakers[scope]


def _is_open(ledger: Ledger, scope: str) -> bool:
    breaker = ledger.breakers.get(scope)
    return breaker is not None and breaker.open
