"""The lifecycle record beside a stack (npa_pulumi/engine/lifecycle.py) and the DIY tags file it lives in."""

from __future__ import annotations

import json
import socket
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from npa_pulumi.engine.automation import diy_backend
from npa_pulumi.engine.lifecycle import (
    TAG_REASON,
    TAG_RETRY,
    TAG_STATE,
    Recorded,
    RunId,
    destroy_incomplete_tags,
    running_tags,
    validating_state,
)
from npa_pulumi.runtime.processes import start_time


def test_validating_state_follows_the_gate() -> None:
    assert validating_state(mig=True, has_gpus=True) == "validating-mig"
    assert validating_state(mig=False, has_gpus=True) == "validating-gpu-health"
    assert validating_state(mig=False, has_gpus=False) == "validating-cluster-basics"


def test_a_running_state_holds_only_while_its_run_lives() -> None:
    mine = Recorded.from_tags(running_tags("validating-gpu-health"))
    assert mine is not None and mine.state == "validating-gpu-health" and mine.current
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = Recorded.from_tags(
        {
            TAG_STATE: "provisioning",
            "npa:lifecycle-run": f"{socket.gethostname()}/{gone.pid}/2026-01-01T00:00:00",
        }
    )
    assert dead is not None and not dead.current
    elsewhere = Recorded.from_tags(
        {TAG_STATE: "provisioning", "npa:lifecycle-run": "other-host/1/2026-01-01"}
    )
    assert elsewhere is not None and elsewhere.current  # another machine's run is taken as live
    assert Recorded.from_tags({TAG_STATE: "provisioning"}) is not None
    assert not Recorded.from_tags({TAG_STATE: "provisioning"}).current  # type: ignore[union-attr]
    assert Recorded.from_tags({TAG_STATE: "deployed"}) is None  # outputs say that, not tags
    assert Recorded.from_tags({}) is None


def test_a_run_is_told_by_its_start_ticks_not_the_wall_clock() -> None:
    """A VM's wall clock can step away from its boot clock (paused, migrated, NTP): the run's start in
    clock ticks since boot decides, so a wall time far off does not make a live run look gone, and a
    reused pid (other ticks) is gone whatever the time says."""
    run = RunId.parse(running_tags("provisioning")["npa:lifecycle-run"])
    assert run is not None and run.ticks is not None and run.alive
    long_before = "2000-01-01T00:00:00+00:00"  # "started after the record": the wall-clock test says gone
    shifted = f"{run.host}/{run.pid}/{long_before}/{run.ticks}"
    assert Recorded("provisioning", run=shifted).current
    assert not Recorded("provisioning", run=f"{run.host}/{run.pid}/{run.started}/{run.ticks + 1}").current
    # A record written before the ticks is told by its wall time alone, against the process's start as
    # procfs tells it in wall time (the same clock, so this holds however far the VM's clock has stepped
    # since the run wrote its own record): that start is this run, a time long before it another run.
    started = start_time(run.pid)
    assert started is not None
    as_recorded = datetime.fromtimestamp(started, tz=UTC).isoformat(timespec="seconds")
    legacy = RunId.parse(f"{run.host}/{run.pid}/{as_recorded}")
    assert legacy is not None and legacy.ticks is None and legacy.alive
    before = RunId.parse(f"{run.host}/{run.pid}/{long_before}")
    assert before is not None and not before.alive
    assert RunId.parse("host-only") is None and RunId.parse("h/not-a-pid/x") is None


def test_destroy_incomplete_holds_with_its_reason_and_retry() -> None:
    tags = destroy_incomplete_tags("delete_cluster:\n  unavailable " + "x" * 400, "npa-pulumi destroy --yes")
    recorded = Recorded.from_tags(tags)
    assert recorded is not None and recorded.current and recorded.state == "destroy-incomplete"
    assert recorded.reason.startswith("delete_cluster: unavailable") and len(recorded.reason) <= 250
    assert recorded.retry == "npa-pulumi destroy --yes"


def test_diy_tags_are_merged_read_and_removed(tmp_path: Path) -> None:
    root = tmp_path / "state"
    stacks = root / ".pulumi" / "stacks" / "npa-fleet"
    stacks.mkdir(parents=True)
    (root / ".pulumi" / "meta.yaml").write_text("version: 1\n")
    url = f"file://{root}"
    assert diy_backend.read_tags(url, "npa-fleet", "f.p.c") is None  # no such stack
    (stacks / "f.p.c.json").write_text(json.dumps({"version": 3, "checkpoint": {"latest": {}}}))
    assert diy_backend.read_tags(url, "npa-fleet", "f.p.c") == {}
    assert diy_backend.write_tags(
        url, "npa-fleet", "f.p.c", {"npa:fleet": "f", **destroy_incomplete_tags("r", "c")}
    )
    assert diy_backend.write_tags(
        url, "npa-fleet", "f.p.c", running_tags("provisioning"), (TAG_REASON, TAG_RETRY)
    )
    tags = diy_backend.read_tags(url, "npa-fleet", "f.p.c")
    assert tags["npa:fleet"] == "f" and tags[TAG_STATE] == "provisioning"
    assert TAG_REASON not in tags and TAG_RETRY not in tags
    assert diy_backend.write_tags(url, "npa-fleet", "f.p.c", {}, (TAG_STATE,))
    assert TAG_STATE not in diy_backend.read_tags(url, "npa-fleet", "f.p.c")
    # the file is the engine's own format
    assert json.loads((stacks / "f.p.c.pulumi-tags").read_text())["version"] == 1


def test_the_fabric_check_records_validating_fabric_while_it_runs() -> None:
    """The engine's event collector calls its hooks when the gate's and the fabric check's steps start
    (and not when they are unchanged); `validating-fabric` is a running state like the others."""
    from types import SimpleNamespace
    from typing import Any

    from npa_pulumi.engine.automation.events import EventCollector
    from npa_pulumi.engine.lifecycle import VALIDATING_FABRIC

    calls: list[str] = []
    progress: Any = SimpleNamespace(resource_event=lambda *_a, **_k: None)
    collector = EventCollector(
        "s", progress, on_gate=lambda: calls.append("gate"), on_fabric=lambda: calls.append("fabric")
    )

    def pre(kind: str, op: str) -> Any:
        meta = SimpleNamespace(type=f"pulumi-python:dynamic/npa:{kind}", op=op, urn=f"urn:{kind}", diffs=[])
        return SimpleNamespace(summary_event=None, resource_pre_event=SimpleNamespace(metadata=meta))

    collector(pre("GpuHealthGate", "update"))
    collector(pre("GpuFabricCheck", "same"))
    collector(pre("GpuFabricCheck", "update"))
    assert calls == ["gate", "fabric"]
    recorded = Recorded.from_tags(running_tags(VALIDATING_FABRIC))
    assert recorded is not None and recorded.state == "validating-fabric" and recorded.current


def test_a_backends_own_gate_records_its_gate_state_while_it_runs() -> None:
    """A backend's gate (ClusterBackend.gate_type) starting is the gate's step only for a stack of that
    backend; its `validating-<what>` state is a running state the engine's vocabulary need not list."""
    from types import SimpleNamespace
    from typing import Any

    from npa_pulumi.engine.automation.events import GATE_TYPE_SUFFIX, EventCollector
    from npa_pulumi.engine.backends.registry import BACKENDS

    def pre(kind: str) -> Any:
        meta = SimpleNamespace(
            type=f"pulumi-python:dynamic/npa:{kind}", op="create", urn=f"urn:{kind}", diffs=[]
        )
        return SimpleNamespace(summary_event=None, resource_pre_event=SimpleNamespace(metadata=meta))

    progress: Any = SimpleNamespace(resource_event=lambda *_a, **_k: None)
    own = {backend.gate_type for backend in BACKENDS.values()} - {""}
    assert own, "a deployable backend has a gate of its own"
    calls: list[str] = []
    for gate_type in own:
        calls.clear()
        plain = EventCollector("s", progress, on_gate=lambda: calls.append("gate"))
        plain(pre(gate_type.removeprefix(":")))
        assert calls == []  # not this stack's backend's gate
        plain.gate_types = (GATE_TYPE_SUFFIX, gate_type)  # what watch_up sets for a stack of that backend
        plain(pre(gate_type.removeprefix(":")))
        assert calls == ["gate"]
    assert Recorded.from_tags(running_tags("validating-anything")) is not None
    assert Recorded.from_tags(running_tags("deployed")) is None  # an outcome, not a running state
