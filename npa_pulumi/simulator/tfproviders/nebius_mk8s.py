"""nebius mk8s and Marketplace types: clusters (their real API server's endpoint and CA), node groups
(the simulator's node groups, whose nodes carry nebius.com/node-group-id) and k8s releases (the
cluster's addons, which the cluster's agent materialises)."""

from __future__ import annotations

from typing import Any

import yaml

from npa_pulumi.cloud.errors import CloudError, NotFound
from npa_pulumi.simulator import ids
from npa_pulumi.simulator.records import endpoint_for
from npa_pulumi.simulator.releases import SETTINGS_READ
from npa_pulumi.simulator.simulator import LocalSimulator
from npa_pulumi.simulator.tfproviders.base import CallContext, ProviderError, State
from npa_pulumi.simulator.tfproviders.common import (
    cloud_call,
    get_or_none,
    idempotency_key,
    labels_of,
    no_scheme,
    now_iso,
    simulator,
    size_bytes,
)

CLUSTER = "nebius_mk8s_v1_cluster"
NODE_GROUP = "nebius_mk8s_v1_node_group"
RELEASE = "nebius_applications_v1alpha1_k8s_release"
GIB = 1 << 30


def _endpoints(sim: LocalSimulator, record: dict[str, Any]) -> tuple[str, str]:
    """(host:port, CA PEM) of the cluster's API server: the real one where the local cloud runs API
    servers, else the simulator's reserved name and no CA."""
    if record["state"] == "RUNNING" and sim.kubernetes_api_enabled():
        with cloud_call(f"credentials of cluster {record['id']}"):
            creds = sim.get_cluster_credentials(record["id"])
        return no_scheme(str(creds["server"])), str(creds["ca_pem"])
    return no_scheme(str(record["endpoint"])), ""


def _cluster_state(sim: LocalSimulator, base: State, record: dict[str, Any]) -> State:
    host, ca = _endpoints(sim, record)
    public = str(record["endpoint"]) == endpoint_for(record["id"], record["region"])
    control_plane = dict(base.get("control_plane") or {})
    control_plane["version"] = control_plane.get("version") or record["k8s_version"]
    control_plane["etcd_cluster_size"] = control_plane.get("etcd_cluster_size") or record["etcd_cluster_size"]
    return {
        **base,
        "id": record["id"],
        "name": record["name"],
        "created_at": base.get("created_at") or now_iso(),
        "control_plane": control_plane,
        "status": {
            "state": record["state"],
            "reconciling": record["state"] != "RUNNING",
            "control_plane": {
                "version": record["k8s_version"],
                "etcd_cluster_size": record["etcd_cluster_size"],
                "endpoints": {"public_endpoint": host if public else None, "private_endpoint": host},
                "auth": {"cluster_ca_certificate": ca},
            },
        },
    }


class Cluster:
    def create(self, ctx: CallContext, planned: State) -> State:
        sim = simulator(ctx)
        cp = planned.get("control_plane") or {}
        endpoints = cp.get("endpoints") or {}
        with cloud_call(f"creating cluster {planned.get('name')!r}"):
            record = sim.provision(
                "cluster",
                project_id=planned["parent_id"],
                name=planned.get("name") or "",
                subnet_id=cp["subnet_id"],
                k8s_version=cp.get("version") or "",
                public_endpoint=endpoints.get("public_endpoint") is not None,
                etcd_cluster_size=int(cp.get("etcd_cluster_size") or 3),
                labels=labels_of(planned),
                idempotency_key=idempotency_key(CLUSTER, planned),
            )
        return _cluster_state(sim, planned, record)

    def read(self, ctx: CallContext, state: State) -> State | None:
        sim = simulator(ctx)
        record = get_or_none(lambda: sim.get_cluster(state["id"]))
        return None if record is None else _cluster_state(sim, state, record)

    def update(self, ctx: CallContext, planned: State, prior: State) -> State:
        sim = simulator(ctx)
        with cloud_call(f"updating cluster {prior['id']}"):
            if planned.get("labels") != prior.get("labels"):
                sim.set_labels(prior["id"], labels_of(planned))
            _upgrade_control_plane(sim, planned, prior)
            record = sim.get_cluster(prior["id"])
        return _cluster_state(sim, {**planned, "created_at": prior.get("created_at")}, record)

    def delete(self, ctx: CallContext, state: State) -> None:
        sim = simulator(ctx)
        try:
            sim.delete_cluster(state["id"])
        except NotFound:
            return
        except CloudError as err:
            raise ProviderError(f"deleting cluster {state['id']}: {err.kind}", err.message) from None

    def import_(self, ctx: CallContext, import_id: str) -> State:
        sim = simulator(ctx)
        with cloud_call(f"importing cluster {import_id}"):
            record = sim.get_cluster(import_id)
        public = str(record["endpoint"]) == endpoint_for(record["id"], record["region"])
        base: State = {
            "parent_id": record["project_id"],
            "labels": record["labels"] or None,
            "control_plane": {
                "subnet_id": record["subnet_id"],
                "version": record["k8s_version"],
                "etcd_cluster_size": record["etcd_cluster_size"],
                "endpoints": {"public_endpoint": {} if public else None},
            },
        }
        return _cluster_state(sim, base, record)


def _upgrade_control_plane(sim: LocalSimulator, planned: State, prior: State) -> None:
    """A changed `control_plane.version` upgrades the control plane in place, as the mk8s API does."""
    want = (planned.get("control_plane") or {}).get("version") or ""
    had = (prior.get("control_plane") or {}).get("version") or ""
    if want and want != had:
        sim.upgrade_cluster(prior["id"], want)


def _node_group_version(planned: State) -> dict[str, Any]:
    """The version a create asks for (none: the service's, its control plane's)."""
    version = planned.get("version")
    return {"k8s_version": version} if version else {}


def _upgrade_node_group(sim: LocalSimulator, planned: State, prior: State) -> None:
    """A changed `version` moves the group's nodes in place, as the mk8s API's node-group update does."""
    want, had = planned.get("version") or "", prior.get("version") or ""
    if want and want != had:
        sim.upgrade_node_group(prior["id"], want)


def _node_group_request(planned: State) -> dict[str, Any]:
    template = planned.get("template") or {}
    resources = template.get("resources") or {}
    autoscaling = planned.get("autoscaling") or {}
    count = planned.get("fixed_node_count")
    if count is None:
        count = autoscaling.get("min_node_count") or 0
    disk = template.get("boot_disk") or {}
    policy = template.get("reservation_policy") or {}
    interfaces = template.get("network_interfaces") or []
    filesystems = [
        {
            "filesystem_id": (fs.get("existing_filesystem") or {}).get("id", ""),
            "attach_mode": fs.get("attach_mode") or "READ_WRITE",
            "mount_tag": fs.get("mount_tag") or "",
        }
        for fs in template.get("filesystems") or []
    ]
    return {
        "cluster_id": planned["parent_id"],
        "name": planned.get("name") or "",
        "node_count": int(count),
        "platform": resources.get("platform") or "",
        "preset": resources.get("preset") or "",
        "disk_type": disk.get("type") or "NETWORK_SSD",
        "disk_size_gib": (size_bytes(disk, 128 * GIB) or 0) // GIB,
        "preemptible": template.get("preemptible") is not None,
        "public_ips": any(i.get("public_ip_address") is not None for i in interfaces),
        "reservation_policy": policy.get("policy") or None,
        "reservation_ids": list(policy.get("reservation_ids") or []),
        "gpu_cluster_id": (template.get("gpu_cluster") or {}).get("id") or None,
        "filesystems": filesystems,
        "mount": _cloud_init_mount(template.get("cloud_init_user_data")),
        "labels": labels_of(planned),
    }


def _cloud_init_mount(user_data: Any) -> dict[str, str] | None:
    """The virtiofs mount the nodes' cloud-init sets up (`mounts: [[tag, path, virtiofs, options, ...]]`,
    as upstream's k8s-cloud-init.tftpl writes it), which is what puts the shared filesystem on a node;
    None when the user data mounts none (or is not cloud-config YAML)."""
    if not isinstance(user_data, str) or not user_data.strip():
        return None
    try:
        config = yaml.safe_load(user_data)
    except yaml.YAMLError:
        return None
    mounts = config.get("mounts") if isinstance(config, dict) else None
    for entry in mounts or []:
        if isinstance(entry, list) and len(entry) >= 3 and str(entry[2]) == "virtiofs":
            options = str(entry[3]) if len(entry) > 3 else "defaults"
            return {"tag": str(entry[0]), "path": str(entry[1]), "fs_type": "virtiofs", "options": options}
    return None


def _node_group_state(sim: LocalSimulator, base: State, record: dict[str, Any]) -> State:
    # The service's version of the group, as the provider reads its spec back (an upgrade outside
    # Terraform shows in a refresh).
    version = record.get("version") or base.get("version")
    if not version:
        cluster = get_or_none(lambda: sim.get_cluster(record["cluster_id"]))
        version = cluster["k8s_version"] if cluster else ""
    ready = int(record["ready_node_count"])
    sized: State = {}
    if base.get("fixed_node_count") is not None and not base.get("autoscaling"):
        # The service's spec, as the provider reads it back: a resize outside Terraform shows in a refresh.
        sized["fixed_node_count"] = int(record["target_node_count"])
    return {
        **base,
        **sized,
        "id": record["id"],
        "name": record["name"],
        "created_at": base.get("created_at") or now_iso(),
        "version": version,
        "status": {
            "state": record["state"],
            "version": f"{version}.0-nebius-node.1" if version else "",
            "node_count": ready,
            "target_node_count": int(record["target_node_count"]),
            "ready_node_count": ready,
            "outdated_node_count": 0,
            "reconciling": record["state"] != "RUNNING",
        },
    }


class NodeGroup:
    def create(self, ctx: CallContext, planned: State) -> State:
        sim = simulator(ctx)
        with cloud_call(f"creating node group {planned.get('name')!r}"):
            record = sim.provision(
                "node_group",
                **_node_group_request(planned),
                **_node_group_version(planned),
                idempotency_key=idempotency_key(NODE_GROUP, planned),
            )
        return _node_group_state(sim, planned, record)

    def read(self, ctx: CallContext, state: State) -> State | None:
        sim = simulator(ctx)
        record = get_or_none(lambda: sim.get_node_group(state["id"]))
        return None if record is None else _node_group_state(sim, state, record)

    def update(self, ctx: CallContext, planned: State, prior: State) -> State:
        """Size and the template fields the service changes in place; the rest is kept as planned."""
        sim = simulator(ctx)
        want, had = _node_group_request(planned), _node_group_request(prior)
        group_id = prior["id"]
        with cloud_call(f"updating node group {group_id}"):
            if want["node_count"] != had["node_count"]:
                sim.resize_node_group(group_id, want["node_count"])
            changes = {
                k: want[k]
                for k in ("preset", "preemptible", "reservation_policy", "reservation_ids", "disk_size_gib")
                if want[k] != had[k]
            }
            if changes:
                if "reservation_policy" in changes:
                    changes["reservation_policy"] = changes["reservation_policy"] or ""
                sim.edit_node_group_template(group_id, **changes)
            if planned.get("labels") != prior.get("labels"):
                sim.set_labels(group_id, labels_of(planned))
            _upgrade_node_group(sim, planned, prior)
            record = sim.wait_until_running("node_group", group_id, sim.wait_timeout())
        return _node_group_state(sim, {**planned, "created_at": prior.get("created_at")}, record)

    def delete(self, ctx: CallContext, state: State) -> None:
        sim = simulator(ctx)
        try:
            sim.delete_node_group(state["id"])
        except NotFound:
            return
        except CloudError as err:
            raise ProviderError(f"deleting node group {state['id']}: {err.kind}", err.message) from None

    def import_(self, ctx: CallContext, import_id: str) -> State:
        sim = simulator(ctx)
        with cloud_call(f"importing node group {import_id}"):
            record = sim.get_node_group(import_id)
        template: State = {
            "resources": {"platform": record["platform"], "preset": record["preset"] or None},
            "boot_disk": {"size_gibibytes": record["disk_size_gib"], "type": record["disk_type"]},
            "preemptible": {"on_preemption": None, "priority": None} if record["preemptible"] else None,
            "reservation_policy": (
                {"policy": record["reservation_policy"], "reservation_ids": record["reservation_ids"] or None}
                if record["reservation_policy"]
                else None
            ),
            "gpu_cluster": {"id": record["gpu_cluster_id"]} if record["gpu_cluster_id"] else None,
            "filesystems": [
                {
                    "attach_mode": fs.get("attach_mode"),
                    "mount_tag": fs.get("mount_tag"),
                    "existing_filesystem": {"id": fs.get("filesystem_id"), "size": None},
                }
                for fs in record["filesystems"]
            ]
            or None,
        }
        base: State = {
            "parent_id": record["cluster_id"],
            "labels": record["labels"] or None,
            "fixed_node_count": record["target_node_count"],
            "template": template,
        }
        return _node_group_state(sim, base, record)


# The chart settings a release's product mapping reads (releases.py); the rest of a release's values
# may be secret and never reach the local cloud's database.
_SETTINGS_READ = SETTINGS_READ


def _release_settings(ctx: CallContext, planned: State) -> dict[str, str]:
    sources = [planned.get("set") or {}, ((ctx.config.get("sensitive") or {}).get("set")) or {}]
    settings: dict[str, str] = {}
    for source in sources:
        for key in _SETTINGS_READ:
            if source.get(key) is not None:
                settings[key] = str(source[key])
    return settings


def _release_state(base: State, record: dict[str, Any]) -> State:
    return {
        **base,
        "id": record["id"],
        "created_at": base.get("created_at") or now_iso(),
        "status": {"state": record["state"], "error_message": ""},
    }


class K8sRelease:
    def _install(self, ctx: CallContext, planned: State, release_id: str) -> State:
        sim = simulator(ctx)
        release = {
            "id": release_id,
            "application_name": planned["application_name"],
            "namespace": planned["namespace"],
            "product_slug": planned["product_slug"],
            "settings": _release_settings(ctx, planned),
        }
        with cloud_call(f"installing {planned['product_slug']} on cluster {planned['cluster_id']}"):
            record = sim.install_release(planned["cluster_id"], release)
        return _release_state(planned, record)

    def create(self, ctx: CallContext, planned: State) -> State:
        # The id follows the request's key: a create retried after a crash updates the same release.
        release_id = ids.keyed_id("k8srelease", idempotency_key(RELEASE, planned))
        return self._install(ctx, planned, release_id)

    def read(self, ctx: CallContext, state: State) -> State | None:
        sim = simulator(ctx)
        record = get_or_none(lambda: sim.get_release(state["id"]))
        return None if record is None else _release_state(state, record)

    def update(self, ctx: CallContext, planned: State, prior: State) -> State:
        return self._install(ctx, {**planned, "created_at": prior.get("created_at")}, prior["id"])

    def delete(self, ctx: CallContext, state: State) -> None:
        sim = simulator(ctx)
        try:
            sim.uninstall_release(state["cluster_id"], state["id"])
        except NotFound:
            return
        except CloudError as err:
            raise ProviderError(f"uninstalling release {state['id']}: {err.kind}", err.message) from None

    def import_(self, ctx: CallContext, import_id: str) -> State:
        sim = simulator(ctx)
        with cloud_call(f"importing release {import_id}"):
            record = sim.get_release(import_id)
        cluster = sim.get_cluster(record["cluster_id"])
        base = {k: record[k] for k in ("cluster_id", "application_name", "namespace", "product_slug")}
        return _release_state({**base, "parent_id": cluster["project_id"]}, record)
