"""The NVIDIA GPU Operator's conventions the fleet relies on, and the read-only check that its driver pods
mount the package repositories the fleet configured.

`driver.repoConfig.configMapName` names a ConfigMap in the operator's own namespace (the driver
DaemonSet's pods can mount only ConfigMaps of their namespace). The operator reads that ConfigMap and
mounts each of its files into the driver container, read-only, under the package manager's sources
directory of the driver image's distribution (`/etc/apt/sources.list.d` on Ubuntu). A running pod keeps
the mounts of the template it started from, and a file mounted by `subPath` never sees later changes, so
the only proof that the driver uses the configured sources is the live pod's own volumes and mounts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final

JSON = dict[str, Any]

OPERATOR_NAMESPACE: Final = "gpu-operator"
# The fleet-owned ConfigMap `driver.repoConfig` names (in OPERATOR_NAMESPACE).
REPOSITORIES_CONFIGMAP: Final = "gpu-driver-package-repositories"
# Where the operator mounts repoConfig files, by the driver image's distribution.
REPO_CONFIG_DIRS: Final = {
    "ubuntu": "/etc/apt/sources.list.d",
    "rhel": "/etc/yum.repos.d",
    "sles": "/etc/zypp/repos.d",
}
# The driver DaemonSet template annotation that carries the RTX values' revision: the fleet's override files
# set it through the chart's `daemonsets.annotations` (its Helm `set` key below, the annotation's dots
# escaped as `helm --set` reads them), so a change of the values or repository files rolls the driver pods.
VALUES_REVISION_ANNOTATION: Final = "npa.nebius.com/rtx-values-revision"
REVISION_VALUE_KEY: Final = "daemonsets.annotations." + VALUES_REVISION_ANNOTATION.replace(".", "\\.")
# The container toolkit setting the RTX values pin: read containerd's config file, never `config dump`.
RUNTIME_CONFIG_SOURCE: Final = "RUNTIME_CONFIG_SOURCE"
_DIRS = frozenset(REPO_CONFIG_DIRS.values())
ALL_FILES: Final = "*"  # a mount of the whole ConfigMap (no items): every file it holds


def content_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def file_digests(files: Mapping[str, str]) -> dict[str, str]:
    """File name -> SHA-256 of its content: what the gate compares, so its settings (in stack state and
    evidence) never hold the sources themselves."""
    return {name: content_sha256(text) for name, text in sorted(files.items())}


def is_driver_pod(pod: JSON) -> bool:
    """A pod of a driver DaemonSet (`nvidia-driver-daemonset`, or an NVIDIADriver's `nvidia-*-driver-*`)."""
    owners = pod["metadata"].get("ownerReferences") or []
    return any(o.get("kind") == "DaemonSet" and "driver" in str(o.get("name", "")) for o in owners)


def mounted_repository_files(pod: JSON, configmap: str) -> dict[str, set[str]]:
    """Container name -> the files of `configmap` it mounts under a repoConfig directory: one per
    `subPath` mount at `<dir>/<file>`, or every file the volume projects for a mount of the directory."""
    volumes = {
        v["name"]: v["configMap"]
        for v in (pod.get("spec") or {}).get("volumes") or []
        if (v.get("configMap") or {}).get("name") == configmap
    }
    mounted: dict[str, set[str]] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        files: set[str] = set()
        for mount in container.get("volumeMounts") or []:
            source = volumes.get(mount.get("name", ""))
            if source is None:
                continue
            projected = {i.get("path") or i.get("key") for i in source.get("items") or []}
            path = str(mount.get("mountPath", "")).rstrip("/")
            directory, _, leaf = path.rpartition("/")
            sub_path = mount.get("subPath") or ""
            if sub_path:  # one file, at <dir>/<file>
                if directory in _DIRS and leaf == sub_path and (not projected or sub_path in projected):
                    files.add(sub_path)
            elif path in _DIRS:  # the directory: what the volume projects, or the whole ConfigMap
                files |= projected if projected else {ALL_FILES}
        mounted[container.get("name", "")] = files
    return mounted


def repository_errors(
    configmap: JSON | None, pods: list[JSON], name: str, expected: Mapping[str, str]
) -> list[str]:
    """What keeps the driver from using exactly the configured repository files: the ConfigMap
    `OPERATOR_NAMESPACE/name` missing or holding other files (`expected`: file -> SHA-256), or a driver pod
    (not terminating) whose containers do not mount every one of them. Pods are named: the gate's
    evidence is private, and what is published keeps only a category."""
    where = f"{OPERATOR_NAMESPACE}/{name}"
    if configmap is None:
        return [f"repository ConfigMap {where} not found"]
    data = configmap.get("data") or {}
    errors = []
    if sorted(data) != sorted(expected):
        errors.append(
            f"repository ConfigMap {where} holds file(s) [{', '.join(sorted(data))}], the spec declares "
            f"[{', '.join(sorted(expected))}]"
        )
    changed = sorted(f for f, digest in expected.items() if f in data and content_sha256(data[f]) != digest)
    if changed:
        errors.append(f"repository ConfigMap {where}: file(s) {', '.join(changed)} differ from the spec")
    driver_pods = [p for p in pods if is_driver_pod(p) and not p["metadata"].get("deletionTimestamp")]
    if not driver_pods:
        errors.append(f"no driver pod in {OPERATOR_NAMESPACE} to mount the repository files")
    for pod in driver_pods:
        mounted = mounted_repository_files(pod, name)
        best = max(mounted.values(), key=len, default=set())
        missing = [] if ALL_FILES in best else sorted(set(expected) - best)
        if missing:
            errors.append(
                f"driver pod {OPERATOR_NAMESPACE}/{pod['metadata']['name']} does not mount repository "
                f"file(s) {', '.join(missing)} from ConfigMap {name}"
            )
    return errors
