"""The original tool's cluster registrations, which the rest of `npa` reads to find a fleet's clusters.

    <NPA_CONFIG_DIR or ~/.npa>/clusters/<context>/
        kubeconfig       the cluster's kubeconfig, a copy of npa-pulumi's (0600, written atomically)
        cluster.json     what the cluster is: the immutable project and cluster ids, region, shape, endpoint
        metadata.json    who registered it, for which fleet and project, and the command that removes it

`npa fleet` wrote this directory after every kubeconfig write, and its workflow, controller and
`provision-if-absent` commands (and its storage verifier's identity proof) read it: a fleet's kube context may
differ from the provider's cluster name, so they match `provider_name` and verify the ids against the live
cloud. npa-pulumi writes the same record beside its own registry (engine/registrations/kubeconfigs.py), so a
cluster it deploys is found there without a second registration step (docs/kubeconfigs.md lists the fields).

* `metadata.json` says `managed_by: "npa fleet"`, the value the original's readers check before they trust a
  record (a fleet target, not a standalone `npa cluster`), and `written_by: "npa-pulumi"`, the tool that
  wrote it and whose `destroy` command `teardown_hint` names.
* Nothing secret goes into `cluster.json` or `metadata.json`; every file is 0600, every directory created
  here 0700.
* A record of another cluster is never overwritten: one whose `cluster.json` names another cluster or
  project id, whose `metadata.json` names another fleet or project key, or which cannot be read, is left as
  it is and the write is skipped with a warning (the deploy itself stands: the kubeconfig and npa-pulumi's
  own registration are written). The one exception is a record npa-pulumi wrote for this same fleet, project
  and cluster name whose cluster the live cloud no longer has: a destroy on another machine left it, and it
  is replaced.
* `destroy` removes the record once the cluster's stack is gone, only when it is this fleet's (same fleet
  and project key) for that very cluster id.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from npa_pulumi.cloud.errors import CloudError, NotFound
from npa_pulumi.cloud.port import CloudPort, Cluster, NodeGroup
from npa_pulumi.cloud.user_defaults import original_config_dir
from npa_pulumi.plan.targets import Target
from npa_pulumi.runtime.files import write_atomically

log = logging.getLogger(__name__)

MANAGED_BY = "npa fleet"  # what the original's readers require of a fleet target's record
WRITTEN_BY = "npa-pulumi"
EVENT_KUBECONFIG_WRITTEN = "kubeconfig_written"
LAST_SEEN_RUNNING = "RUNNING"
RECORD_FILES = ("kubeconfig", "cluster.json", "metadata.json")


@dataclass(frozen=True)
class ClusterShape:
    """What the spec asks of a cluster, as the original's record reports it."""

    region: str
    node_count: int  # CPU + GPU nodes
    node_platform: str  # the GPU pool's, else the CPU pool's
    node_preset: str
    k8s_version: str  # the spec's ("" for the backend's default); the live cluster's version wins
    subnet_id: str  # the spec's ("" when the project's network provides it); the live cluster's wins

    @classmethod
    def of(cls, target: Target) -> ClusterShape:
        cluster = target.cluster
        pool = cluster.gpu_nodes if cluster.gpu_count() > 0 else cluster.cpu_nodes
        return cls(
            region=target.region,
            node_count=cluster.cpu_count() + cluster.gpu_count(),
            node_platform=pool.platform if pool else "",
            node_preset=pool.preset if pool else "",
            k8s_version=cluster.k8s_version,
            subnet_id=cluster.subnet_id or "",
        )


@dataclass(frozen=True)
class NpaRegistration:
    """One cluster to register for the original's readers: its identity and the command that removes it."""

    context: str
    fleet: str
    project_key: str
    project_id: str
    cluster_id: str
    shape: ClusterShape
    # The cluster's destroy as the run's caller spelled it (engine/retries.py): the CLI's exact
    # `npa-pulumi destroy ... --only-projects ... --only-clusters ... --yes`
    teardown_hint: str


class ClusterRecord(BaseModel):
    """`cluster.json`, field for field as the original writes it (nothing secret)."""

    name: str  # the kube context
    cluster_id: str
    project_id: str
    region: str
    node_count: int
    node_platform: str
    node_preset: str
    k8s_version: str
    subnet_id: str
    created_at: str
    last_seen_state: str
    last_seen_at: str
    node_group_id: str
    endpoint: str
    kubeconfig_path: str
    provider_name: str  # the cluster's name in the cloud, which may differ from the context


class RecordMetadata(BaseModel):
    """`metadata.json`."""

    managed_by: str
    written_by: str
    fleet: str
    project_key: str
    event: str
    updated_at: str
    teardown_hint: str


@dataclass(frozen=True)
class Registered:
    """What `register` did: the record's directory when written, else why it was skipped."""

    directory: Path
    written: bool
    skipped: str = ""


def clusters_dir() -> Path:
    return original_config_dir() / "clusters"


def record_dir(context: str) -> Path:
    return clusters_dir() / context


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _read_json(path: Path) -> dict[str, Any] | None:
    """The JSON mapping at `path`; None when it is missing; ValueError when it is not a readable mapping."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise ValueError(f"{path} cannot be read: {err}") from err
    try:
        document = json.loads(text)
    except ValueError as err:
        raise ValueError(f"{path} is not JSON: {err}") from err
    if not isinstance(document, dict):
        raise ValueError(f"{path} is not a JSON object")
    return document


@dataclass(frozen=True)
class _Existing:
    cluster: dict[str, Any] | None
    metadata: dict[str, Any] | None


def _existing(directory: Path) -> _Existing | None:
    """What a record directory holds now; None when there is none (or it is empty). ValueError when a
    file of it cannot be read."""
    if not directory.exists():
        return None
    if not directory.is_dir():
        raise ValueError(f"{directory} is not a directory")
    if not any(directory.iterdir()):
        return None
    cluster = _read_json(directory / "cluster.json")
    metadata = _read_json(directory / "metadata.json")
    return _Existing(cluster, metadata)


def _same_owner(metadata: dict[str, Any] | None, fleet: str, project_key: str) -> bool:
    return (
        metadata is not None
        and str(metadata.get("fleet") or "") == fleet
        and str(metadata.get("project_key") or "") == project_key
    )


def _conflict(port: CloudPort, registration: NpaRegistration, existing: _Existing) -> str:
    """Why the existing record is not this cluster's to rewrite; "" when it is."""
    if existing.cluster is None:  # something else lives there
        return "it holds no cluster.json: not provably this cluster's record"
    recorded_id = str(existing.cluster.get("cluster_id") or "")
    recorded_project = str(existing.cluster.get("project_id") or "")
    if existing.metadata is not None and not _same_owner(
        existing.metadata, registration.fleet, registration.project_key
    ):
        return (
            f"it is registered to fleet {existing.metadata.get('fleet')!r}, project "
            f"{existing.metadata.get('project_key')!r} (managed by {existing.metadata.get('managed_by')!r})"
        )
    if recorded_project and registration.project_id and recorded_project != registration.project_id:
        return f"it records project {recorded_project}, not {registration.project_id}"
    if recorded_id == registration.cluster_id:
        return ""
    if _stale_record_of_ours(port, existing, registration):
        return ""
    return f"it records cluster {recorded_id or '(none)'}, not {registration.cluster_id}"


def _stale_record_of_ours(port: CloudPort, existing: _Existing, registration: NpaRegistration) -> bool:
    """A record npa-pulumi wrote for this fleet and project whose cluster the live cloud no longer has."""
    metadata = existing.metadata or {}
    if metadata.get("written_by") != WRITTEN_BY:
        return False
    old_id = str((existing.cluster or {}).get("cluster_id") or "")
    if not old_id:
        return True
    try:
        port.get_cluster(old_id)
    except NotFound:
        return True
    except CloudError:  # any doubt keeps the record
        return False
    return False


def _node_group_id(groups: list[NodeGroup], shape: ClusterShape) -> str:
    """The node group of the pool the record describes (the first by name when there are several), else
    the first node group."""
    ordered = sorted(groups, key=lambda g: (g.name, g.id))
    for group in ordered:
        if group.platform == shape.node_platform and (
            not shape.node_preset or group.preset == shape.node_preset
        ):
            return group.id
    return ordered[0].id if ordered else ""


def _mkdir_private(directory: Path) -> None:
    """`directory` and any missing parents, each created 0700 (existing ones are left as they are)."""
    missing = []
    for path in (directory, *directory.parents):
        if path.exists():
            break
        missing.append(path)
    for path in reversed(missing):
        path.mkdir(mode=0o700, exist_ok=True)
        path.chmod(0o700)  # the umask may have narrowed or widened it


def _json(model: BaseModel) -> str:
    return json.dumps(model.model_dump(), indent=2) + "\n"


def register(port: CloudPort, registration: NpaRegistration, kubeconfig_text: str) -> Registered:
    """Write the original's record for one cluster whose kubeconfig was just written, unless the directory
    holds another cluster's record (skipped, left as it is: `Registered.skipped` says why). Reads the live
    cluster and its node groups first (endpoint, version, subnet, node group id); when they cannot be read
    the record is skipped too. Never raises for the record: the deploy it follows stands."""
    directory = record_dir(registration.context)
    try:
        live: Cluster = port.get_cluster(registration.cluster_id)
        groups = port.list_node_groups(registration.cluster_id)
    except CloudError as err:
        return _skip(directory, f"the cluster cannot be read from the cloud ({err})")
    try:
        existing = _existing(directory)
    except ValueError as err:
        return _skip(directory, f"it cannot be read ({err})")
    conflict = "" if existing is None else _conflict(port, registration, existing)
    if conflict:
        return _skip(directory, conflict)
    previous = existing.cluster if existing is not None else None
    kept_created = ""
    if previous is not None and str(previous.get("cluster_id") or "") == registration.cluster_id:
        kept_created = str(previous.get("created_at") or "")  # the original keeps a record's creation time
    now = _now()
    shape = registration.shape
    kubeconfig = directory / "kubeconfig"
    record = ClusterRecord(
        name=registration.context,
        cluster_id=registration.cluster_id,
        project_id=registration.project_id or live.project_id,
        region=shape.region,
        node_count=shape.node_count,
        node_platform=shape.node_platform,
        node_preset=shape.node_preset,
        k8s_version=live.k8s_version or shape.k8s_version,
        subnet_id=live.subnet_id or shape.subnet_id,
        created_at=kept_created or now,
        last_seen_state=LAST_SEEN_RUNNING,
        last_seen_at=now,
        node_group_id=_node_group_id(groups, shape),
        endpoint=live.endpoint,
        kubeconfig_path=str(kubeconfig),
        provider_name=live.name,
    )
    metadata = RecordMetadata(
        managed_by=MANAGED_BY,
        written_by=WRITTEN_BY,
        fleet=registration.fleet,
        project_key=registration.project_key,
        event=EVENT_KUBECONFIG_WRITTEN,
        updated_at=now,
        teardown_hint=registration.teardown_hint,
    )
    try:
        _mkdir_private(directory)
        directory.chmod(0o700)
        # The kubeconfig first: a reader that finds cluster.json finds the kubeconfig it names.
        write_atomically(kubeconfig, kubeconfig_text, mode=0o600)
        write_atomically(directory / "cluster.json", _json(record), mode=0o600)
        write_atomically(directory / "metadata.json", _json(metadata), mode=0o600)
    except OSError as err:
        return _skip(directory, f"it cannot be written ({err})")
    return Registered(directory, written=True)


def _skip(directory: Path, why: str) -> Registered:
    message = f"npa registration {directory} left as it is: {why}"
    log.warning("%s", message)
    return Registered(directory, written=False, skipped=message)


def unregister(context: str, *, fleet: str, project_key: str, cluster_id: str) -> bool:
    """Remove the original's record of `context` when it is this fleet's record of that cluster (same fleet
    and project key, same cluster id); True if removed. Files of its directory other than the record's own
    stay, and so does the directory then."""
    directory = record_dir(context)
    if not cluster_id:
        return False
    try:
        existing = _existing(directory)
    except ValueError as err:
        log.warning("npa registration %s kept: %s", directory, err)
        return False
    if existing is None or existing.cluster is None:
        return False
    if str(existing.cluster.get("cluster_id") or "") != cluster_id:
        return False
    if not _same_owner(existing.metadata, fleet, project_key):
        return False
    for name in RECORD_FILES:
        (directory / name).unlink(missing_ok=True)
    try:
        directory.rmdir()
    except OSError:
        log.info("npa registration %s: other files kept in it", directory)
    return True


def is_ours(context: str, *, fleet: str, project_key: str, cluster_id: str) -> bool:
    """Whether `context`'s record is this fleet's record of `cluster_id` (what `unregister` removes)."""
    try:
        existing = _existing(record_dir(context))
    except ValueError:
        return False
    return (
        existing is not None
        and existing.cluster is not None
        and bool(cluster_id)
        and str(existing.cluster.get("cluster_id") or "") == cluster_id
        and _same_owner(existing.metadata, fleet, project_key)
    )


__all__ = [
    "MANAGED_BY",
    "WRITTEN_BY",
    "ClusterRecord",
    "ClusterShape",
    "NpaRegistration",
    "RecordMetadata",
    "Registered",
    "clusters_dir",
    "is_ours",
    "record_dir",
    "register",
    "unregister",
]
