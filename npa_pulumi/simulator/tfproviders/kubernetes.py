"""hashicorp/kubernetes (as pinned) on the local cloud: the types upstream k8s-training uses, acting on the
cluster's real API server (kubeapi.py).

* Typed objects (`kubernetes_namespace_v1`, `_service_account_v1`, `_cluster_role_v1`,
  `_cluster_role_binding_v1`, `_role_binding_v1`, `_job_v1`): created, updated and deleted as objects; the
  SDKv2 provider's blocks (`metadata {}`, `spec {}`, `subject {}`...) are lists in Terraform's values and
  become the API's camelCase objects here (`to_api`). Ids as the provider's: `namespace/name`, or `name`
  for cluster-scoped objects; import takes the same id.
* `kubernetes_job_v1` with `wait_for_completion` (the default) waits for the Job's Complete condition
  within `timeouts.create` (default 1m, as the provider's), and fails on its Failed condition.
* `kubernetes_annotations` and `kubernetes_config_map_v1_data` patch an existing object by server-side
  apply under their `field_manager` (default "Terraform"), `force` taking over conflicting fields; delete
  gives the fields back.
* data `kubernetes_resource`: the object as the API returns it (`object`), null when there is none.

What is not modelled: drift in a typed object's spec (read refreshes existence, metadata and labels and
annotations, not the spec)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from npa_pulumi.kube.client import KubeClient, KubeError
from npa_pulumi.simulator.tfproviders.base import CallContext, ProviderError, ProviderHandlers, State
from npa_pulumi.simulator.tfproviders.kubeapi import (
    api_error,
    cached_client,
    delete_in_background,
    parse_duration,
    resource,
    serverless_cluster,
    wait_until,
)

JSON = dict[str, Any]
DEFAULT_FIELD_MANAGER = "Terraform"

# --------------------------------------------------------------------------------- blocks <-> API objects

# Blocks of at most one item: an object in the API, a one-item list in Terraform.
SINGLE_BLOCKS = frozenset(
    {
        "metadata",
        "spec",
        "template",
        "selector",
        "security_context",
        "resources",
        "value_from",
        "field_ref",
        "config_map_key_ref",
        "secret_key_ref",
        "config_map",
        "secret",
        "empty_dir",
        "host_path",
        "persistent_volume_claim",
        "capabilities",
        "role_ref",
        "aggregation_rule",
    }
)
# Maps whose keys are data (never renamed).
MAPS = frozenset({"labels", "annotations", "node_selector", "limits", "requests", "match_labels", "data"})
# Integers the provider keeps as strings (so that 0 is expressible).
INT_STRINGS = frozenset(
    {
        "run_as_user",
        "run_as_group",
        "fs_group",
        "ttl_seconds_after_finished",
        "toleration_seconds",
        "default_mode",
        "mode",
    }
)
# Names the API spells differently from a camelCase of the block name.
API_NAMES = {
    "container": "containers",
    "init_container": "initContainers",
    "volume_mount": "volumeMounts",
    "toleration": "tolerations",
    "volume": "volumes",
    "port": "ports",
    "rule": "rules",
    "subject": "subjects",
    "non_resource_urls": "nonResourceURLs",
    "host_ipc": "hostIPC",
    "host_pid": "hostPID",
    "cluster_role_selectors": "clusterRoleSelectors",
    "match_expressions": "matchExpressions",
}
TF_NAMES = {api: tf for tf, api in API_NAMES.items()}
# Computed fields, by the end of their path in Terraform's tree: filled from the API where the plan left
# them unknown (null).
COMPUTED = (
    ("metadata", "uid"),
    ("metadata", "resource_version"),
    ("metadata", "generation"),
    ("metadata", "name"),
    ("metadata", "namespace"),
    ("spec", "backoff_limit"),
    ("spec", "completions"),
    ("spec", "parallelism"),
    ("spec", "completion_mode"),
    ("template", "metadata", "labels"),
    ("spec", "dns_policy"),
    ("spec", "hostname"),
    ("spec", "node_name"),
    ("spec", "restart_policy"),
    ("spec", "scheduler_name"),
    ("spec", "service_account_name"),
    ("spec", "termination_grace_period_seconds"),
    ("container", "image_pull_policy"),
    ("container", "termination_message_path"),
    ("container", "termination_message_policy"),
    ("init_container", "image_pull_policy"),
    ("init_container", "termination_message_path"),
    ("init_container", "termination_message_policy"),
    ("resources", "limits"),
    ("resources", "requests"),
    ("security_context", "allow_privilege_escalation"),
    ("subject", "api_group"),
    ("subject", "namespace"),
)


def camel(name: str) -> str:
    if name in API_NAMES:
        return API_NAMES[name]
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def snake(name: str) -> str:
    if name in TF_NAMES:
        return TF_NAMES[name]
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def to_api(tree: JSON) -> JSON:
    """A Terraform block's value as the API object it describes (nulls and empty blocks left out)."""
    out: JSON = {}
    for key, value in tree.items():
        if value is None or value == [] or value == {}:
            continue
        if key in MAPS:
            out[camel(key)] = dict(value)
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            items = [to_api(item) for item in value]
            out[camel(key)] = items[0] if key in SINGLE_BLOCKS else items
        elif key in INT_STRINGS:
            out[camel(key)] = int(value)
        else:
            out[camel(key)] = value
    return out


def fill(planned: Any, live: Any, path: tuple[str, ...] = ()) -> Any:
    """`planned` with its unknown computed fields taken from the API's `live` object."""
    if isinstance(planned, dict):
        live_obj = live if isinstance(live, dict) else {}
        out: JSON = {}
        for key, value in planned.items():
            here = (*path, key)
            found = live_obj.get(camel(key))
            if value is None and any(here[-len(c) :] == c for c in COMPUTED):
                out[key] = _from_api_value(key, found)
            elif isinstance(value, list) and value and isinstance(value[0], dict):
                items = [found] if key in SINGLE_BLOCKS else (found if isinstance(found, list) else [])
                out[key] = [
                    fill(item, items[i] if i < len(items) else None, here) for i, item in enumerate(value)
                ]
            else:
                out[key] = value
        return out
    return planned


def _from_api_value(key: str, value: Any) -> Any:
    if value is None:
        return {} if key in MAPS else None
    if key in INT_STRINGS:
        return str(value)
    return value


def from_api(obj: JSON) -> JSON:
    """An API object as Terraform's tree (for import): objects become one-item blocks, lists of objects
    repeated blocks."""
    out: JSON = {}
    for key, value in obj.items():
        name = snake(key)
        if name in MAPS:
            out[name] = dict(value or {})
        elif isinstance(value, dict):
            out[name] = [from_api(value)]
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            out[name] = [from_api(item) for item in value]
        else:
            out[name] = _from_api_value(name, value)
    return out


# --------------------------------------------------------------------------------- metadata

# Labels and annotations the API server or controllers add, which the provider leaves out of state.
SYSTEM_KEY = re.compile(
    r"^(kubernetes\.io/metadata\.name|kubectl\.kubernetes\.io/last-applied-configuration)$"
)


def metadata_of(state: State) -> JSON:
    blocks = state.get("metadata") or []
    if not blocks:
        raise ProviderError("metadata is required", "the resource's `metadata {}` block is missing")
    return dict(blocks[0])


def api_metadata(meta: JSON) -> JSON:
    out = to_api({k: v for k, v in meta.items() if k not in ("uid", "resource_version", "generation")})
    return out


def refreshed_metadata(meta: JSON, live: JSON, configured: JSON | None = None) -> JSON:
    """The state's metadata block from the live object: computed fields, and labels/annotations as the
    API holds them (those the server adds left out)."""
    live_meta = live.get("metadata") or {}
    out = dict(meta)
    out.update(
        uid=live_meta.get("uid"),
        resource_version=live_meta.get("resourceVersion"),
        generation=live_meta.get("generation", 0),
        name=live_meta.get("name"),
    )
    if "namespace" in meta:
        out["namespace"] = live_meta.get("namespace")
    for key in ("labels", "annotations"):
        live_map = {k: v for k, v in (live_meta.get(key) or {}).items() if not SYSTEM_KEY.match(k)}
        if meta.get(key) is None and not live_map:
            out[key] = meta.get(key)
        else:
            out[key] = live_map
    return out


# --------------------------------------------------------------------------------- typed objects


@dataclass(frozen=True)
class Kind:
    api_version: str
    kind: str
    namespaced: bool


class TypedObject:
    """A Kubernetes object the resource owns whole: created, replaced in place and deleted."""

    def __init__(self, kind: Kind, delete_timeout_s: float = 300.0) -> None:
        self.kind = kind
        self.delete_timeout_s = delete_timeout_s

    # what the object is made of, beyond its metadata
    def body(self, state: State) -> JSON:
        return {}

    def state_from(self, obj: JSON) -> State:
        tree = from_api({k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "status")})
        meta = tree["metadata"][0]
        keep: tuple[str, ...] = (
            "name",
            "namespace",
            "labels",
            "annotations",
            "uid",
            "resource_version",
            "generation",
        )
        if not self.kind.namespaced:
            keep = tuple(k for k in keep if k != "namespace")
        tree["metadata"] = [{k: meta.get(k) for k in keep} | {"generate_name": None}]
        return tree

    # ------------------------------------------------------------------ helpers

    def _client(self, ctx: CallContext) -> KubeClient:
        return cached_client(ctx, ctx.provider_config)

    def _path(self, ctx: CallContext, client: KubeClient, name: str, namespace: str | None) -> str:
        api = resource(ctx, client, self.kind.api_version, self.kind.kind)
        return api.path(name, namespace if self.kind.namespaced else None)

    def _object(self, state: State) -> JSON:
        meta = api_metadata(metadata_of(state))
        if self.kind.namespaced:
            meta.setdefault("namespace", "default")
        else:
            meta.pop("namespace", None)
        return {
            "apiVersion": self.kind.api_version,
            "kind": self.kind.kind,
            "metadata": meta,
            **self.body(state),
        }

    def _id(self, live: JSON) -> str:
        meta = live["metadata"]
        return f"{meta['namespace']}/{meta['name']}" if self.kind.namespaced else str(meta["name"])

    def _split_id(self, ident: str) -> tuple[str, str | None]:
        if self.kind.namespaced:
            namespace, sep, name = ident.partition("/")
            if not sep or not namespace or not name:
                raise ProviderError("Invalid id", f"{ident!r}: expected <namespace>/<name>")
            return name, namespace
        return ident, None

    def _result(self, planned: State, live: JSON) -> State:
        state: State = fill(planned, live)
        state["metadata"] = [refreshed_metadata(metadata_of(state), self.as_provider_sees(live))]
        state["id"] = self._id(live)
        return state

    def as_provider_sees(self, live: JSON) -> JSON:
        """The live object less what the real provider leaves out of state for this kind."""
        return live

    # ------------------------------------------------------------------ CRUD

    def create(self, ctx: CallContext, planned: State) -> State:
        client = self._client(ctx)
        obj = self._object(planned)
        api = resource(ctx, client, self.kind.api_version, self.kind.kind)
        namespace = obj["metadata"].get("namespace")
        try:
            live = client.create(api.collection(namespace if self.kind.namespaced else None), obj)
        except KubeError as err:
            raise api_error(f"creating {self.kind.kind} {obj['metadata'].get('name', '')}", err) from None
        live = self.after_create(ctx, client, planned, live)
        return self._result(planned, live)

    def after_create(self, ctx: CallContext, client: KubeClient, planned: State, live: JSON) -> JSON:
        return live

    def read(self, ctx: CallContext, state: State) -> State | None:
        client = self._client(ctx)
        name, namespace = self._split_id(str(state["id"]))
        try:
            live = client.get_or_none(self._path(ctx, client, name, namespace))
        except KubeError as err:
            raise api_error(f"reading {self.kind.kind} {state['id']}", err) from None
        if live is None:
            return None
        out = dict(state)
        out["metadata"] = [refreshed_metadata(metadata_of(state), self.as_provider_sees(live))]
        return out

    def update(self, ctx: CallContext, planned: State, prior: State) -> State:
        client = self._client(ctx)
        name, namespace = self._split_id(str(prior["id"]))
        path = self._path(ctx, client, name, namespace)
        try:
            live = client.get(path)
            desired = self._object(planned)
            replaced = self.merge_for_update(live, desired)
            live = client.request("PUT", path, replaced)
        except KubeError as err:
            raise api_error(f"updating {self.kind.kind} {prior['id']}", err) from None
        return self._result(planned, live)

    def merge_for_update(self, live: JSON, desired: JSON) -> JSON:
        """The object to PUT: what Terraform owns from `desired`, the rest (status, server fields) as is."""
        meta = dict(live["metadata"])
        for key in ("labels", "annotations"):
            system = {k: v for k, v in (meta.get(key) or {}).items() if SYSTEM_KEY.match(k)}
            meta[key] = {**system, **(desired["metadata"].get(key) or {})}
        return {**live, **{k: v for k, v in desired.items() if k != "metadata"}, "metadata": meta}

    def delete(self, ctx: CallContext, state: State) -> None:
        client = self._client(ctx)
        name, namespace = self._split_id(str(state["id"]))
        path = self._path(ctx, client, name, namespace)
        if not delete_in_background(client, path, f"{self.kind.kind} {state['id']}"):
            return None
        timeouts = state.get("timeouts") or {}
        timeout_s = parse_duration(
            timeouts.get("delete") if isinstance(timeouts, dict) else None, self.delete_timeout_s
        )
        wait_until(
            lambda: client.get_or_none(path) is None,
            timeout_s,
            f"{self.kind.kind} {state['id']} to be deleted",
        )
        return None

    def import_(self, ctx: CallContext, import_id: str) -> State:
        client = self._client(ctx)
        name, namespace = self._split_id(import_id)
        try:
            live = client.get_or_none(self._path(ctx, client, name, namespace))
        except KubeError as err:
            raise api_error(f"importing {self.kind.kind} {import_id}", err) from None
        if live is None:
            raise ProviderError("Cannot import non-existent remote object", f"{self.kind.kind} {import_id}")
        state = self.state_from(self.as_provider_sees(live))
        state["id"] = self._id(live)
        return state


class Namespace(TypedObject):
    def __init__(self) -> None:
        super().__init__(Kind("v1", "Namespace", namespaced=False))

    def after_create(self, ctx: CallContext, client: KubeClient, planned: State, live: JSON) -> JSON:
        if planned.get("wait_for_default_service_account"):
            name = live["metadata"]["name"]
            path = f"/api/v1/namespaces/{name}/serviceaccounts/default"
            wait_until(
                lambda: client.get_or_none(path) is not None,
                60.0,
                f"namespace {name}'s default service account",
            )
        return live


class ServiceAccount(TypedObject):
    def __init__(self) -> None:
        super().__init__(Kind("v1", "ServiceAccount", namespaced=True))

    def body(self, state: State) -> JSON:
        out: JSON = {}
        if state.get("automount_service_account_token") is not None:
            out["automountServiceAccountToken"] = state["automount_service_account_token"]
        if state.get("image_pull_secret"):
            out["imagePullSecrets"] = [{"name": s["name"]} for s in state["image_pull_secret"]]
        if state.get("secret"):
            out["secrets"] = [{"name": s["name"]} for s in state["secret"]]
        return out

    def _result(self, planned: State, live: JSON) -> State:
        state = super()._result(planned, live)
        if state.get("automount_service_account_token") is None:
            state["automount_service_account_token"] = bool(live.get("automountServiceAccountToken", True))
        state["default_secret_name"] = ""  # no token Secrets since Kubernetes 1.24
        return state

    def state_from(self, obj: JSON) -> State:
        state = super().state_from({k: v for k, v in obj.items() if k not in ("secrets", "imagePullSecrets")})
        state["image_pull_secret"] = [{"name": s["name"]} for s in obj.get("imagePullSecrets") or []]
        state["secret"] = [{"name": s["name"]} for s in obj.get("secrets") or []]
        state["automount_service_account_token"] = bool(obj.get("automountServiceAccountToken", True))
        state["default_secret_name"] = ""
        return state


class ClusterRole(TypedObject):
    def __init__(self) -> None:
        super().__init__(Kind("rbac.authorization.k8s.io/v1", "ClusterRole", namespaced=False))

    def body(self, state: State) -> JSON:
        out: JSON = {"rules": [to_api(rule) for rule in state.get("rule") or []]}
        if state.get("aggregation_rule"):
            out["aggregationRule"] = to_api(state["aggregation_rule"][0])
        return out


def _subject(subject: JSON) -> JSON:
    """A binding's subject with the provider's defaults: the RBAC group for users and groups, none for a
    service account."""
    out = to_api(subject)
    if subject.get("api_group") is None:
        out["apiGroup"] = "" if subject.get("kind") == "ServiceAccount" else "rbac.authorization.k8s.io"
    if not out.get("apiGroup"):
        out.pop("apiGroup", None)
    return out


class Binding(TypedObject):
    def body(self, state: State) -> JSON:
        role_ref = (state.get("role_ref") or [{}])[0]
        return {"roleRef": to_api(role_ref), "subjects": [_subject(s) for s in state.get("subject") or []]}

    def _result(self, planned: State, live: JSON) -> State:
        state = super()._result(planned, live)
        subjects = live.get("subjects") or []
        for i, subject in enumerate(state.get("subject") or []):
            found = subjects[i] if i < len(subjects) else {}
            subject["api_group"] = (
                found.get("apiGroup", "") if subject.get("api_group") is None else subject["api_group"]
            )
            subject["namespace"] = (
                found.get("namespace", "") if subject.get("namespace") is None else subject["namespace"]
            )
        return state


_JOB_CONTROLLER_LABELS = frozenset(
    {"controller-uid", "job-name", "batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name"}
)


class Job(TypedObject):
    """kubernetes_job_v1: a Job's pod template cannot change, so a new spec is a new Job (deleted and
    created again under its name)."""

    def __init__(self) -> None:
        super().__init__(Kind("batch/v1", "Job", namespaced=True))

    def body(self, state: State) -> JSON:
        spec = to_api((state.get("spec") or [{}])[0])
        return {"spec": spec}

    def after_create(self, ctx: CallContext, client: KubeClient, planned: State, live: JSON) -> JSON:
        if planned.get("wait_for_completion") is False:
            return live
        timeouts = planned.get("timeouts") or {}
        timeout_s = parse_duration(timeouts.get("create") if isinstance(timeouts, dict) else None, 60.0)
        path = self._path(ctx, client, live["metadata"]["name"], live["metadata"]["namespace"])
        return wait_for_job(client, path, timeout_s)

    def as_provider_sees(self, live: JSON) -> JSON:
        # The Job controller labels a Job it selects for; the real provider drops those labels from state
        # unless the spec chose its selector by hand (manual_selector), or every apply would show a diff.
        if (live.get("spec") or {}).get("manualSelector"):
            return live
        meta = dict(live.get("metadata") or {})
        labels = meta.get("labels") or {}
        meta["labels"] = {k: v for k, v in labels.items() if k not in _JOB_CONTROLLER_LABELS}
        return {**live, "metadata": meta}

    def _result(self, planned: State, live: JSON) -> State:
        state = super()._result(planned, live)
        if state.get("wait_for_completion") is None:
            state["wait_for_completion"] = True
        return state

    def update(self, ctx: CallContext, planned: State, prior: State) -> State:
        if to_api((planned.get("spec") or [{}])[0]) != to_api((prior.get("spec") or [{}])[0]):
            self.delete(ctx, prior)
            return self.create(ctx, planned)
        return super().update(ctx, planned, prior)

    def merge_for_update(self, live: JSON, desired: JSON) -> JSON:
        merged = super().merge_for_update(live, desired)
        merged["spec"] = live["spec"]  # only metadata changes in place
        return merged


def wait_for_job(client: KubeClient, path: str, timeout_s: float) -> JSON:
    """Until the Job is Complete (its object then) or Failed (an error), as the provider's
    wait_for_completion."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            live = client.get(path)
        except KubeError as err:
            raise api_error(f"waiting for job {path}", err) from None
        for condition in (live.get("status") or {}).get("conditions") or []:
            if condition.get("status") != "True":
                continue
            if condition.get("type") == "Complete":
                return live
            if condition.get("type") == "Failed":
                raise ProviderError(
                    f"job {live['metadata']['namespace']}/{live['metadata']['name']} failed",
                    f"{condition.get('reason', '')}: {condition.get('message', '')}",
                )
        if time.monotonic() >= deadline:
            raise ProviderError(
                f"job {path.rsplit('/', 1)[-1]} did not complete in {timeout_s:g}s",
                "raise timeouts.create, or set wait_for_completion = false",
            )
        time.sleep(1.0)


# --------------------------------------------------------------------------------- server-side apply patches


class FieldPatch:
    """A resource that owns some fields of an object that exists already (kubernetes_annotations,
    kubernetes_config_map_v1_data): server-side apply under its field manager."""

    def target(self, state: State) -> tuple[str, str]:
        raise NotImplementedError

    def patch(self, state: State) -> JSON:
        raise NotImplementedError

    def owned(self, state: State, live: JSON) -> State:
        """The state's owned fields as the live object holds them (for read)."""
        raise NotImplementedError

    def _client(self, ctx: CallContext) -> KubeClient:
        return cached_client(ctx, ctx.provider_config)

    def _path(self, ctx: CallContext, client: KubeClient, state: State) -> str:
        api_version, kind = self.target(state)
        meta = metadata_of(state)
        api = resource(ctx, client, api_version, kind)
        return api.path(str(meta["name"]), meta.get("namespace") if api.namespaced else None)

    def _apply(self, ctx: CallContext, state: State, body: JSON) -> JSON:
        client = self._client(ctx)
        _api_version, kind = self.target(state)
        meta = metadata_of(state)
        path = self._path(ctx, client, state)
        try:
            if client.get_or_none(path) is None:
                raise ProviderError(
                    f"The {kind} {meta['name']!r} does not exist",
                    "this resource manages fields of an object that exists already; create it first",
                )
            manager = state.get("field_manager") or DEFAULT_FIELD_MANAGER
            force = "true" if state.get("force") else "false"
            import urllib.parse

            query = urllib.parse.urlencode({"fieldManager": manager, "force": force})
            return client.request("PATCH", f"{path}?{query}", body, "application/apply-patch+yaml")
        except KubeError as err:
            if err.status == 409:
                raise ProviderError(
                    f"Field manager conflict on {kind} {meta['name']}",
                    f"{err}. Another manager owns these fields: set force = true to take them over",
                ) from None
            raise api_error(f"patching {kind} {meta['name']}", err) from None

    def _base(self, state: State) -> JSON:
        api_version, kind = self.target(state)
        meta = metadata_of(state)
        out: JSON = {"apiVersion": api_version, "kind": kind, "metadata": {"name": meta["name"]}}
        if meta.get("namespace"):
            out["metadata"]["namespace"] = meta["namespace"]
        return out

    def _state(self, planned: State) -> State:
        api_version, kind = self.target(planned)
        meta = metadata_of(planned)
        ident = f"apiVersion={api_version},kind={kind},"
        ident += f"namespace={meta['namespace']}," if meta.get("namespace") else ""
        ident += f"name={meta['name']}"
        state = dict(planned)
        state["id"] = ident
        if state.get("field_manager") is None:
            state["field_manager"] = DEFAULT_FIELD_MANAGER
        return state

    def create(self, ctx: CallContext, planned: State) -> State:
        if serverless_cluster(ctx.provider_config) is None:  # else: recorded in Terraform's state only
            self._apply(ctx, planned, self.patch(planned))
        return self._state(planned)

    def update(self, ctx: CallContext, planned: State, prior: State) -> State:
        if serverless_cluster(ctx.provider_config) is None:
            self._apply(ctx, planned, self.patch(planned))
        return self._state(planned)

    def read(self, ctx: CallContext, state: State) -> State | None:
        if serverless_cluster(ctx.provider_config) is not None:
            return state
        client = self._client(ctx)
        try:
            live = client.get_or_none(self._path(ctx, client, state))
        except KubeError as err:
            raise api_error(f"reading {state.get('id')}", err) from None
        return None if live is None else self.owned(state, live)

    def delete(self, ctx: CallContext, state: State) -> None:
        if serverless_cluster(ctx.provider_config) is not None:
            return None
        client = self._client(ctx)
        try:
            if client.get_or_none(self._path(ctx, client, state)) is None:
                return None
        except KubeError as err:
            raise api_error(f"reading {state.get('id')}", err) from None
        # An apply with none of the fields hands them back: the API removes what only this manager owned.
        self._apply(ctx, {**state, "force": True}, self._base(state))
        return None

    def import_(self, ctx: CallContext, import_id: str) -> State:
        raise ProviderError(
            "Import not supported",
            "this resource does not support import: creating it is equivalent to importing it",
        )


class Annotations(FieldPatch):
    def target(self, state: State) -> tuple[str, str]:
        return str(state["api_version"]), str(state["kind"])

    def patch(self, state: State) -> JSON:
        if state.get("annotations") is None and state.get("template_annotations") is None:
            raise ProviderError(
                "Missing annotations", "at least one of annotations or template_annotations is required"
            )
        body = self._base(state)
        if state.get("annotations") is not None:
            body["metadata"]["annotations"] = dict(state["annotations"])
        if state.get("template_annotations") is not None:
            body["spec"] = {"template": {"metadata": {"annotations": dict(state["template_annotations"])}}}
        return body

    def owned(self, state: State, live: JSON) -> State:
        out = dict(state)
        current = (live.get("metadata") or {}).get("annotations") or {}
        if state.get("annotations") is not None:
            out["annotations"] = {k: current[k] for k in state["annotations"] if k in current}
        template = ((((live.get("spec") or {}).get("template") or {}).get("metadata")) or {}).get(
            "annotations"
        ) or {}
        if state.get("template_annotations") is not None:
            out["template_annotations"] = {
                k: template[k] for k in state["template_annotations"] if k in template
            }
        return out


class ConfigMapData(FieldPatch):
    def target(self, state: State) -> tuple[str, str]:
        return "v1", "ConfigMap"

    def patch(self, state: State) -> JSON:
        return {**self._base(state), "data": dict(state.get("data") or {})}

    def owned(self, state: State, live: JSON) -> State:
        current = live.get("data") or {}
        return {**state, "data": {k: current[k] for k in state.get("data") or {} if k in current}}


# --------------------------------------------------------------------------------- data sources


class ResourceData:
    """data "kubernetes_resource": any object by apiVersion, kind and metadata; `object` is null when it does
    not exist."""

    def read_data(self, ctx: CallContext, config: State) -> State:
        client = cached_client(ctx, ctx.provider_config)
        meta = metadata_of(config)
        api = resource(ctx, client, str(config["api_version"]), str(config["kind"]))
        try:
            live = client.get_or_none(
                api.path(str(meta["name"]), meta.get("namespace") if api.namespaced else None)
            )
        except KubeError as err:
            raise api_error(f"reading {config['kind']} {meta['name']}", err) from None
        if live is not None:
            live = {k: v for k, v in live.items() if k != "metadata"} | {
                "metadata": {k: v for k, v in live["metadata"].items() if k != "managedFields"}
            }
        return {**config, "object": live}


HANDLERS = ProviderHandlers(
    resources={
        "kubernetes_namespace_v1": Namespace(),
        "kubernetes_service_account_v1": ServiceAccount(),
        "kubernetes_cluster_role_v1": ClusterRole(),
        "kubernetes_cluster_role_binding_v1": Binding(
            Kind("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", namespaced=False)
        ),
        "kubernetes_role_binding_v1": Binding(
            Kind("rbac.authorization.k8s.io/v1", "RoleBinding", namespaced=True)
        ),
        "kubernetes_job_v1": Job(),
        "kubernetes_annotations": Annotations(),
        "kubernetes_config_map_v1_data": ConfigMapData(),
    },
    data_sources={"kubernetes_resource": ResourceData()},
)
