"""What a kubelet writes when a probe's container ends: the one status patch the local cluster's agent uses
for every probe it answers from its node model (storage probes, the MIG hardware probe)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

JSON = dict[str, Any]


def running_probes(client: Any, selector: str) -> Iterator[JSON]:
    """The pods of `selector` that run and are not being deleted: those a kubelet would be executing."""
    for pod in client.list("/api/v1/pods", selector):
        if pod["metadata"].get("deletionTimestamp") or (pod.get("status") or {}).get("phase") != "Running":
            continue
        yield pod


def finish(client: Any, pod: JSON, container: JSON, exit_code: int, message: str) -> None:
    """End `pod` as its container exiting `exit_code`, `message` as its termination message."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    terminated = {
        "exitCode": exit_code,
        "reason": "Completed" if exit_code == 0 else "Error",
        "message": message[-4000:],  # the kubelet keeps at most 4096 bytes
        "startedAt": now,
        "finishedAt": now,
    }
    status = {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "containerStatuses": [
            {
                "name": container.get("name", "probe"),
                "image": container.get("image", ""),
                "imageID": container.get("image", ""),
                "ready": False,
                "started": False,
                "restartCount": 0,
                "state": {"terminated": terminated},
            }
        ],
    }
    meta = pod["metadata"]
    path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
    client.request("PATCH", path, {"status": status}, "application/merge-patch+json")
