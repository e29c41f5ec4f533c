"""The shared filesystem inside a local cluster: what the filesystem CSI driver and the kubelets would do.

No CSI driver or kubelet runs in a local cluster, so the cluster's agent plays both for storage:

* **Provisioner** (the CSI controller): a claim of a StorageClass whose provisioner the recipe installed
  gets a PersistentVolume (claimRef to the claim's UID, the driver, a volume handle) backed by a real
  directory inside the shared filesystem's directory, as mounted-fs-path puts each volume in a
  subdirectory of the virtiofs mount; the Kubernetes PV controller then binds the pair. A Released volume
  with reclaim `Delete` is deleted with its directory.
* **Kubelet for storage probes** (pods labelled `npa.nebius.com/storage-verification`, see
  npa_pulumi/kube/storage_check.py): a Running probe is answered from the node's model — the virtiofs
  mount in its mount table (absent under the `storage_unavailable` fault; the fstab entry with `nofail`
  stays), the filesystem's size as statvfs reports it, and real reads and writes in the filesystem's
  directory — and finished with the probe's JSON as its termination message, as the probe itself would.

The filesystem's directory (`<local-cloud>/filesystems/<id>/`) is shared by every node and cluster that
attaches the filesystem, so one node's write is another's read, as on the real service.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from npa_pulumi.simulator.kube import kubelet, shapes

JSON = dict[str, Any]
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
PROBE_LABEL = "npa.nebius.com/storage-verification"
SHARED_FS_DRIVER = "mounted-fs-path.csi.nebius.ai"
DATA_DIR = "csi-mounted-fs-path-data"  # where the driver keeps each volume inside the filesystem
FRAGMENT_BYTES = 4096


def filesystem_dir(cloud_dir: Path, filesystem_id: str) -> Path:
    return cloud_dir / "filesystems" / filesystem_id


class StorageModel:
    def __init__(self, cloud_dir: Path, sim: Any) -> None:
        self.cloud_dir = cloud_dir
        self.sim = sim

    # ------------------------------------------------------------------ the node model

    def node_mounts(self, cluster: JSON, groups: list[JSON]) -> dict[str, JSON]:
        """node -> {mount, filesystem_id, size_bytes, mounted, writable} for nodes of groups that attach a
        filesystem; `mounted` is False on a node with the storage_unavailable fault."""
        faults = cluster.get("node_faults") or {}
        found: dict[str, JSON] = {}
        for group in groups:
            attachments = group.get("filesystems") or []
            mount = group.get("mount")
            if not attachments or not mount:
                continue
            # virtiofs mounts the device whose tag the mount names: an attachment under another tag leaves
            # the mount point empty (the boot goes on, with `nofail`).
            tagged = [a for a in attachments if not mount.get("tag") or a.get("mount_tag") == mount["tag"]]
            attachment = (tagged or attachments)[0]
            record = self.sim.filesystem_snapshot(attachment.get("filesystem_id", "")) or {}
            for node in shapes.current_node_names(cluster, group):
                found[node] = {
                    "mount": dict(mount),
                    "filesystem_id": attachment.get("filesystem_id", ""),
                    "size_bytes": int(record.get("size_bytes") or 0),
                    "mounted": bool(record)
                    and bool(tagged)
                    and not (faults.get(node) or {}).get("storage_unavailable"),
                    "writable": attachment.get("attach_mode", "READ_WRITE") == "READ_WRITE",
                }
        return found

    # ------------------------------------------------------------------ provisioner

    def sync(self, client: Any, cluster: JSON, groups: list[JSON]) -> None:
        # Only a cluster with the filesystem's driver installed provisions and reclaims (two list calls a
        # tick: the agent runs beside many clusters on one machine); probes are answered everywhere.
        mounts = self.node_mounts(cluster, groups)
        filesystems = sorted({m["filesystem_id"] for m in mounts.values() if m["filesystem_id"]})
        if (cluster.get("addons") or {}).get("filestore"):
            if filesystems:
                self.provision(client, filesystems[0])
            self.reclaim(client)
        self.answer_probes(client, mounts)

    def provision(self, client: Any, filesystem_id: str) -> None:
        classes = {
            c["metadata"]["name"]: c
            for c in client.list("/apis/storage.k8s.io/v1/storageclasses")
            if c.get("provisioner") == SHARED_FS_DRIVER
        }
        for claim in client.list("/api/v1/persistentvolumeclaims"):
            spec, meta = claim.get("spec") or {}, claim["metadata"]
            storage_class = classes.get(spec.get("storageClassName") or "")
            if storage_class is None or spec.get("volumeName") or meta.get("deletionTimestamp"):
                continue
            if (claim.get("status") or {}).get("phase") != "Pending":
                continue
            handle = f"{filesystem_id}/pvc-{meta['uid']}"
            volume = {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": f"pvc-{meta['uid']}", "annotations": {PROVISIONED_BY: SHARED_FS_DRIVER}},
                "spec": {
                    "capacity": {
                        "storage": (spec.get("resources") or {}).get("requests", {}).get("storage", "1Gi")
                    },
                    "accessModes": list(spec.get("accessModes") or ["ReadWriteMany"]),
                    "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy", "Delete"),
                    "storageClassName": storage_class["metadata"]["name"],
                    "volumeMode": spec.get("volumeMode") or "Filesystem",
                    "claimRef": {
                        "apiVersion": "v1",
                        "kind": "PersistentVolumeClaim",
                        "namespace": meta["namespace"],
                        "name": meta["name"],
                        "uid": meta["uid"],
                    },
                    "csi": {"driver": SHARED_FS_DRIVER, "volumeHandle": handle},
                },
            }
            self._volume_dir(handle).mkdir(parents=True, exist_ok=True)
            from npa_pulumi.kube.client import KubeError

            try:
                client.request("POST", "/api/v1/persistentvolumes", volume)
            except KubeError as err:
                if err.status != 409:  # made on an earlier tick: the PV controller binds it
                    raise

    def reclaim(self, client: Any) -> None:
        """Released volumes of the driver with reclaim Delete go, with their directory."""
        for volume in client.list("/api/v1/persistentvolumes"):
            spec = volume.get("spec") or {}
            ours = (volume["metadata"].get("annotations") or {}).get(PROVISIONED_BY) == SHARED_FS_DRIVER
            released = (volume.get("status") or {}).get("phase") in ("Released", "Failed")
            if ours and released and spec.get("persistentVolumeReclaimPolicy") == "Delete":
                handle = (spec.get("csi") or {}).get("volumeHandle", "")
                if handle:
                    shutil.rmtree(self._volume_dir(handle), ignore_errors=True)
                client.delete(f"/api/v1/persistentvolumes/{volume['metadata']['name']}")

    def _volume_dir(self, handle: str) -> Path:
        filesystem_id, _, volume = handle.partition("/")
        return filesystem_dir(self.cloud_dir, filesystem_id) / DATA_DIR / volume

    # ------------------------------------------------------------------ probes

    def answer_probes(self, client: Any, mounts: dict[str, JSON]) -> None:
        for pod in kubelet.running_probes(client, PROBE_LABEL):
            container = (pod.get("spec") or {}).get("containers", [{}])[0]
            try:
                settings = json.loads(container.get("command", [])[3])
            except (IndexError, ValueError, TypeError):
                settings = {}
            node = pod["spec"].get("nodeName", "")
            report = self.probe(client, pod, mounts.get(node), settings)
            passed = bool(report.get("passed"))
            kubelet.finish(client, pod, container, 0 if passed else 1, json.dumps(report, sort_keys=True))

    def probe(self, client: Any, pod: JSON, node: JSON | None, settings: JSON) -> JSON:
        """What the probe (npa_pulumi/kube/storage_check.py PROBE_SOURCE) prints on this node."""
        action = settings.get("action", "")
        report: JSON = {"action": action, "passed": False}
        try:
            if action == "write":  # the host's mount first, as the probe does, then the shared volume
                report |= self._host(node, settings)
                data = self._data_dir(client, pod, node)
                shared = data / f"payload-{settings['token']}"
                shared.write_bytes(bytes.fromhex(settings["payload"]))
                report["shared_sha256"] = _sha(shared)
            elif action == "read":
                data = self._data_dir(client, pod, node)
                names = sorted(p.name for p in data.iterdir() if p.name.startswith("payload-"))
                report["read"] = {n[len("payload-") :]: _sha(data / n) for n in names}
            else:
                raise ValueError(f"unknown probe action {action!r}")
            report["passed"] = True
        except (OSError, ValueError, KeyError) as err:
            report["error"] = f"{type(err).__name__}: {str(err)[:200]}"
        return report

    def _data_dir(self, client: Any, pod: JSON, node: JSON | None) -> Path:
        """The probe's `/data`: the claim's volume, published on this node only through its virtiofs
        mount (mounted-fs-path bind-mounts a subdirectory of it)."""
        claim = next(
            (
                v["persistentVolumeClaim"]["claimName"]
                for v in pod["spec"].get("volumes") or []
                if v.get("persistentVolumeClaim")
            ),
            None,
        )
        if claim is None:
            raise ValueError("the probe mounts no claim at /data")
        if node is None or not node["mounted"]:
            raise OSError(
                "/data: the volume cannot be published: the shared filesystem is not mounted on this node"
            )
        found = client.get(
            f"/api/v1/namespaces/{pod['metadata']['namespace']}/persistentvolumeclaims/{claim}"
        )
        volume = client.get(f"/api/v1/persistentvolumes/{found['spec']['volumeName']}")
        path = self._volume_dir(volume["spec"]["csi"]["volumeHandle"])
        if not path.is_dir():
            raise OSError(f"/data: volume directory {path.name} missing")
        return path

    def _host(self, node: JSON | None, settings: JSON) -> JSON:
        mount = (node or {}).get("mount") or {}
        mounted = bool(node and node["mounted"])
        report: JSON = {
            "mounts": [
                {
                    "fs_type": mount.get("fs_type", "virtiofs"),
                    "source": mount.get("tag", ""),
                    "options": "rw,relatime" if node and node["writable"] else "ro,relatime",
                    "super": "rw" if node and node["writable"] else "ro",
                }
            ]
            if mounted
            else [],
            "fstab": [
                {
                    "source": mount.get("tag", ""),
                    "fs_type": mount.get("fs_type", "virtiofs"),
                    "options": mount.get("options", "defaults"),
                }
            ]
            if mount
            else [],
            # Unmounted, statvfs sees the node's boot disk under the mount point, not the filesystem.
            "capacity_bytes": (node["size_bytes"] // FRAGMENT_BYTES) * FRAGMENT_BYTES
            if mounted and node
            else 0,
            "fragment_bytes": FRAGMENT_BYTES,
        }
        payload = bytes.fromhex(settings["payload"])
        if mounted and node:
            probes = (
                filesystem_dir(self.cloud_dir, node["filesystem_id"])
                / ".npa-storage-probes"
                / settings["run_id"]
            )
            probes.mkdir(parents=True, exist_ok=True)
            host = probes / f"host-{settings['token']}"
            host.write_bytes(payload)
            report["host_sha256"] = _sha(host)
            host.unlink()
            probes.rmdir()
            report["host_absent"] = not host.exists()
        return report


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
