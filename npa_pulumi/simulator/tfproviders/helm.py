"""hashicorp/helm (as pinned) on the local cloud: `helm_release`, against the cluster's real API server
(kubeapi.py, from the provider's `kubernetes = {...}`).

No chart can be fetched (nothing outside the machine is reachable) and no chart is rendered. A release is
recorded in the cluster as Helm records it, a `sh.helm.release.v1.<name>.v<revision>` Secret (type
helm.sh/release.v1, its `release` the base64 of the gzipped release JSON, labels name/owner/status/
version), so `helm list` and `helm get values` see it; the values are merged as Helm merges them (`values`
documents in order, then `set`, `set_list`, `set_sensitive`). `create_namespace` creates the namespace; a
name in use fails unless `replace`. A local chart directory's Chart.yaml gives the chart's name, version
and appVersion.

What the health gate reads of a real release is materialised by the cluster's agent from the cluster's
addons, so the release tells the local cloud what it installed (`CHART_ADDONS`):

* `gpu-operator` -> addons.gpu_driver = "operator" (the operator's DaemonSets, ClusterPolicy, labels);
* `csi-mounted-fs-path` -> addons.filestore = true (the CSI driver and its StorageClass).

Other charts (`dra-driver-nvidia-gpu`, nccl-test's local chart) are recorded only. Uninstalling removes the
release's Secrets and its addons."""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from npa_pulumi.kube.client import KubeClient, KubeError
from npa_pulumi.simulator.tfproviders.base import CallContext, ProviderError, ProviderHandlers, State
from npa_pulumi.simulator.tfproviders.kubeapi import api_error, cached_client, serverless_cluster, wait_until

JSON = dict[str, Any]
CLOUD_DIR_ENV = "NPA_LOCAL_CLOUD_DIR"
SENSITIVE = "(sensitive value)"
CHART_ADDONS: dict[str, JSON] = {
    "gpu-operator": {"gpu_driver": "operator"},
    "csi-mounted-fs-path": {"filestore": True},
}
# What a chart's install leaves that the module reads right after it (upstream annotates the CSI chart's
# StorageClass as the default): a release with `wait` (the default) returns once these exist, as Helm's wait
# returns once the chart's resources are ready.
CHART_READY: dict[str, tuple[str, ...]] = {
    "csi-mounted-fs-path": ("/apis/storage.k8s.io/v1/storageclasses/csi-mounted-fs-path-sc",),
}
READY_TIMEOUT_S = 300.0
# The provider's documented defaults for the arguments it computes.
DEFAULTS: JSON = {
    "namespace": "default",
    "atomic": False,
    "cleanup_on_fail": False,
    "create_namespace": False,
    "dependency_update": False,
    "disable_crd_hooks": False,
    "disable_openapi_validation": False,
    "disable_webhooks": False,
    "force_update": False,
    "lint": False,
    "max_history": 0,
    "pass_credentials": False,
    "recreate_pods": False,
    "render_subchart_notes": True,
    "replace": False,
    "reset_values": False,
    "reuse_values": False,
    "skip_crds": False,
    "timeout": 300,
    "upgrade_install": False,
    "verify": False,
    "wait": True,
    "wait_for_jobs": False,
    "description": "",
}


# --------------------------------------------------------------------------------- values


def _split_key(name: str) -> list[str]:
    """A `--set` name's path: dots separate, a backslash escapes a dot."""
    parts, current, escaped = [], "", False
    for char in name:
        if escaped:
            current += char
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ".":
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def _typed(value: str | None, kind: str | None) -> Any:
    """`--set`'s typing: "string" keeps text; otherwise true/false, null and integers are typed."""
    if value is None:
        return None
    if kind == "string":
        return value
    if value in ("true", "false"):
        return value == "true"
    if value == "null":
        return None
    if re.fullmatch(r"-?(0|[1-9][0-9]*)", value):
        return int(value)
    return value


def _put(values: JSON, name: str, value: Any) -> None:
    node = values
    *parents, leaf = _split_key(name)
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[leaf] = value


def _merge(base: JSON, overlay: JSON) -> JSON:
    out = dict(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def merged_values(state: State, cloak: bool = False) -> JSON:
    """The release's values: `values` documents merged in order, then set, set_list and set_sensitive
    (cloaked when `cloak`: what the provider shows in metadata.values)."""
    values: JSON = {}
    for index, document in enumerate(state.get("values") or []):
        try:
            loaded = yaml.safe_load(document or "") or {}
        except yaml.YAMLError as err:
            raise ProviderError("failed parsing values", f"values[{index}]: {err}") from None
        if not isinstance(loaded, dict):
            raise ProviderError("failed parsing values", f"values[{index}] is not a YAML mapping")
        values = _merge(values, loaded)
    for item in state.get("set") or []:
        _put(values, item["name"], _typed(item.get("value"), item.get("type")))
    for item in state.get("set_list") or []:
        _put(values, item["name"], [_typed(v, None) for v in item.get("value") or []])
    for item in state.get("set_sensitive") or []:
        _put(values, item["name"], SENSITIVE if cloak else _typed(item.get("value"), item.get("type")))
    return values


# --------------------------------------------------------------------------------- charts


def chart_metadata(state: State) -> JSON:
    """The chart's name, version and appVersion: a local chart's Chart.yaml, else from the arguments."""
    chart = str(state["chart"])
    local = Path(chart)
    if local.is_dir() and (local / "Chart.yaml").is_file():
        meta = yaml.safe_load((local / "Chart.yaml").read_text()) or {}
        return {
            "name": str(meta.get("name") or local.name),
            "version": str(meta.get("version") or ""),
            "appVersion": str(meta.get("appVersion") or ""),
        }
    name = chart.rstrip("/").rsplit("/", 1)[-1]
    name = re.sub(r"-\d+\.\d+\.\d+.*\.tgz$", "", name)
    return {"name": name, "version": str(state.get("version") or ""), "appVersion": ""}


# --------------------------------------------------------------------------------- the release Secret


def _secrets_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/secrets"


def release_secrets(client: KubeClient, namespace: str, name: str) -> list[JSON]:
    """The release's revisions, oldest first."""
    found = client.list(_secrets_path(namespace), f"owner=helm,name={name}")
    return sorted(found, key=lambda s: int((s["metadata"].get("labels") or {}).get("version", "0")))


def decode_release(secret: JSON) -> JSON:
    raw = base64.b64decode(base64.b64decode(secret["data"]["release"]))
    release: JSON = json.loads(gzip.decompress(raw))
    return release


def encode_release(release: JSON) -> str:
    """Helm's storage encoding (base64 of gzipped JSON), base64 again as a Secret's data."""
    helm_bytes = base64.b64encode(gzip.compress(json.dumps(release).encode()))
    return base64.b64encode(helm_bytes).decode()


def _release_secret(release: JSON) -> JSON:
    name, namespace, revision = release["name"], release["namespace"], release["version"]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "helm.sh/release.v1",
        "metadata": {
            "name": f"sh.helm.release.v1.{name}.v{revision}",
            "namespace": namespace,
            "labels": {
                "name": name,
                "owner": "helm",
                "status": release["info"]["status"],
                "version": str(revision),
            },
        },
        "data": {"release": encode_release(release)},
    }


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --------------------------------------------------------------------------------- telling the local cloud


def cluster_of(server: str) -> str | None:
    """The local cluster whose API server is `server` (its access.json), None when it is not one."""
    cloud_dir = os.environ.get(CLOUD_DIR_ENV)
    if not cloud_dir:
        return None
    from npa_pulumi.simulator.kube import controlplane

    root = controlplane.kube_root(Path(cloud_dir))
    for home in sorted(root.iterdir()) if root.is_dir() else []:
        access = controlplane.read_access(Path(cloud_dir), home.name)
        if access is not None and access.server.rstrip("/") == server.rstrip("/"):
            return home.name
    return None


def tell_cloud(server: str, chart: str, installed: bool, cluster_id: str | None = None) -> None:
    """Record in the local cloud what the chart installs (or no longer does), for the cluster's agent."""
    addons = CHART_ADDONS.get(chart)
    if not addons:
        return
    cluster_id = cluster_id or cluster_of(server)
    if cluster_id is None:
        print(f"helm: {server} is not a local cluster: chart {chart} recorded only", file=sys.stderr)
        return
    changes = dict(addons) if installed else dict.fromkeys(addons)
    _local_cloud().merge_cluster_addons(cluster_id, changes)


def _local_cloud() -> Any:
    from npa_pulumi.simulator.simulator import LocalSimulator

    return LocalSimulator(Path(os.environ[CLOUD_DIR_ENV]), auto_init=False)


def _release(name: str, namespace: str, chart: JSON, state: State, revision: int, first: str) -> JSON:
    """A release record as Helm keeps it (its Secret's payload)."""
    return {
        "name": name,
        "namespace": namespace,
        "version": revision,
        "info": {
            "first_deployed": first,
            "last_deployed": _now(),
            "deleted": "",
            "description": state.get("description")
            or ("Install complete" if revision == 1 else "Upgrade complete"),
            "status": "deployed",
            "notes": "",
        },
        "chart": {"metadata": {**chart, "apiVersion": "v2"}},
        "config": merged_values(state),
        "manifest": "",
    }


# --------------------------------------------------------------------------------- the resource


class Release:
    def _client(self, ctx: CallContext) -> KubeClient:
        return cached_client(ctx, ctx.provider_config.get("kubernetes") or {})

    def _serverless(self, ctx: CallContext) -> str | None:
        return serverless_cluster(ctx.provider_config.get("kubernetes") or {})

    def _install(self, ctx: CallContext, planned: State, prior: JSON | None) -> State:
        state = {k: (DEFAULTS[k] if v is None and k in DEFAULTS else v) for k, v in planned.items()}
        name, namespace = str(state["name"]), str(state["namespace"])
        chart = chart_metadata(state)
        cluster_id = self._serverless(ctx)
        if cluster_id is not None:
            tell_cloud("", chart["name"], installed=True, cluster_id=cluster_id)
            revision = int(((prior or {}).get("metadata") or {}).get("revision") or 0) + 1
            return self._state(state, _release(name, namespace, chart, state, revision, _now()))
        client = self._client(ctx)
        try:
            self._ensure_namespace(client, namespace, bool(state.get("create_namespace")))
            history = release_secrets(client, namespace, name)
            if prior is None and history and not state.get("replace"):
                raise ProviderError(
                    "cannot re-use a name that is still in use", f"release {namespace}/{name} exists already"
                )
            revision = (
                int((history[-1]["metadata"]["labels"] or {}).get("version", "0")) + 1 if history else 1
            )
            first = decode_release(history[0])["info"]["first_deployed"] if history else _now()
            release = _release(name, namespace, chart, state, revision, first)
            for old in history:  # the earlier revisions are superseded, as Helm marks them
                if (old["metadata"].get("labels") or {}).get("status") == "deployed":
                    labels = {**old["metadata"]["labels"], "status": "superseded"}
                    client.merge_patch(
                        f"{_secrets_path(namespace)}/{old['metadata']['name']}",
                        {"metadata": {"labels": labels}},
                    )
            client.create(_secrets_path(namespace), _release_secret(release))
        except KubeError as err:
            raise api_error(f"installing release {namespace}/{name}", err) from None
        tell_cloud(client.server, chart["name"], installed=True)
        if state.get("wait", DEFAULTS["wait"]) and CHART_READY.get(chart["name"]):
            paths = CHART_READY[chart["name"]]
            timeout_s = float(state.get("timeout") or READY_TIMEOUT_S)
            what = f"what chart {chart['name']} installs ({', '.join(paths)})"
            wait_until(lambda: all(client.get_or_none(p) is not None for p in paths), timeout_s, what)
        return self._state(state, release)

    @staticmethod
    def _ensure_namespace(client: KubeClient, namespace: str, create: bool) -> None:
        if client.get_or_none(f"/api/v1/namespaces/{namespace}") is not None:
            return
        if not create:
            raise ProviderError(
                f'namespaces "{namespace}" not found', "set create_namespace = true, or create it first"
            )
        client.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )

    @staticmethod
    def _state(state: State, release: JSON) -> State:
        chart = release["chart"]["metadata"]
        out = dict(state)
        out.update(
            id=release["name"],
            status=release["info"]["status"],
            version=state.get("version") or chart["version"],
            manifest=None,
            metadata={
                "name": release["name"],
                "namespace": release["namespace"],
                "revision": release["version"],
                "chart": chart["name"],
                "version": chart["version"],
                "app_version": chart["appVersion"],
                "values": json.dumps(merged_values(state, cloak=True), sort_keys=True),
                "first_deployed": _epoch(release["info"]["first_deployed"]),
                "last_deployed": _epoch(release["info"]["last_deployed"]),
                "notes": release["info"]["notes"],
            },
        )
        return out

    def create(self, ctx: CallContext, planned: State) -> State:
        return self._install(ctx, planned, None)

    def update(self, ctx: CallContext, planned: State, prior: State) -> State:
        return self._install(ctx, planned, prior)

    def read(self, ctx: CallContext, state: State) -> State | None:
        if self._serverless(ctx) is not None:
            return state  # recorded in Terraform's state only: nothing else to read it from
        client = self._client(ctx)
        namespace = str(state.get("namespace") or "default")
        try:
            history = release_secrets(client, namespace, str(state["name"]))
        except KubeError as err:
            raise api_error(f"reading release {namespace}/{state['name']}", err) from None
        if not history:
            return None
        latest = decode_release(history[-1])
        return {**state, "status": latest["info"]["status"]}

    def delete(self, ctx: CallContext, state: State) -> None:
        chart = (state.get("metadata") or {}).get("chart") or chart_metadata(state)["name"]
        cluster_id = self._serverless(ctx)
        if cluster_id is not None:
            tell_cloud("", str(chart), installed=False, cluster_id=cluster_id)
            return None
        client = self._client(ctx)
        namespace, name = str(state.get("namespace") or "default"), str(state["name"])
        try:
            for secret in release_secrets(client, namespace, name):
                client.delete(f"{_secrets_path(namespace)}/{secret['metadata']['name']}")
        except KubeError as err:
            raise api_error(f"uninstalling release {namespace}/{name}", err) from None
        tell_cloud(client.server, str(chart), installed=False)
        return None

    def import_(self, ctx: CallContext, import_id: str) -> State:
        namespace, sep, name = import_id.partition("/")
        if not sep or not namespace or not name:
            raise ProviderError("Invalid import id", f"{import_id!r}: expected <namespace>/<name>")
        client = self._client(ctx)
        try:
            history = release_secrets(client, namespace, name)
        except KubeError as err:
            raise api_error(f"importing release {import_id}", err) from None
        if not history:
            raise ProviderError("Cannot import non-existent release", import_id)
        release = decode_release(history[-1])
        chart = release["chart"]["metadata"]
        state: State = {
            **DEFAULTS,
            "name": name,
            "namespace": namespace,
            "chart": chart["name"],
            "version": chart["version"],
        }
        state["values"] = (
            [yaml.safe_dump(release.get("config") or {}, sort_keys=True)] if release.get("config") else None
        )
        return self._state(state, release)


def _epoch(timestamp: str) -> int:
    return int(dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp())


HANDLERS = ProviderHandlers(resources={"helm_release": Release()})
