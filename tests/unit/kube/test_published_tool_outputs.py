"""The parsers of other tools' output, against real outputs people published (tests/fixtures/tool_outputs/,
each manifest naming the source of every file and what must be read from it): `nvidia-smi` (the MIG
hardware probe's `-L` listing and `--query-gpu` CSV), soperator's SlurmCluster status (the soperator gate),
KubeRay's RayCluster status (the Ray gate). nccl-tests' outputs are in test_fabric_check.py. A tool's or a
launcher's own notice (kubectl's "Defaulted container" line) is kept as a notice, never read as a GPU."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from npa_pulumi.kube.gpu_health.config import GateConfig
from npa_pulumi.kube.gpu_health.mig import mig_hardware_report
from npa_pulumi.kube.gpu_health.probes import MIG_HARDWARE_MARKER
from npa_pulumi.kube.kuberay import RaySnapshot, judge_status
from npa_pulumi.kube.nvidia_smi_output import parse_listing, parse_query
from npa_pulumi.kube.slurm_check import SlurmGateConfig, problems

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "tool_outputs"


def _manifest(tool: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = yaml.safe_load((FIXTURES / tool / "manifest.yaml").read_text())
    for entry in entries:
        assert str(entry["source"]).startswith("https://"), entry  # every output says where it was published
        assert (FIXTURES / tool / entry["file"]).is_file(), entry
    return entries


def _ids(entries: list[dict[str, Any]]) -> list[str]:
    return [f"{e['file']}{'#' + e['key'] if 'key' in e else ''}" for e in entries]


# ------------------------------------------------------------------------------------------ nvidia-smi

SMI = _manifest("nvidia-smi")
LISTINGS = [e for e in SMI if "fields" not in e]
QUERIES = [e for e in SMI if "fields" in e]


@pytest.mark.parametrize("entry", LISTINGS, ids=_ids(LISTINGS))
def test_nvidia_smi_listings(entry: dict[str, Any]) -> None:
    listing = parse_listing((FIXTURES / "nvidia-smi" / entry["file"]).read_text())
    expect = entry["expect"]
    assert len(listing.gpus) == expect["gpus"]
    assert {i: [d.profile for d in g.mig] for i, g in listing.gpus.items()} == expect["mig"]
    assert len(listing.notices) == expect.get("notices", 0)
    for gpu in listing.gpus.values():
        assert gpu.uuid.startswith("GPU-") and gpu.name.startswith("NVIDIA ")
        assert [d.index for d in gpu.mig] == list(range(len(gpu.mig)))
        assert all(d.uuid.startswith("MIG-") for d in gpu.mig)


@pytest.mark.parametrize("entry", QUERIES, ids=_ids(QUERIES))
def test_nvidia_smi_queries(entry: dict[str, Any]) -> None:
    result = parse_query((FIXTURES / "nvidia-smi" / entry["file"]).read_text(), entry["fields"])
    assert result.rows == entry["expect"]["rows"]
    assert result.notices == []  # the header is neither a row nor a notice


def _mig_config(profile: str, count: int, gpus: int) -> GateConfig:
    return GateConfig(
        expected_nodes=1,
        expected_gpu_nodes=1,
        gpus_per_node=gpus,
        gpu_platform="gpu-a100",
        driver_mode="operator",
        nvswitch=False,
        stabilization_s=0.0,
        timeout_s=60.0,
        cuda_smoke=False,
        smoke_image="cuda",
        mig_resources={"nvidia.com/gpu": 0, f"nvidia.com/mig-{profile}": count},
        mig_strategy="mixed",
        mig_config="all-balanced",
    )


def _rows(listing_text: str) -> str:
    """`--query-gpu=index,uuid,driver_version,mig.mode.current,mig.mode.pending` rows for the GPUs of a
    published listing, MIG mode on (the published listings were printed without the query)."""
    listing = parse_listing(listing_text)
    return "".join(f"{i}, {g.uuid}, 535.216.01, Enabled, Enabled\n" for i, g in listing.gpus.items())


def test_the_hardware_report_judges_published_listings_against_the_layout() -> None:
    """A published layout read as the probe reads it: seven 1g.10gb on one A100 pass a seven-1g.10gb
    layout; the node where only GPU 0 was partitioned fails on exactly GPUs 1-3."""
    seven = (FIXTURES / "nvidia-smi" / "list-a100-sxm4-80gb-7x1g10gb.txt").read_text()
    report = mig_hardware_report(
        "n1", f"{_rows(seven)}{MIG_HARDWARE_MARKER}\n{seven}", _mig_config("1g.10gb", 7, 1)
    )
    assert report["errors"] == [] and len(report["mig_uuids"]) == 7
    partial = (FIXTURES / "nvidia-smi" / "list-a100-sxm4-80gb-4gpu-one-partitioned.txt").read_text()
    report = mig_hardware_report(
        "n1", f"{_rows(partial)}{MIG_HARDWARE_MARKER}\n{partial}", _mig_config("1g.20gb", 4, 4)
    )
    assert report["errors"] == [
        f"n1: GPU {i} MIG devices [], [1g.20gb, 1g.20gb, 1g.20gb, 1g.20gb] expected" for i in (1, 2, 3)
    ]


def test_a_gpu_without_mig_support_is_a_mig_mode_finding_not_a_missing_gpu() -> None:
    """`[N/A]` (nvidia-smi on a card without MIG, Syllo/nvtop#470) reads as the GPU's MIG mode."""
    listing = (FIXTURES / "nvidia-smi" / "list-a30-no-mig-devices-kubectl-notice.txt").read_text()
    rows = "0, GPU-0898a861-78ae-cdaf-4f1a-68992223505a, 535.216.01, [N/A], [N/A]\n"
    report = mig_hardware_report("n1", f"{rows}{MIG_HARDWARE_MARKER}\n{listing}", _mig_config("1g.6gb", 4, 1))
    assert report["gpus"] == 1
    assert "n1: GPU 0 MIG mode [N/A]/[N/A] (current/pending), Enabled expected" in report["errors"]


# ------------------------------------------------------------------------------------------ Slurm

SLURM = _manifest("slurm")
_GATE = SlurmGateConfig(name="soperator", namespace="soperator", nodesets={}, timeout_s=60.0)
_PRINTED_CONDITIONS = {
    "CONTROLLERS": "ControllersAvailable",
    "SCONFIGCTRL": "SConfigControllerAvailable",
    "ACCOUNTING": "AccountingAvailable",
}


def _table_statuses(text: str) -> list[dict[str, Any]]:
    """The rows of `kubectl get slurmclusters` as the statuses they print (the manifest's mapping)."""
    lines = text.splitlines()
    header = lines[0].split()
    statuses = []
    for line in lines[1:]:
        # STATUS may hold a space ("Not available"): split on runs of two or more spaces
        cells = [c for c in line.split("  ") if c.strip()]
        row = dict(zip(header, (c.strip() for c in cells), strict=False))
        conditions = [
            {"type": kind, "status": row[column]}
            for column, kind in _PRINTED_CONDITIONS.items()
            if column in row
        ]
        login = "True" if int(row["LOGIN"]) >= 1 else "False"
        conditions.append({"type": "LoginAvailable", "status": login})
        statuses.append({"phase": row["STATUS"], "conditions": conditions, "nodesets": {}})
    return statuses


def test_soperator_published_table_is_accepted_only_when_available_with_its_conditions() -> None:
    [entry] = [e for e in SLURM if e["kind"] == "table"]
    statuses = _table_statuses((FIXTURES / "slurm" / entry["file"]).read_text())
    assert len(statuses) == 15 and statuses[6]["phase"] == "Reconciling"
    accepted = [i + 1 for i, status in enumerate(statuses) if not problems(status, _GATE)]
    assert accepted == entry["expect"]["accepted_rows"]
    first = problems(statuses[0], _GATE)
    assert first == ["SlurmCluster phase 'Not available' (not True: SConfigControllerAvailable)"]


@pytest.mark.parametrize("entry", [e for e in SLURM if e["kind"] == "status"], ids=lambda e: e["file"])
def test_soperator_statuses(entry: dict[str, Any]) -> None:
    status = json.loads((FIXTURES / "slurm" / entry["file"]).read_text())
    found = problems({**status, "nodesets": {}}, _GATE)
    assert (not found) == entry["expect"]["accepted"]
    assert found == [entry["expect"]["problem"]]


# ------------------------------------------------------------------------------------------ Ray

RAY = _manifest("ray")


def _load(file: str, key: str | None) -> dict[str, Any]:
    path = FIXTURES / "ray" / file
    document: dict[str, Any] = (
        json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
    )
    return {"status": document[key]} if key else document


def _described_condition(text: str) -> dict[str, str]:
    """A condition as `kubectl describe` prints it (`Key:  value` lines) as the API's object."""
    fields = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(":")
        fields[key.strip().lower().replace(" ", "")] = value.strip()
    return {
        "type": fields["type"],
        "status": fields["status"],
        "reason": fields["reason"],
        "message": fields["message"],
    }


@pytest.mark.parametrize("entry", RAY, ids=_ids(RAY))
def test_kuberay_statuses(entry: dict[str, Any]) -> None:
    cluster = _load(entry["file"], entry.get("key"))
    if "add_condition" in entry:
        condition = _described_condition((FIXTURES / "ray" / entry["add_condition"]).read_text())
        cluster["status"]["conditions"] = [*cluster["status"]["conditions"], condition]
    if "ready_workers_from" in entry:
        source = _load(entry["ready_workers_from"]["file"], entry["ready_workers_from"]["key"])
        cluster["status"]["readyWorkerReplicas"] = source["status"]["readyWorkerReplicas"]
    snap = RaySnapshot()
    judge_status(cluster, entry["worker_replicas"], snap)
    assert snap.missing == entry["expect"]["missing"]
    assert (not snap.missing) == entry["expect"]["ready"]
