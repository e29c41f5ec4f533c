"""The gate's probe pods, each pinned to one GPU node and judged by its phase and the output it leaves as
its termination message: the CUDA smoke (vectorAdd), the graphics smoke (GLX, EGL, Vulkan) and the MIG
hardware probe (`nvidia-smi`, judged in `mig.py`); each always deleted by UID and waited for."""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable

from npa_pulumi.kube.client import KubeClient, KubeError
from npa_pulumi.kube.gpu_health.config import JSON, SMOKE_LABEL, SMOKE_LABEL_VALUE, GateConfig


def smoke_pod(config: GateConfig, node: str) -> JSON:
    """A vectorAdd pod pinned to `node`; its output becomes its termination message, so the result is
    read from the pod's status (no log streaming through the kubelet needed)."""
    suffix = f"{hashlib.sha256(node.encode()).hexdigest()[:10]}-{secrets.token_hex(3)}"
    script = "/cuda-samples/vectorAdd 2>&1 | tee /dev/termination-log; exit ${PIPESTATUS[0]}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"npa-gpu-health-{suffix}",
            "namespace": config.smoke_namespace,
            "labels": {SMOKE_LABEL: SMOKE_LABEL_VALUE},
        },
        "spec": {
            "restartPolicy": "Never",
            "nodeName": node,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "vectoradd",
                    "image": config.smoke_image,
                    "command": ["/bin/bash", "-c", script],
                    "resources": {"limits": {config.smoke_resource: "1"}},
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
        },
    }


PROBE_MISSING_MARKER = "NPA_PROBE_MISSING"
PROBE_IMAGE_INCOMPLETE = "probe-image-incomplete"
GRAPHICS_TOOLS = ("python3", "vulkaninfo")
# First what the image must ship (a tool it lacks is the image's fault, not the GPU's: the probe says so and
# stops), then the probes: the driver's GLX and EGL libraries loaded, Vulkan enumerating the devices.
GRAPHICS_SCRIPT = f"""set -euo pipefail
{{
missing=""
for tool in {" ".join(GRAPHICS_TOOLS)}; do
  command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ]; then echo "{PROBE_MISSING_MARKER}$missing"; exit 3; fi
python3 -c 'import ctypes,os;ctypes.CDLL("libGLX_nvidia.so.0");print("NPA_GLX_LOADED",flush=True);os._exit(0)'
python3 -c 'import ctypes,os;ctypes.CDLL("libEGL_nvidia.so.0");print("NPA_EGL_LOADED",flush=True);os._exit(0)'
vulkaninfo --summary
}} 2>&1 | tail -c 3500 | tee /dev/termination-log
"""


def graphics_pod(config: GateConfig, node: str) -> JSON:
    """GLX and EGL loaded and Vulkan enumerating an NVIDIA device, pinned to `node` (runtime class
    `nvidia`, all driver capabilities); the output's tail becomes the termination message."""
    pod = smoke_pod(config, node)
    pod["metadata"]["name"] = pod["metadata"]["name"].replace("npa-gpu-health-", "npa-graphics-health-")
    pod["metadata"]["labels"]["npa.nebius.com/smoke"] = "graphics"
    pod["spec"]["runtimeClassName"] = "nvidia"
    container = pod["spec"]["containers"][0]
    container.update(
        name="graphics-readiness",
        image=config.graphics_image,
        command=["/bin/bash", "-c", GRAPHICS_SCRIPT],
        env=[
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"},
        ],
    )
    return pod


def probe_image_missing(output: str, terminated: JSON) -> list[str]:
    """What the probe's image lacks, when that is why the probe failed: the tools its script checks for
    first, or the shell itself (the container could not start its command: exit 126/127, or the runtime's
    StartError / ContainerCannotRun). Empty when the image had what the probe runs."""
    for line in output.splitlines():
        if line.startswith(PROBE_MISSING_MARKER):
            return line[len(PROBE_MISSING_MARKER) :].split() or ["a tool"]
    reason = str(terminated.get("reason") or "")
    if reason in ("StartError", "ContainerCannotRun") or terminated.get("exitCode") in (126, 127):
        return ["/bin/bash (the probe's command could not start)"]
    return []


def graphics_missing(output: str) -> list[str]:
    """What a graphics smoke's output lacks: GLX, EGL, a Vulkan instance, a GPU, an NVIDIA device."""
    missing = [m for m in ("NPA_GLX_LOADED", "NPA_EGL_LOADED", "Vulkan Instance Version") if m not in output]
    lines = [line.strip() for line in output.splitlines()]
    if not any(line.startswith("GPU") and line[3:4].isdigit() for line in lines):
        missing.append("a Vulkan physical device (GPU<n>:)")
    if "NVIDIA" not in output:
        missing.append("an NVIDIA device")
    return missing


MIG_HARDWARE_SMOKE = "mig-hardware"
MIG_HARDWARE_MARKER = "NPA_MIG_DEVICES"
MIG_QUERY_FIELDS = ("index", "uuid", "driver_version", "mig.mode.current", "mig.mode.pending")
_MIG_QUERY = ",".join(MIG_QUERY_FIELDS)
MIG_HARDWARE_SCRIPT = f"""set -uo pipefail
{{
nvidia-smi --query-gpu={_MIG_QUERY} --format=csv,noheader,nounits
echo {MIG_HARDWARE_MARKER}
nvidia-smi -L
}} 2>&1 | tail -c 3800 | tee /dev/termination-log
"""


def mig_hardware_pod(config: GateConfig, node: str) -> JSON:
    """`nvidia-smi` on `node` through the driver (runtime class `nvidia`, every GPU visible, the utility
    capability only), requesting no GPU resource: it reads the hardware, it does not use it."""
    pod = smoke_pod(config, node)
    pod["metadata"]["name"] = pod["metadata"]["name"].replace("npa-gpu-health-", "npa-mig-hardware-")
    pod["metadata"]["labels"]["npa.nebius.com/smoke"] = MIG_HARDWARE_SMOKE
    pod["spec"]["runtimeClassName"] = "nvidia"
    container = pod["spec"]["containers"][0]
    container.update(
        name="mig-hardware",
        command=["/bin/bash", "-c", MIG_HARDWARE_SCRIPT],
        resources={},
        env=[
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
        ],
    )
    return pod


def terminated_state(pod: JSON) -> JSON:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        state = (status.get("state") or {}).get("terminated")
        if state:
            return dict(state)
    return {}


def run_smoke(
    client: KubeClient,
    config: GateConfig,
    node: str,
    deadline: float,
    clock: Callable[[], float],
    kind: str = "cuda",
) -> JSON:
    """Run the CUDA (or `graphics`, or MIG hardware) smoke on one node; always deletes its pod (by UID)
    and waits until it is gone."""
    builders = {"cuda": smoke_pod, "graphics": graphics_pod, MIG_HARDWARE_SMOKE: mig_hardware_pod}
    pod = builders[kind](config, node)
    name, namespace = pod["metadata"]["name"], config.smoke_namespace
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    result: JSON = {"node": node, "pod": name, "phase": "not-created", "passed": False}
    created = None
    try:
        created = client.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
        while clock() < deadline:
            current = client.get(path)
            phase = (current.get("status") or {}).get("phase", "Pending")
            result["phase"] = phase
            if phase in ("Succeeded", "Failed"):
                terminated = terminated_state(current)
                message = str(terminated.get("message") or "")
                result["exit_code"] = terminated.get("exitCode")
                result["output_tail"] = message[-300:]
                if kind == "graphics":
                    lacks = probe_image_missing(message, terminated) if phase == "Failed" else []
                    if lacks:  # the image's fault, not the GPU's: said apart, never a GPU failure
                        result["category"] = PROBE_IMAGE_INCOMPLETE
                        result["image_lacks"] = lacks
                        result["image"] = config.graphics_image
                    result["missing"] = [] if lacks else graphics_missing(message)
                    result["passed"] = phase == "Succeeded" and not result["missing"]
                elif kind == MIG_HARDWARE_SMOKE:
                    result["output"] = message  # judged by mig_hardware_report
                    result["passed"] = phase == "Succeeded"
                else:
                    result["passed"] = phase == "Succeeded" and "Test PASSED" in message
                break
            time.sleep(min(1.0, max(0.0, deadline - clock())))
        else:
            result["phase"] = "timeout"
    except KubeError as err:
        result["error"] = str(err)
    finally:
        if created is not None:
            result["cleaned_up"] = delete_and_wait(client, path, created["metadata"]["uid"], deadline, clock)
    return result


def delete_and_wait(
    client: KubeClient, path: str, uid: str, deadline: float, clock: Callable[[], float]
) -> bool:
    """Delete exactly the pod this run created (a UID precondition), then wait until it is gone."""
    body = {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": uid},
    }
    try:
        client.request("DELETE", path, body)
    except KubeError as err:
        if err.status not in (404, 409):  # gone already, or a different pod now holds the name
            return False
    end = max(deadline, clock() + 30)  # cleanup gets its own short grace even at the deadline
    while clock() < end:
        current = client.get_or_none(path)
        if current is None or current["metadata"].get("uid") != uid:
            return True
        time.sleep(0.5)
    return False
