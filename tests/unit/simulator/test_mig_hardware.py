"""The MIG hardware probe: what `nvidia-smi` prints (real output, and the local cloud's model of a node)
judged against the pinned layout by npa_pulumi/kube/gpu_health/."""

from __future__ import annotations

from typing import Any

from npa_pulumi.kube.gpu_health.config import GateConfig
from npa_pulumi.kube.gpu_health.mig import mig_hardware_report
from npa_pulumi.kube.gpu_health.probes import MIG_HARDWARE_MARKER, MIG_HARDWARE_SCRIPT, mig_hardware_pod
from npa_pulumi.simulator.kube import gpus, shapes

LAYOUT = {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.24gb": 2, "nvidia.com/mig-2g.48gb": 1}
PINS = {"driver": "580.173.02", "mig_manager": "v0.14.2"}

# What nvidia-smi 580 prints on an RTX PRO 6000 in the all-balanced layout (format of the real tool).
REAL = f"""0, GPU-1b0f1c43-5b8e-2f6e-93a1-7c0d3e4f5a6b, 580.173.02, Enabled, Enabled
{MIG_HARDWARE_MARKER}
GPU 0: NVIDIA RTX PRO 6000 Blackwell Server Edition (UUID: GPU-1b0f1c43-5b8e-2f6e-93a1-7c0d3e4f5a6b)
  MIG 2g.48gb     Device  0: (UUID: MIG-5c1b7a0e-9f3d-5e21-8b6a-2d4c6e8f0a1b)
  MIG 1g.24gb     Device  1: (UUID: MIG-6d2c8b1f-a04e-5f32-9c7b-3e5d7f9a1b2c)
  MIG 1g.24gb     Device  2: (UUID: MIG-7e3d9c20-b15f-5043-ad8c-4f6e8a0b2c3d)
"""


def _config(gpus_per_node: int = 1, **overrides: Any) -> GateConfig:
    settings: dict[str, Any] = {
        "expected_nodes": 2,
        "expected_gpu_nodes": 1,
        "gpus_per_node": gpus_per_node,
        "gpu_platform": "gpu-rtx6000",
        "driver_mode": "operator",
        "nvswitch": False,
        "stabilization_s": 0.0,
        "timeout_s": 60.0,
        "cuda_smoke": True,
        "smoke_image": "cuda",
        "mig_resources": LAYOUT,
        "mig_strategy": "mixed",
        "mig_config": "all-balanced",
        "mig_versions": PINS,
    }
    return GateConfig(**{**settings, **overrides})


def _cluster(faults: dict[str, Any] | None = None, versions: dict[str, str] | None = None) -> dict[str, Any]:
    mig = {"strategy": "mixed", "config": "all-balanced", "versions": versions or PINS}
    return {"id": "mk8scluster-e00abc", "addons": {"mig": mig}, "node_faults": faults or {}}


GROUP = {
    "id": "mk8snodegroup-e00aaaaaaaaaaaaaaa",
    "name": "mig",
    "state": "RUNNING",
    "target_node_count": 1,
    "platform": "gpu-rtx6000",
    "preset": "8gpu-192vcpu-1744gb",
}
NODE = shapes.node_names(GROUP)[0]


def test_real_nvidia_smi_output_in_the_pinned_layout_passes() -> None:
    report = mig_hardware_report("n1", REAL, _config())
    assert report["errors"] == []
    assert report["gpus"] == 1 and report["driver_versions"] == ["580.173.02"]
    assert report["mig_profiles"] == {"0": ["1g.24gb", "1g.24gb", "2g.48gb"]}
    assert len(report["mig_uuids"]) == 3


def test_the_probe_reads_the_driver_and_uses_no_gpu() -> None:
    pod = mig_hardware_pod(_config(), "n1")
    container = pod["spec"]["containers"][0]
    assert pod["spec"]["nodeName"] == "n1" and pod["spec"]["runtimeClassName"] == "nvidia"
    assert pod["metadata"]["labels"]["npa.nebius.com/smoke"] == "mig-hardware"
    assert container["resources"] == {}
    assert "nvidia-smi -L" in MIG_HARDWARE_SCRIPT and "/dev/termination-log" in MIG_HARDWARE_SCRIPT
    assert pod["metadata"]["name"] != mig_hardware_pod(_config(), "n1")["metadata"]["name"]  # never reused


def test_the_local_model_of_a_healthy_node_passes() -> None:
    output = gpus.nvidia_smi(_cluster(), GROUP, NODE)
    report = mig_hardware_report(NODE, output, _config(gpus_per_node=8))
    assert report["errors"] == [], output
    assert report["gpus"] == 8 and len(set(report["mig_uuids"])) == 24
    assert output == gpus.nvidia_smi(_cluster(), GROUP, NODE)  # a node's UUIDs are stable


def test_a_gpu_whose_mig_mode_was_reset_fails_on_that_gpu_only() -> None:
    output = gpus.nvidia_smi(_cluster({NODE: {"mig_disabled": True}}), GROUP, NODE)
    errors = mig_hardware_report(NODE, output, _config(gpus_per_node=8))["errors"]
    assert errors == [
        f"{NODE}: GPU 0 MIG mode Disabled/Enabled (current/pending), Enabled expected",
        f"{NODE}: GPU 0 MIG devices [], [1g.24gb, 1g.24gb, 2g.48gb] expected",
    ]


def test_a_missing_gpu_and_an_unpinned_driver_are_named() -> None:
    missing = gpus.nvidia_smi(_cluster({NODE: {"gpu_missing": True}}), GROUP, NODE)
    errors = mig_hardware_report(NODE, missing, _config(gpus_per_node=8))["errors"]
    assert errors == [f"{NODE}: nvidia-smi lists 7 GPU(s) (7 in -L), 8 expected"]
    other = gpus.nvidia_smi(_cluster(versions={"driver": "575.57.08"}), GROUP, NODE)
    errors = mig_hardware_report(NODE, other, _config(gpus_per_node=8))["errors"]
    assert len(errors) == 8 and all("driver 575.57.08, 580.173.02 pinned" in e for e in errors)


def test_settings_that_crossed_the_engine_as_floats_read_the_same() -> None:
    floats = _config(gpus_per_node=8, mig_resources={k: float(v) for k, v in LAYOUT.items()})
    output = gpus.nvidia_smi(_cluster(), GROUP, NODE)
    assert mig_hardware_report(NODE, output, floats)["errors"] == []


def test_output_without_a_listing_never_passes() -> None:
    failed = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
    errors = mig_hardware_report("n1", failed, _config())["errors"]
    assert "n1: nvidia-smi gave no device listing" in errors and len(errors) == 2
    assert mig_hardware_report("n1", "", _config())["errors"]


def test_a_cluster_without_mig_reports_mig_disabled() -> None:
    cluster = {"id": "c", "addons": {}, "node_faults": {}}
    output = gpus.nvidia_smi(cluster, GROUP, NODE)
    report = mig_hardware_report(NODE, output, _config(gpus_per_node=8))
    assert report["mig_uuids"] == [] and any("MIG mode Disabled/Disabled" in e for e in report["errors"])
