"""The private receipt of a verifier's repairs (`verify-mig --reconcile`, `verify-graphics --reconcile`).

One file per run and cluster, `<npa home>/repairs/<context>/<UTC time>-<verifier>.json` (directories 0700,
the file 0600), rewritten whole and atomically after every step the repair takes, so a run that dies
mid-way still says what it did: which pod it deleted (by UID), which node it cordoned and whether it
restored it. It names nodes and pods, so it stays on this machine, beside the kubeconfig registration the
repair went through; the verifier's published summary counts repairs only. Written only when a repair was
attempted (a refusal counts: it says which workloads blocked it).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.home import npa_home


def repairs_dir(context: str) -> Path:
    return npa_home() / "repairs" / context


class RepairReceipt:
    """The receipt of one verifier run's repairs on one cluster; `record` is the repairer's journal."""

    def __init__(self, context: str, verifier: str, stack: str, cluster_id: str) -> None:
        self.context, self.verifier, self.stack, self.cluster_id = context, verifier, stack, cluster_id
        self.started = datetime.now(UTC)
        self.steps: list[dict[str, Any]] = []
        self.path: Path | None = None

    def record(self, step: dict[str, Any]) -> None:
        self.steps.append(dict(step))
        self._write()

    def _write(self) -> None:
        if self.path is None:
            directory = repairs_dir(self.context)
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            for level in (directory.parent, directory):
                level.chmod(0o700)
            stamp = self.started.strftime("%Y%m%dT%H%M%S.%fZ")
            self.path = directory / f"{stamp}-{self.verifier}.json"
        document = {
            "verifier": self.verifier,
            "context": self.context,
            "stack": self.stack,
            "cluster_id": self.cluster_id,
            "started": self.started.isoformat(timespec="seconds"),
            "steps": self.steps,
        }
        write_atomically(self.path, json.dumps(document, indent=2, sort_keys=True) + "\n", mode=0o600)

    def done(self) -> list[str]:
        """The repairs that finished (in order)."""
        return [str(s["repair"]) for s in self.steps if s.get("step") == "done"]
