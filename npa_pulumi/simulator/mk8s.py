"""Managed Kubernetes: clusters and node groups, and each cluster's Kubernetes API server.

A cluster is PROVISIONING until the simulated provisioning time has passed, then RUNNING. A node group
additionally waits for its instances to fit the quota or its capacity block (see `scheduling`), so a
quota-starved group stays PROVISIONING with a QuotaFailure condition instead of failing — the real
behaviour. The bounded waits a create relies on (local providers, soperator's stand-in) are
provisioning.py's; faults on a cluster's nodes, Slurm roles and GPU driver, and Nebius' own day-two events,
node_health.py's.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from npa_pulumi.cloud.errors import (
    AlreadyExists,
    CloudRequest,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Unavailable,
)
from npa_pulumi.simulator import accounting as acct
from npa_pulumi.simulator import records, releases, scheduling
from npa_pulumi.simulator.admin import Settings
from npa_pulumi.simulator.kube import binaries as kube_binaries
from npa_pulumi.simulator.kube import lifecycle as kube_lifecycle
from npa_pulumi.simulator.kube.controlplane import Access
from npa_pulumi.simulator.store import Store
from npa_pulumi.simulator.transaction import OpContext, clean_labels

DEFAULT_K8S_VERSION = "1.32"
RESERVATION_POLICIES = ("", "AUTO", "FORBID", "STRICT")
ATTACH_MODES = ("READ_WRITE", "READ_ONLY")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def params_of(release_id: str) -> dict[str, Any]:
    return {"release_id": release_id}


def ensure_api(directory: Path, cluster_id: str, timeout_s: float) -> Access:
    """The cluster's API server, started if it does not run; Unavailable when it cannot be."""
    try:
        return kube_lifecycle.ensure_running(directory, cluster_id, timeout_s)
    except (kube_lifecycle.ControlPlaneError, kube_binaries.KubeBinariesMissing) as err:
        raise Unavailable(
            str(err), CloudRequest("get_cluster_credentials", {"cluster_id": cluster_id})
        ) from None


def delete_cluster_rows(ctx: OpContext, cluster_id: str) -> None:
    """A cluster's row and its node groups' (as mk8s deletes a cluster: with its node groups)."""
    groups = ctx.conn.execute(
        "SELECT id FROM resources WHERE kind = 'node_group' AND parent_id = ?", (cluster_id,)
    ).fetchall()
    for group in groups:
        ctx.delete_row(group["id"])
    ctx.delete_row(cluster_id)


def _check_node_group_request(ctx: OpContext, cluster: sqlite3.Row, params: dict[str, Any]) -> None:
    if not _is_count(params["node_count"]):
        raise InvalidArgument("node_count must be a non-negative integer")
    if not params["platform"]:
        raise InvalidArgument("a node group needs a platform")
    if not _is_count(params["disk_size_gib"]) or params["disk_size_gib"] == 0:
        raise InvalidArgument("disk_size_gib must be a positive integer")
    policy, block_ids = params["reservation_policy"], params["reservation_ids"]
    if policy not in RESERVATION_POLICIES:
        raise InvalidArgument(f"reservation policy {policy!r} is not AUTO, FORBID or STRICT")
    if policy in ("", "FORBID") and block_ids:
        raise InvalidArgument(f"reservation policy {policy or '(none)'} takes no reservation ids")
    for block_id in block_ids:
        _check_block_fits(ctx, block_id, cluster["region"], params["platform"])
    if params["gpu_cluster_id"]:
        gpu_cluster = ctx.row("gpu_cluster", params["gpu_cluster_id"])
        if gpu_cluster["project_id"] != cluster["project_id"]:
            raise InvalidArgument(f"GPU cluster {params['gpu_cluster_id']} is in another project")
    for attachment in params["filesystems"]:
        filesystem = ctx.row("filesystem", str(attachment.get("filesystem_id", "")))
        if filesystem["project_id"] != cluster["project_id"]:
            raise InvalidArgument(f"filesystem {filesystem['id']} is in another project")
        if attachment.get("attach_mode", "READ_WRITE") not in ATTACH_MODES:
            raise InvalidArgument(f"attach_mode must be one of {', '.join(ATTACH_MODES)}")


def _check_block_fits(ctx: OpContext, block_id: str, region: str, platform: str) -> None:
    block = ctx.block_row(block_id)
    if block["region"] != region:
        raise FailedPrecondition(f"capacity block group {block_id} is in {block['region']}, not {region}")
    if block["platform"] != platform:
        raise FailedPrecondition(
            f"capacity block group {block_id} reserves {block['platform']}, not {platform}"
        )
    if block["state"] not in ("", "ACTIVE"):
        raise FailedPrecondition(f"capacity block group {block_id} is {block['state']}, not ACTIVE")


def _recharge(ctx: OpContext, node_group_id: str, data: dict[str, Any]) -> dict[str, Any]:
    """A node group's new template or size: its instances are released and charged again (it waits,
    PROVISIONING with a QuotaFailure condition, when they do not fit)."""
    acct.release(ctx.conn, node_group_id)
    ctx.conn.execute(
        "UPDATE resources SET ready_at = ?, data = ? WHERE id = ?",
        (records.WAITING_FOR_QUOTA, json.dumps(data), node_group_id),
    )
    scheduling.try_start(
        ctx.conn, ctx.row("node_group", node_group_id), ctx.tenant_id, ctx.now, ctx.provisioning_seconds
    )
    return ctx.fetch("node_group", node_group_id)


def _minor(version: str) -> tuple[int, int] | None:
    """`1.33`, `1.33-nebius-node.2` or `1.33.4` -> (1, 33); None for anything else."""
    parts = version.strip().split("-", 1)[0].split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return int(parts[0]), int(parts[1])


def _check_node_group_version(version: str, control_plane: str) -> None:
    """A node group's version is a Kubernetes minor no newer than its control plane's ('' asks for that)."""
    if not version:
        return
    wanted, limit = _minor(version), _minor(control_plane)
    if wanted is None:
        raise InvalidArgument(f"version {version!r} is not a Kubernetes minor (1.33)")
    if limit is not None and wanted > limit:
        raise InvalidArgument(
            f"a node group at {version} would be newer than its control plane at {control_plane}"
        )


class Mk8s:
    """mk8s clusters and node groups over the store; `settings` decides whether clusters have API
    servers and how long a credentials call waits for one."""

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings

    def create_cluster(
        self,
        project_id: str,
        name: str,
        subnet_id: str,
        k8s_version: str = "",
        public_endpoint: bool = True,
        etcd_cluster_size: int = 3,
        labels: dict[str, str] | None = None,
        tenant_id: str | None = None,
        region: str | None = None,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """`tenant_id` / `region`, when given, must match the project's (the recipe passes its TF_VARs)."""
        params = {
            "project_id": project_id,
            "name": name,
            "subnet_id": subnet_id,
            "k8s_version": k8s_version or "",
            "public_endpoint": bool(public_endpoint),
            "etcd_cluster_size": etcd_cluster_size,
            "labels": clean_labels(labels),
        }
        with self.store.op("create_cluster", params, write=True, timeout_s=timeout_s) as ctx:
            if tenant_id is not None:
                ctx.check_tenant(tenant_id)
            project = ctx.project_row(project_id)
            if region is not None and region != project["region"]:
                raise InvalidArgument(f"project {project_id} is in {project['region']}, not {region}")
            subnet = ctx.row("subnet", subnet_id)
            if subnet["project_id"] != project_id:
                raise InvalidArgument(f"subnet {subnet_id} is not in project {project_id}")
            stored = {k: v for k, v in params.items() if k not in ("project_id", "name")}
            stored["k8s_version"] = k8s_version or DEFAULT_K8S_VERSION  # the service picks when unset
            return ctx.create(
                "cluster",
                name=name,
                scope=project_id,
                project_id=project_id,
                parent_id=project_id,
                region=project["region"],
                key=idempotency_key,
                data=stored,
                params=params,
                charges=[acct.Charge(acct.MK8S_CLUSTER_COUNT, 1)],
                ready_at=ctx.now + ctx.provisioning_seconds,
            )

    def get_cluster(self, cluster_id: str) -> dict[str, Any]:
        with self.store.op("get_cluster", {"cluster_id": cluster_id}, write=False) as ctx:
            return ctx.fetch("cluster", cluster_id)

    def list_clusters(self, project_id: str) -> list[dict[str, Any]]:
        with self.store.op("list_clusters", {"project_id": project_id}, write=False) as ctx:
            ctx.project_row(project_id)
            return ctx.list_of("cluster", "project_id", project_id)

    def delete_cluster(self, cluster_id: str, timeout_s: float | None = None) -> None:
        """Deleting a cluster deletes its node groups with it, as mk8s does, and stops its API server."""
        with self.store.op(
            "delete_cluster", {"cluster_id": cluster_id}, write=True, timeout_s=timeout_s
        ) as ctx:
            ctx.row("cluster", cluster_id)
            delete_cluster_rows(ctx, cluster_id)
        kube_lifecycle.stop(self.store.directory, cluster_id)

    # ------------------------------------------------------------------ inside the cluster

    def cluster_snapshot(self, cluster_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """The cluster and its node groups, or None once the cluster is gone: what the cluster's
        Kubernetes agent mirrors into the API server. Not an API call (no faults apply)."""
        with self.store.op(
            "cluster_snapshot", {"cluster_id": cluster_id}, write=False, inject=False, reconcile=True
        ) as ctx:
            row = ctx.conn.execute(
                "SELECT * FROM resources WHERE id = ? AND kind = 'cluster'", (cluster_id,)
            ).fetchone()
            if row is None:
                return None
            return records.to_record(row, ctx.now), ctx.list_of("node_group", "parent_id", cluster_id)

    def set_cluster_addons(self, cluster_id: str, addons: dict[str, Any]) -> dict[str, Any]:
        """What the recipe installs into the cluster (its Helm releases): `gpu_driver` (managed-image |
        operator | ""), `filestore`, `mig` ({strategy, config}), `kuberay` ({worker_replicas, ...}),
        `rtx_driver` (the RTX profile's {platform, preset, values, revision})."""
        params = {"cluster_id": cluster_id, "addons": addons}
        with self.store.op("set_cluster_addons", params, write=True) as ctx:
            row = ctx.row("cluster", cluster_id)
            data = records.data_of(row)
            data["addons"] = dict(addons)
            if isinstance(addons.get("kuberay"), str):  # the recipe sends it as JSON text
                data["addons"]["kuberay"] = json.loads(addons["kuberay"] or "{}") or {"worker_replicas": 1}
            if isinstance(addons.get("rtx_driver"), str):  # as JSON text too
                data["addons"]["rtx_driver"] = json.loads(addons["rtx_driver"] or "{}")
            ctx.set_data(cluster_id, data)
            return ctx.fetch("cluster", cluster_id)

    def merge_cluster_addons(self, cluster_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        """Set some addons and keep the others (a key whose value is None is removed): what one Helm release
        installs or uninstalls, told by the local helm provider, beside what other releases installed. One
        transaction, so two providers' releases applied in parallel both land."""
        params = {"cluster_id": cluster_id, "changes": changes}
        with self.store.op("merge_cluster_addons", params, write=True) as ctx:
            row = ctx.row("cluster", cluster_id)
            data = records.data_of(row)
            addons = dict(data.get("addons") or {})
            for key, value in changes.items():
                if value is None:
                    addons.pop(key, None)
                else:
                    addons[key] = value
            data["addons"] = addons
            ctx.set_data(cluster_id, data)
            return ctx.fetch("cluster", cluster_id)

    def install_release(self, cluster_id: str, release: dict[str, Any]) -> dict[str, Any]:
        """A Marketplace release on the cluster (`{id, application_name, namespace, product_slug}`; the
        values stay with the caller, they may be secret): its product's addons join the cluster's, so the
        cluster's agent materialises what the chart would leave (releases.py maps the slugs). Installing
        an id again updates it; another release of the same application and namespace is AlreadyExists."""
        params = {"cluster_id": cluster_id, "release_id": release["id"]}
        with self.store.op("install_release", params, write=True) as ctx:
            row = ctx.row("cluster", cluster_id)
            data = records.data_of(row)
            installed = [r for r in data.get("releases", []) if r["id"] != release["id"]]
            for other in installed:
                if (other["application_name"], other["namespace"]) == (
                    release["application_name"],
                    release["namespace"],
                ):
                    raise AlreadyExists(
                        f"application {release['application_name']!r} is already installed in namespace "
                        f"{release['namespace']!r} of cluster {cluster_id} ({other['id']})"
                    )
            data["releases"] = [*installed, {**release, "addons": releases.addons_of(release)}]
            data["addons"] = releases.merged_addons(data.get("addons") or {}, data["releases"])
            ctx.set_data(cluster_id, data)
            return {**release, "cluster_id": cluster_id, "state": "DEPLOYED"}

    def get_release(self, release_id: str) -> dict[str, Any]:
        """A release by id, wherever it is installed; NotFound once it or its cluster is gone."""
        with self.store.op("get_release", {"release_id": release_id}, write=False) as ctx:
            for row in ctx.conn.execute("SELECT * FROM resources WHERE kind = 'cluster'").fetchall():
                for release in records.data_of(row).get("releases", []):
                    if release["id"] == release_id:
                        out = {k: v for k, v in release.items() if k != "addons"}
                        return {**out, "cluster_id": row["id"], "state": "DEPLOYED"}
        raise NotFound(f"release {release_id} not found", CloudRequest("get_release", params_of(release_id)))

    def uninstall_release(self, cluster_id: str, release_id: str) -> None:
        """Remove a release and the addons only it brought."""
        params = {"cluster_id": cluster_id, "release_id": release_id}
        with self.store.op("uninstall_release", params, write=True) as ctx:
            row = ctx.row("cluster", cluster_id)
            data = records.data_of(row)
            kept = [r for r in data.get("releases", []) if r["id"] != release_id]
            if len(kept) == len(data.get("releases", [])):
                raise NotFound(f"release {release_id} not found in cluster {cluster_id}")
            data["releases"] = kept
            data["addons"] = releases.merged_addons(data.get("addons") or {}, kept)
            ctx.set_data(cluster_id, data)

    def get_cluster_credentials(self, cluster_id: str, timeout_s: float | None = None) -> dict[str, Any]:
        """Administrator credentials for the cluster's API server (a client certificate), starting the
        server if it is not running. Secret: callers keep the key out of logs and plaintext state."""
        with self.store.op("get_cluster_credentials", {"cluster_id": cluster_id}, write=False) as ctx:
            cluster = ctx.fetch("cluster", cluster_id)
        if cluster["state"] != "RUNNING":
            raise FailedPrecondition(f"cluster {cluster_id} is {cluster['state']}, not RUNNING")
        if not self.settings.kubernetes_api_enabled():
            raise FailedPrecondition(
                "this local cloud runs no Kubernetes API servers (setting kubernetes_api is 0)"
            )
        access = ensure_api(self.store.directory, cluster_id, self.settings.wait_timeout(timeout_s))
        return {
            "server": access.server,
            "ca_pem": Path(access.ca_file).read_text(),
            "client_certificate_pem": Path(access.cert_file).read_text(),
            "client_key_pem": Path(access.key_file).read_text(),
        }

    # ------------------------------------------------------------------ node groups

    def create_node_group(
        self,
        cluster_id: str,
        name: str,
        node_count: int,
        platform: str,
        preset: str = "",
        disk_type: str = "NETWORK_SSD",
        disk_size_gib: int = 128,
        preemptible: bool = False,
        public_ips: bool = False,
        reservation_policy: str | None = None,
        reservation_ids: list[str] | None = None,
        gpu_cluster_id: str | None = None,
        filesystems: list[dict[str, str]] | None = None,
        mount: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
        k8s_version: str = "",
    ) -> dict[str, Any]:
        """Accepted even when the instances exceed quota: the group then stays PROVISIONING with a
        QuotaFailure condition until quota frees up, exactly as the real service behaves.

        `filesystems` are attachments `{filesystem_id, attach_mode, mount_tag}`; `mount` records how the
        nodes mount the shared filesystem (`{path, tag, fs_type, options}`), so tests can inspect it."""
        params = {
            "cluster_id": cluster_id,
            "name": name,
            "node_count": node_count,
            "platform": platform,
            "preset": preset or "",
            "disk_type": disk_type,
            "disk_size_gib": disk_size_gib,
            "preemptible": bool(preemptible),
            "public_ips": bool(public_ips),
            "reservation_policy": (reservation_policy or "").strip().upper(),
            "reservation_ids": list(reservation_ids or []),
            "gpu_cluster_id": gpu_cluster_id or "",
            "filesystems": list(filesystems or []),
            "mount": mount,
            "labels": clean_labels(labels),
        }
        if k8s_version:  # only when asked: the calls that name none replay as they always did
            params["k8s_version"] = k8s_version
        with self.store.op("create_node_group", params, write=True, timeout_s=timeout_s) as ctx:
            replayed = ctx.replay("node_group", idempotency_key, params)
            if replayed is not None:
                return records.to_record(replayed, ctx.now)
            cluster = ctx.row("cluster", cluster_id)
            _check_node_group_request(ctx, cluster, params)
            ctx.check_name_free("node_group", cluster_id, name)
            stored = {k: v for k, v in params.items() if k not in ("cluster_id", "name")}
            # Its nodes join at the version asked, else at the control plane's of the moment (an upgrade of
            # the control plane alone leaves the group where it is, as Nebius does).
            control_plane = records.data_of(cluster).get("k8s_version", "")
            _check_node_group_version(k8s_version, control_plane)
            stored["k8s_version"] = k8s_version or control_plane
            rid = ctx.insert(
                "node_group",
                name=name,
                scope=cluster_id,
                project_id=cluster["project_id"],
                parent_id=cluster_id,
                region=cluster["region"],
                key=idempotency_key,
                data={**stored, "conditions": []},
                params=params,
                ready_at=records.WAITING_FOR_QUOTA,
            )
            row = ctx.row("node_group", rid)
            scheduling.try_start(ctx.conn, row, ctx.tenant_id, ctx.now, ctx.provisioning_seconds)
            return ctx.fetch("node_group", rid)

    def get_node_group(self, node_group_id: str) -> dict[str, Any]:
        params = {"node_group_id": node_group_id}
        with self.store.op("get_node_group", params, write=False, reconcile=True) as ctx:
            return ctx.fetch("node_group", node_group_id)

    def list_node_groups(self, cluster_id: str) -> list[dict[str, Any]]:
        with self.store.op(
            "list_node_groups", {"cluster_id": cluster_id}, write=False, reconcile=True
        ) as ctx:
            ctx.row("cluster", cluster_id)
            return ctx.list_of("node_group", "parent_id", cluster_id)

    def list_project_node_groups(self, project_id: str) -> list[dict[str, Any]]:
        """Every node group of the project's clusters in one query (what fleet-wide reads batch on)."""
        params = {"project_id": project_id}
        with self.store.op("list_project_node_groups", params, write=False, reconcile=True) as ctx:
            ctx.project_row(project_id)
            return ctx.list_of("node_group", "project_id", project_id)

    def resize_node_group(self, node_group_id: str, node_count: int) -> dict[str, Any]:
        """Change a node group's size in place, as the console or the mk8s API can behind a fleet's back.
        Its instances are released and charged again at the new size (the group waits, PROVISIONING with a
        QuotaFailure condition, when the new size does not fit)."""
        params = {"node_group_id": node_group_id, "node_count": node_count}
        with self.store.op("resize_node_group", params, write=True) as ctx:
            if not _is_count(node_count):
                raise InvalidArgument("node_count must be a non-negative integer")
            row = ctx.row("node_group", node_group_id)
            data = records.data_of(row)
            data["node_count"] = node_count
            return _recharge(ctx, node_group_id, data)

    def edit_node_group_template(
        self,
        node_group_id: str,
        preset: str | None = None,
        preemptible: bool | None = None,
        reservation_policy: str | None = None,
        reservation_ids: list[str] | None = None,
        disk_size_gib: int | None = None,
    ) -> dict[str, Any]:
        """Change a node group's template in place, as the console or the mk8s API can behind a fleet's
        back (a preset, preemptibility, the reservation binding or the boot disk): nothing in the fleet's
        stacks records it, so only a live inventory shows it. Instances are charged again as on a resize."""
        params: dict[str, Any] = {"node_group_id": node_group_id}
        changes: dict[str, Any] = {}
        if preset is not None:
            changes["preset"] = preset
        if preemptible is not None:
            changes["preemptible"] = bool(preemptible)
        if reservation_policy is not None:
            changes["reservation_policy"] = reservation_policy.strip().upper()
        if reservation_ids is not None:
            changes["reservation_ids"] = [str(r) for r in reservation_ids]
        if disk_size_gib is not None:
            if not _is_count(disk_size_gib) or disk_size_gib <= 0:
                raise InvalidArgument("disk_size_gib must be a positive integer")
            changes["disk_size_gib"] = disk_size_gib
        with self.store.op("edit_node_group_template", {**params, **changes}, write=True) as ctx:
            if changes.get("reservation_policy", "") not in ("", "AUTO", "FORBID", "STRICT"):
                raise InvalidArgument("reservation_policy must be one of AUTO, FORBID, STRICT (or empty)")
            row = ctx.row("node_group", node_group_id)
            data = {**records.data_of(row), **changes}
            return _recharge(ctx, node_group_id, data)

    def upgrade_cluster(self, cluster_id: str, k8s_version: str) -> dict[str, Any]:
        """Move the control plane to `k8s_version` in place (the mk8s API's update of
        `control_plane.version`): one minor up at a time, never down, and never past where its node
        groups may follow (none left more than the kubelet's skew behind is checked by the callers)."""
        params = {"cluster_id": cluster_id, "k8s_version": k8s_version}
        with self.store.op("upgrade_cluster", params, write=True) as ctx:
            row = ctx.row("cluster", cluster_id)
            data = records.data_of(row)
            now, wanted = _minor(data.get("k8s_version", "")), _minor(k8s_version)
            if wanted is None:
                raise InvalidArgument(f"k8s_version {k8s_version!r} is not a Kubernetes minor (1.33)")
            if now is not None and (wanted < now or wanted[0] != now[0] or wanted[1] - now[1] > 1):
                raise InvalidArgument(
                    f"the control plane is at {data.get('k8s_version')}: it moves one minor up at a time"
                )
            ctx.set_data(cluster_id, {**data, "k8s_version": k8s_version})
            return ctx.fetch("cluster", cluster_id)

    def upgrade_node_group(self, node_group_id: str, k8s_version: str) -> dict[str, Any]:
        """Move a node group's nodes to `k8s_version` in place (the mk8s API's update of `version`): never
        newer than its cluster's control plane, as the service refuses."""
        params = {"node_group_id": node_group_id, "k8s_version": k8s_version}
        with self.store.op("upgrade_node_group", params, write=True) as ctx:
            row = ctx.row("node_group", node_group_id)
            cluster = ctx.row("cluster", str(row["parent_id"]))
            _check_node_group_version(k8s_version, records.data_of(cluster).get("k8s_version", ""))
            ctx.set_data(node_group_id, {**records.data_of(row), "k8s_version": k8s_version})
            return ctx.fetch("node_group", node_group_id)

    def delete_node_group(self, node_group_id: str, timeout_s: float | None = None) -> None:
        params = {"node_group_id": node_group_id}
        with self.store.op("delete_node_group", params, write=True, timeout_s=timeout_s) as ctx:
            ctx.row("node_group", node_group_id)
            ctx.delete_row(node_group_id)
