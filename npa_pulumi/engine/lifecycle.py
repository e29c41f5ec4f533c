"""A cluster's lifecycle state while a run changes it, recorded beside its stack in the backend.

A finished `up` records the cluster's state as stack outputs (`lifecycle`: deployed, deployed-validation-
failed, ...). What happens *during* a run cannot be an output (the engine writes outputs when the update
ends, and the health gate runs inside the update), and a failed destroy leaves outputs that still say
`deployed`. Both are kept as stack tags, which live in the backend next to the stack (a DIY backend's
`<stack>.pulumi-tags`, the service's stack tags), so `status` on any machine with the backend reads them:

* `npa:lifecycle` = `provisioning` while a cluster stack's update applies its infrastructure, then
  `validating-gpu-health` / `validating-mig` / `validating-cluster-basics` from the moment the engine starts
  the health gate's step, `validating-fabric` while its fabric check (NCCL bandwidth) runs,
  `validating-kuberay` from the KubeRay gate's; removed when the run ends, so the outputs it wrote take
  precedence.
  `npa:lifecycle-run` (`<host>/<pid>/<start time>/<start ticks>`) names the run: a state whose run is
  provably gone (a killed `up` on this host) is stale and ignored, like a stale stack lock.
* `npa:lifecycle` = `destroy-incomplete` after a failed destroy of the cluster stack, with
  `npa:lifecycle-reason` and `npa:lifecycle-retry` (the destroy's retry as the run's caller spelled it: the
  CLI's exact command, engine/retries.py); it stays until a destroy
  succeeds (the stack and its tags go) or an `up` runs the stack again.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime

from npa_pulumi.runtime.processes import parse_timestamp, process_alive, start_ticks

TAG_STATE = "npa:lifecycle"
TAG_RUN = "npa:lifecycle-run"
TAG_REASON = "npa:lifecycle-reason"
TAG_RETRY = "npa:lifecycle-retry"
# An `up` left the cluster `pending` (plan/deferral.py): why, and when its changes may next start. The next
# update of the stack clears both (StackState.watch_up); `status` shows them meanwhile.
TAG_PENDING = "npa:pending"
TAG_PENDING_UNTIL = "npa:pending-until"
TAGS = (TAG_STATE, TAG_RUN, TAG_REASON, TAG_RETRY)
VALIDATING_FABRIC = "validating-fabric"  # the gate's fabric check (NCCL bandwidth) is running
VALIDATING_KUBERAY = "validating-kuberay"  # the KubeRay gate's step, after the health gate's
RUNNING_STATES = (
    "provisioning",
    "validating-gpu-health",
    "validating-mig",
    "validating-cluster-basics",
    VALIDATING_FABRIC,
    VALIDATING_KUBERAY,
)
# A backend's own gate step records `validating-<what>` (ClusterBackend.gate_state): running too.
VALIDATING_PREFIX = "validating-"
DESTROY_INCOMPLETE = "destroy-incomplete"
_MAX_TAG_VALUE = 250  # the service limits tag values to 256 characters


def this_run() -> str:
    started = datetime.fromtimestamp(_START, tz=UTC).isoformat(timespec="seconds")
    ticks = start_ticks(os.getpid())
    return f"{socket.gethostname()}/{os.getpid()}/{started}" + (f"/{ticks}" if ticks is not None else "")


_START = datetime.now(tz=UTC).timestamp()


@dataclass(frozen=True)
class RunId:
    """A run as `this_run()` names it: host, pid, start time (ISO) and, where procfs had it, the process's
    start in clock ticks since boot (the exact identity; the time alone is compared with a slack)."""

    host: str
    pid: int
    started: str
    ticks: int | None

    @classmethod
    def parse(cls, run: str) -> RunId | None:
        parts = run.split("/")
        if len(parts) < 3 or not parts[0] or not parts[1].isdigit():
            return None
        ticks = parts[3] if len(parts) > 3 else ""
        return cls(parts[0], int(parts[1]), parts[2], int(ticks) if ticks.isdigit() else None)

    @property
    def started_at(self) -> float:
        return parse_timestamp(self.started) or 0.0

    @property
    def alive(self) -> bool:
        return process_alive(
            self.pid, hostname=self.host, since=parse_timestamp(self.started), ticks=self.ticks
        )


def validating_state(mig: bool, has_gpus: bool) -> str:
    """The state a cluster is in while its health gate runs."""
    return "validating-mig" if mig else "validating-gpu-health" if has_gpus else "validating-cluster-basics"


def running_tags(state: str) -> dict[str, str]:
    return {TAG_STATE: state, TAG_RUN: this_run()}


def destroy_incomplete_tags(reason: str, retry: str) -> dict[str, str]:
    return {
        TAG_STATE: DESTROY_INCOMPLETE,
        TAG_REASON: " ".join(reason.split())[:_MAX_TAG_VALUE],
        TAG_RETRY: retry[:_MAX_TAG_VALUE],
    }


@dataclass(frozen=True)
class Recorded:
    state: str
    reason: str = ""
    retry: str = ""
    run: str = ""

    @classmethod
    def from_tags(cls, tags: dict[str, str]) -> Recorded | None:
        state = tags.get(TAG_STATE, "")
        if state not in (*RUNNING_STATES, DESTROY_INCOMPLETE) and not state.startswith(VALIDATING_PREFIX):
            return None
        return cls(state, tags.get(TAG_REASON, ""), tags.get(TAG_RETRY, ""), tags.get(TAG_RUN, ""))

    @property
    def current(self) -> bool:
        """A destroy-incomplete record holds until removed; a running state only while its run lives."""
        if self.state == DESTROY_INCOMPLETE:
            return True
        run = RunId.parse(self.run)
        return run is not None and run.alive


def holding(tags: dict[str, str] | None) -> Recorded | None:
    """The lifecycle record among a stack's tags, when it still holds (None: no tags, no record, or the
    run that recorded it has ended)."""
    recorded = Recorded.from_tags(tags) if tags is not None else None
    return recorded if recorded is not None and recorded.current else None
