"""The shared-filesystem check behind `verify-storage`: on every worker, the virtiofs mount the recipe
declares and one ReadWriteMany volume that every worker can write to and read everyone's writes from.

One run, bounded by one deadline, every API call bounded by what is left of it:

1. **Workers**: exactly the expected nodes, every one Ready with a boot id (nothing is created otherwise).
2. **StorageClass**: the recipe's shared-filesystem class exists, with its CSI provisioner and `Delete`,
   and that CSI driver is registered (its CSIDriver object).
3. **Claim**: one RWX PVC of that class, Bound to a PV of that driver whose claimRef is this claim's UID.
4. **Write phase**: a probe pod pinned to each worker reads the host's mount table (PID 1's mountinfo) and
   fstab for exactly one read-write virtiofs mount of the declared tag at the declared path with `nofail`,
   its capacity, writes and re-reads a file on the host mount, then writes its own payload to the volume.
5. **Read phase**: a probe pod per worker reads every payload back; every checksum must match; the
   workers (name, UID, boot id) must be the ones the check began with.
6. **Cleanup**, always: every probe pod, then the claim, deleted with UID preconditions and waited for
   until gone; the PV (reclaim `Delete`) must go too; nothing labelled with the run id may remain.
   A failed cleanup fails the check.

The probe pods run the probe source below (`python3 -c`) and leave one JSON line as their termination
message; the result is judged from the pod's status, so no log streaming through a kubelet is needed.
Evidence is per node (what held, what failed) and never holds anything secret.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from npa_pulumi.kube.client import KubeClient, KubeError

JSON = dict[str, Any]
RUN_LABEL = "npa.nebius.com/storage-verification"
PHASE_LABEL = "npa.nebius.com/storage-phase"
SHARED_FS_CLASS = "csi-mounted-fs-path-sc"
SHARED_FS_DRIVER = "mounted-fs-path.csi.nebius.ai"
PROBE_IMAGE = (
    "docker.io/library/python:3.12.12-slim-bookworm"
    "@sha256:2986c55feb36e6cae00fa1fefb454283e4b33f35e75ff8bdd123b134130be301"
)
_CALL_CAP_S = 10.0

# What runs in each probe pod (a real node answers it; the local cloud's agent answers it from its model).
PROBE_SOURCE = r"""
import hashlib, json, os, sys
s = json.loads(sys.argv[1])
out = {"action": s["action"], "passed": False}
def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
try:
    if s["action"] == "write":
        mounts = []
        for line in open("/host-proc/1/mountinfo"):
            left, _, right = line.partition(" - ")
            f, r = left.split(), right.split()
            if f[4] == s["mount_path"]:
                sup = r[2] if len(r) > 2 else ""
                mounts.append({"fs_type": r[0], "source": r[1], "options": f[5], "super": sup})
        out["mounts"] = mounts
        fstab = []
        for line in open("/host-fstab"):
            f = line.split()
            if len(f) >= 4 and not f[0].startswith("#") and f[1] == s["mount_path"]:
                fstab.append({"source": f[0], "fs_type": f[2], "options": f[3]})
        out["fstab"] = fstab
        st = os.statvfs("/host-storage")
        out["capacity_bytes"], out["fragment_bytes"] = st.f_frsize * st.f_blocks, st.f_frsize
        d = "/host-storage/.npa-storage-probes/" + s["run_id"]
        os.makedirs(d, exist_ok=True)
        p = d + "/host-" + s["token"]
        with open(p, "wb") as f:
            f.write(bytes.fromhex(s["payload"])); f.flush(); os.fsync(f.fileno())
        out["host_sha256"] = sha(p)
        os.unlink(p)
        os.rmdir(d)
        out["host_absent"] = not os.path.exists(p)
        q = "/data/payload-" + s["token"]
        with open(q, "wb") as f:
            f.write(bytes.fromhex(s["payload"])); f.flush(); os.fsync(f.fileno())
        out["shared_sha256"] = sha(q)
    else:
        names = [n for n in sorted(os.listdir("/data")) if n.startswith("payload-")]
        out["read"] = {n[len("payload-"):]: sha("/data/" + n) for n in names}
    out["passed"] = True
except Exception as err:
    out["error"] = type(err).__name__ + ": " + str(err)[:200]
line = json.dumps(out, sort_keys=True)
open("/dev/termination-log", "w").write(line)
print(line)
sys.exit(0 if out["passed"] else 1)
"""


@dataclass(frozen=True)
class StorageConfig:
    expected_workers: int
    mount_path: str
    mount_tag: str
    size_gib: int
    timeout_s: float
    storage_class: str = SHARED_FS_CLASS
    driver: str = SHARED_FS_DRIVER
    namespace: str = "npa-system"
    image: str = PROBE_IMAGE
    poll_s: float = 0.5


@dataclass
class _Run:
    client_for: Callable[[float], KubeClient]
    config: StorageConfig
    deadline: float
    clock: Callable[[], float]
    run_id: str
    failures: list[str]
    created: list[tuple[str, str]]  # (path, uid) of every object this run created, in creation order

    def client(self) -> KubeClient:
        return self.client_for(min(_CALL_CAP_S, max(1.0, self.deadline - self.clock())))

    def fail(self, message: str) -> None:
        if message not in self.failures:
            self.failures.append(message)


def _token(node: JSON) -> str:
    """A worker's name in the probe's files: from its UID, so nothing of its name is written to disk."""
    return hashlib.sha256(str(node["metadata"].get("uid", "")).encode()).hexdigest()[:32]


def _ready(node: JSON) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def _check_workers(run: _Run, nodes: list[JSON]) -> None:
    expected = run.config.expected_workers
    if len(nodes) != expected:
        run.fail(f"{len(nodes)} worker(s) registered, {expected} expected")
    for node in nodes:
        name = node["metadata"]["name"]
        if not _ready(node):
            run.fail(f"{name}: not Ready")
        if not ((node.get("status") or {}).get("nodeInfo") or {}).get("bootID"):
            run.fail(f"{name}: no boot id")
        if (node.get("spec") or {}).get("unschedulable"):
            run.fail(f"{name}: cordoned")


def _check_class(run: _Run) -> None:
    name = run.config.storage_class
    found = run.client().get_or_none(f"/apis/storage.k8s.io/v1/storageclasses/{name}")
    if found is None:
        run.fail(f"StorageClass {name} not found")
        return
    if found.get("provisioner") != run.config.driver:
        run.fail(
            f"StorageClass {name}: provisioner {found.get('provisioner')!r}, {run.config.driver} expected"
        )
    if found.get("reclaimPolicy", "Delete") != "Delete":
        run.fail(f"StorageClass {name}: reclaimPolicy {found.get('reclaimPolicy')}, Delete expected")
    if run.client().get_or_none(f"/apis/storage.k8s.io/v1/csidrivers/{run.config.driver}") is None:
        run.fail(f"CSIDriver {run.config.driver} not registered")


def _identities(nodes: list[JSON]) -> set[tuple[str, str, str]]:
    return {
        (
            n["metadata"]["name"],
            str(n["metadata"].get("uid", "")),
            str(((n.get("status") or {}).get("nodeInfo") or {}).get("bootID", "")),
        )
        for n in nodes
    }


def _labels(run: _Run, phase: str) -> JSON:
    return {RUN_LABEL: run.run_id, PHASE_LABEL: phase, "app.kubernetes.io/managed-by": "npa-pulumi"}


def _create(run: _Run, collection: str, obj: JSON) -> JSON:
    created = run.client().request("POST", collection, obj)
    run.created.append((f"{collection}/{created['metadata']['name']}", created["metadata"]["uid"]))
    return created


def _claim(run: _Run) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": f"npa-storage-{run.run_id}", "labels": _labels(run, "claim")},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": run.config.storage_class,
            "volumeMode": "Filesystem",
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def _wait_bound(run: _Run, path: str, uid: str) -> JSON | None:
    """The claim once Bound, its PV checked: this claim's UID in the claimRef, the driver, RWX, Delete."""
    while run.clock() < run.deadline:
        claim = run.client().get(path)
        if (claim.get("status") or {}).get("phase") == "Bound" and claim["spec"].get("volumeName"):
            volume = run.client().get_or_none(f"/api/v1/persistentvolumes/{claim['spec']['volumeName']}")
            if volume is None:
                run.fail("the claim is Bound to a volume that does not exist")
                return None
            spec = volume.get("spec") or {}
            if (spec.get("claimRef") or {}).get("uid") != uid:
                run.fail("the volume's claimRef is not this claim")
            if (spec.get("csi") or {}).get("driver") != run.config.driver:
                run.fail(f"the volume's CSI driver is {(spec.get('csi') or {}).get('driver')!r}")
            if "ReadWriteMany" not in (spec.get("accessModes") or []):
                run.fail("the volume is not ReadWriteMany")
            if spec.get("persistentVolumeReclaimPolicy") != "Delete":
                run.fail("the volume's reclaim policy is not Delete")
            return volume
        time.sleep(run.config.poll_s)
    run.fail("the probe claim was not Bound before the deadline")
    return None


def _probe_pod(run: _Run, node: str, phase: str, settings: JSON, claim: str) -> JSON:
    config = run.config
    suffix = hashlib.sha256(node.encode()).hexdigest()[:8]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"npa-storage-{phase}-{suffix}-{run.run_id}", "labels": _labels(run, phase)},
        "spec": {
            "restartPolicy": "Never",
            "nodeName": node,
            "automountServiceAccountToken": False,
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "probe",
                    "image": config.image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["python3", "-c", PROBE_SOURCE, json.dumps(settings, sort_keys=True)],
                    "terminationMessagePolicy": "File",
                    "securityContext": {
                        "runAsUser": 0,
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "volumeMounts": [
                        {
                            "name": "host-storage",
                            "mountPath": "/host-storage",
                            "mountPropagation": "HostToContainer",
                        },
                        {"name": "host-proc", "mountPath": "/host-proc", "readOnly": True},
                        {"name": "host-fstab", "mountPath": "/host-fstab", "readOnly": True},
                        {"name": "data", "mountPath": "/data"},
                    ],
                }
            ],
            "volumes": [
                {"name": "host-storage", "hostPath": {"path": config.mount_path, "type": "Directory"}},
                {"name": "host-proc", "hostPath": {"path": "/proc", "type": "Directory"}},
                {"name": "host-fstab", "hostPath": {"path": "/etc/fstab", "type": "File"}},
                {"name": "data", "persistentVolumeClaim": {"claimName": claim}},
            ],
        },
    }


def _terminated(pod: JSON) -> JSON:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        state = (status.get("state") or {}).get("terminated")
        if state:
            return dict(state)
    return {}


def _run_phase(
    run: _Run, nodes: dict[str, str], phase: str, settings_for: Callable[[str], JSON], claim: str
) -> dict[str, JSON]:
    """One probe pod per worker, all at once; each worker's parsed result (or why there is none)."""
    collection = f"/api/v1/namespaces/{run.config.namespace}/pods"
    pods: dict[str, str] = {}
    for node in nodes:
        created = _create(run, collection, _probe_pod(run, node, phase, settings_for(node), claim))
        pods[node] = f"{collection}/{created['metadata']['name']}"
    results: dict[str, JSON] = {}
    while len(results) < len(pods) and run.clock() < run.deadline:
        for node, path in pods.items():
            if node in results:
                continue
            pod = run.client().get(path)
            phase_now = (pod.get("status") or {}).get("phase", "Pending")
            if phase_now in ("Succeeded", "Failed"):
                terminated = _terminated(pod)
                try:
                    report = json.loads(str(terminated.get("message") or "{}"))
                except ValueError:
                    report = {"error": "the probe left no JSON result"}
                report = (
                    report if isinstance(report, dict) else {"error": "the probe's result is not an object"}
                )
                report["phase"], report["exit_code"] = phase_now, terminated.get("exitCode")
                results[node] = report
        if len(results) < len(pods):
            time.sleep(run.config.poll_s)
    for node in pods:
        results.setdefault(
            node, {"phase": "timeout", "error": "the probe did not finish before the deadline"}
        )
    return results


def _judge_write(run: _Run, node: str, report: JSON, payload: str) -> JSON:
    config = run.config
    mounts, fstab = report.get("mounts") or [], report.get("fstab") or []
    mount_ok = (
        len(mounts) == 1
        and mounts[0].get("fs_type") == "virtiofs"
        and mounts[0].get("source") == config.mount_tag
        and "rw" in str(mounts[0].get("options", "")).split(",")
        and "ro" not in str(mounts[0].get("super", "")).split(",")
    )
    options = str(fstab[0].get("options", "")).split(",") if len(fstab) == 1 else []
    fstab_ok = (
        len(fstab) == 1
        and fstab[0].get("source") == config.mount_tag
        and fstab[0].get("fs_type") == "virtiofs"
        and "nofail" in options
        and "ro" not in options
    )
    wanted = config.size_gib * 1024**3
    capacity = int(report.get("capacity_bytes") or 0)
    capacity_ok = wanted <= capacity < wanted + max(1, int(report.get("fragment_bytes") or 1))
    expected_sha = hashlib.sha256(bytes.fromhex(payload)).hexdigest()
    verdict = {
        "host_mount": mount_ok,
        "fstab_nofail": fstab_ok,
        "capacity_gib": round(capacity / 1024**3, 3),
        "capacity": capacity_ok,
        "host_io": report.get("host_sha256") == expected_sha and report.get("host_absent") is True,
        "shared_write": report.get("shared_sha256") == expected_sha,
        "probe": report.get("phase"),
    }
    if report.get("error"):
        verdict["error"] = str(report["error"])[:300]
    for check in ("host_mount", "fstab_nofail", "capacity", "host_io", "shared_write"):
        if not verdict[check]:
            why = f" ({verdict['error']})" if verdict.get("error") else ""
            run.fail(f"{node}: {check.replace('_', ' ')} failed{why}")
    return verdict


def _cleanup(run: _Run, volume: str | None) -> bool:
    """Delete what this run created, newest first (pods before the claim they use), each with its UID as a
    precondition, and wait until each is gone; then the claim's volume and any object with the run label."""
    clean = True
    for path, uid in reversed(run.created):
        clean = _delete_and_wait(run, path, uid) and clean
    end = max(run.deadline, run.clock() + 30)
    if volume:
        while run.client().get_or_none(f"/api/v1/persistentvolumes/{volume}") is not None:
            if run.clock() >= end:
                run.fail(f"the probe volume {volume} was not removed (reclaim Delete)")
                clean = False
                break
            time.sleep(run.config.poll_s)
    selector = f"{RUN_LABEL}={run.run_id}"
    namespace = run.config.namespace
    left = run.client().list(f"/api/v1/namespaces/{namespace}/pods", selector)
    left += run.client().list(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", selector)
    if left:
        run.fail(f"probe objects left behind: {', '.join(o['metadata']['name'] for o in left)}")
        clean = False
    return clean


def _delete_and_wait(run: _Run, path: str, uid: str) -> bool:
    body = {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "preconditions": {"uid": uid},
        "gracePeriodSeconds": 0,
    }
    try:
        run.client().request("DELETE", path, body)
    except KubeError as err:
        if err.status not in (404, 409):  # gone already, or another object now holds the name
            run.fail(f"could not delete {path.rsplit('/', 1)[-1]}: {err}")
            return False
    end = max(run.deadline, run.clock() + 30)  # cleanup gets its own grace even at the deadline
    while run.clock() < end:
        current = run.client().get_or_none(path)
        if current is None or current["metadata"].get("uid") != uid:
            return True
        time.sleep(run.config.poll_s)
    run.fail(f"{path.rsplit('/', 1)[-1]} was not removed")
    return False


def run_storage_check(
    client_for: Callable[[float], KubeClient],
    config: StorageConfig,
    clock: Callable[[], float] = time.monotonic,
) -> JSON:
    """The whole check; returns the evidence (`passed`, `failures`, per-node results, `cleanup`)."""
    started = clock()
    run = _Run(client_for, config, started + config.timeout_s, clock, secrets.token_hex(4), [], [])
    nodes_out: dict[str, JSON] = {}
    cleaned: bool | None = None
    try:
        nodes = sorted(run.client().list("/api/v1/nodes"), key=lambda n: n["metadata"]["name"])
        _check_workers(run, nodes)
        _check_class(run)
        if not run.failures:  # a broken cluster gets no probe objects at all
            cleaned = _probe(run, nodes, nodes_out)
    except KubeError as err:
        run.fail(f"the cluster's API failed the check: {err}")
    finally:
        if cleaned is None and run.created:
            cleaned = _cleanup(run, None)
    return {
        "passed": not run.failures and cleaned is not False,
        "run_id": run.run_id,
        "expected_workers": config.expected_workers,
        "requested_gibibytes": config.size_gib,
        "nodes": nodes_out,
        "failures": run.failures[:30],
        "cleanup": {"objects_created": len(run.created), "all_removed": cleaned is not False},
        "elapsed_s": round(clock() - started, 2),
    }


def _probe(run: _Run, nodes: list[JSON], out: dict[str, JSON]) -> bool:
    """Claim, write phase, read phase; cleanup always. Returns whether cleanup succeeded."""
    volume: str | None = None
    try:
        collection = f"/api/v1/namespaces/{run.config.namespace}/persistentvolumeclaims"
        claim = _create(run, collection, _claim(run))
        bound = _wait_bound(run, f"{collection}/{claim['metadata']['name']}", claim["metadata"]["uid"])
        if bound is None:
            return _cleanup(run, None)
        volume = bound["metadata"]["name"]
        tokens = {n["metadata"]["name"]: _token(n) for n in nodes}
        payloads = {name: secrets.token_hex(32) for name in tokens}
        base = {"mount_path": run.config.mount_path, "mount_tag": run.config.mount_tag, "run_id": run.run_id}

        def write_settings(node: str) -> JSON:
            return {**base, "action": "write", "token": tokens[node], "payload": payloads[node]}

        written = _run_phase(run, tokens, "write", write_settings, claim["metadata"]["name"])
        for node, report in written.items():
            out[node] = _judge_write(run, node, report, payloads[node])
        expected = {tokens[n]: hashlib.sha256(bytes.fromhex(p)).hexdigest() for n, p in payloads.items()}
        if not run.failures:
            read = _run_phase(
                run, tokens, "read", lambda n: {**base, "action": "read"}, claim["metadata"]["name"]
            )
            for node, report in read.items():
                seen: JSON = report["read"] if isinstance(report.get("read"), dict) else {}
                out[node]["shared_read"] = seen == expected
                if seen != expected:
                    run.fail(
                        f"{node}: reads {len(seen)} of {len(expected)} payloads intact from the shared volume"
                    )
        # Evidence about workers that were replaced or rebooted meanwhile is about other machines.
        if _identities(run.client().list("/api/v1/nodes")) != _identities(nodes):
            run.fail("the workers changed (added, replaced or rebooted) during the check: stale evidence")
    finally:
        cleaned = _cleanup(run, volume)
    for verdict in out.values():
        verdict["cleanup"] = cleaned
    return cleaned
