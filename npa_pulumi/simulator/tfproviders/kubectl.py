"""gavinbunney/kubectl (as pinned) on the local cloud: `kubectl_manifest` and data `kubectl_file_documents`,
against the cluster's real API server (kubeapi.py).

* data `kubectl_file_documents` splits a multi-document YAML: `documents` (each document's text, empty
  ones dropped) and `manifests` (keyed by the provider's self link,
  `/apis/<group>/<version>[/namespaces/<ns>]/<lower-case kind>s/<name>`, `/api/v1/...` for the core group;
  a repeated key is an error, as the provider's).
* `kubectl_manifest` applies its one document by server-side apply under `field_manager` (default
  "kubectl"; `force_conflicts` takes conflicting fields over), resolving the kind's URL through the API's
  discovery (CRDs included). `override_namespace` replaces the document's namespace. `wait_for_rollout`
  (default true) waits for a Deployment's or DaemonSet's rollout; `wait` (delete) waits for the object to
  be gone. A changed kind, name or namespace is a new object: the old one is deleted. `apply_only` leaves
  the object behind on destroy. Import: `apiVersion//kind//name[//namespace]`.

Unlike the provider's default (client-side apply with a last-applied annotation), every apply is
server-side: the API server computes the merge either way, and server-side apply is what the provider
does with `server_side_apply = true`."""

from __future__ import annotations

import hashlib
import json
import re
import time
import urllib.parse
from typing import Any

import yaml

from npa_pulumi.kube.client import KubeClient, KubeError
from npa_pulumi.simulator.tfproviders.base import CallContext, ProviderError, ProviderHandlers, State
from npa_pulumi.simulator.tfproviders.kubeapi import (
    ApiResource,
    api_error,
    cached_client,
    delete_in_background,
    resource,
    wait_until,
)

JSON = dict[str, Any]
DEFAULT_FIELD_MANAGER = "kubectl"
ROLLOUT_TIMEOUT_S = 600.0
DELETE_TIMEOUT_S = 300.0
_SEPARATOR = re.compile(r"^---[ \t]*(#.*)?$", re.MULTILINE)


def split_documents(content: str) -> list[str]:
    """The YAML documents of `content`, each as written (comments and blank documents dropped)."""
    documents = []
    for part in _SEPARATOR.split(content):
        if part is None:
            continue
        meaningful = [
            line for line in part.splitlines() if line.strip() and not line.lstrip().startswith("#")
        ]
        if meaningful:
            documents.append(part.strip("\n"))
    return documents


def parse(document: str) -> JSON:
    try:
        obj = yaml.safe_load(document)
    except yaml.YAMLError as err:
        raise ProviderError("failed to parse yaml", str(err)) from None
    if not isinstance(obj, dict):
        raise ProviderError("failed to parse yaml", "the document is not a YAML mapping")
    for field in ("apiVersion", "kind"):
        if not obj.get(field):
            raise ProviderError("failed to parse yaml", f"the document has no {field}")
    if not (obj.get("metadata") or {}).get("name"):
        raise ProviderError("failed to parse yaml", "the document has no metadata.name")
    return obj


def self_link(obj: JSON) -> str:
    """The provider's id of a manifest: its URL, with the kind pluralised as `<lower-case kind>s`."""
    api_version = str(obj["apiVersion"])
    prefix = "api" if "/" not in api_version else "apis"
    meta = obj.get("metadata") or {}
    namespace = f"/namespaces/{meta['namespace']}" if meta.get("namespace") else ""
    return f"/{prefix}/{api_version}{namespace}/{str(obj['kind']).lower()}s/{meta['name']}"


class FileDocuments:
    def read_data(self, ctx: CallContext, config: State) -> State:
        documents = split_documents(str(config.get("content") or ""))
        manifests: dict[str, str] = {}
        for document in documents:
            key = self_link(parse(document))
            if key in manifests:
                raise ProviderError("duplicate manifest found", f"two documents have the id {key}")
            manifests[key] = document
        return {
            **config,
            "documents": documents,
            "manifests": manifests,
            "id": _digest(config.get("content")),
        }


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _fingerprint(desired: Any, live: Any) -> Any:
    """The live values of the fields the document sets (how the provider sees drift)."""
    if isinstance(desired, dict) and isinstance(live, dict):
        return {k: _fingerprint(v, live.get(k)) for k, v in desired.items()}
    if isinstance(desired, list) and isinstance(live, list) and len(desired) == len(live):
        return [_fingerprint(d, x) for d, x in zip(desired, live, strict=True)]
    return live


class Manifest:
    def _client(self, ctx: CallContext) -> KubeClient:
        return cached_client(
            ctx, ctx.provider_config, load_config_file=bool(ctx.provider_config.get("load_config_file"))
        )

    def desired(self, state: State) -> JSON:
        obj = parse(str(state.get("yaml_body") or ""))
        if state.get("override_namespace"):
            obj.setdefault("metadata", {})["namespace"] = state["override_namespace"]
        return obj

    def _api(self, ctx: CallContext, client: KubeClient, obj: JSON) -> ApiResource:
        return resource(ctx, client, str(obj["apiVersion"]), str(obj["kind"]))

    def _path(self, api: ApiResource, obj: JSON) -> str:
        meta = obj["metadata"]
        return api.path(str(meta["name"]), meta.get("namespace") if api.namespaced else None)

    def _apply(self, ctx: CallContext, state: State) -> tuple[JSON, JSON]:
        client = self._client(ctx)
        obj = self.desired(state)
        api = self._api(ctx, client, obj)
        if api.namespaced:
            obj["metadata"].setdefault("namespace", "default")
        else:
            obj["metadata"].pop("namespace", None)
        manager = state.get("field_manager") or DEFAULT_FIELD_MANAGER
        query = urllib.parse.urlencode(
            {"fieldManager": manager, "force": "true" if state.get("force_conflicts") else "false"}
        )
        retries = int(ctx.provider_config.get("apply_retry_count") or 0)
        for attempt in range(retries + 1):
            try:
                live = client.request(
                    "PATCH", f"{self._path(api, obj)}?{query}", obj, "application/apply-patch+yaml"
                )
                break
            except KubeError as err:
                if err.status == 409:
                    raise ProviderError(
                        f"{obj['kind']} {obj['metadata']['name']}: field manager conflict",
                        f"{err}. Set force_conflicts = true to take the fields over",
                    ) from None
                # The provider retries an apply (apply_retry_count): a CRD's kind may not be served yet.
                if attempt >= retries or err.status in (400, 401, 403, 422):
                    raise api_error(f"applying {obj['kind']} {obj['metadata']['name']}", err) from None
                time.sleep(min(2.0**attempt, 10.0))
        if state.get("wait_for_rollout") is not False:
            self._wait_for_rollout(client, api, obj)
        return obj, live

    @staticmethod
    def _wait_for_rollout(client: KubeClient, api: ApiResource, obj: JSON) -> None:
        kind = obj["kind"]
        if kind not in ("Deployment", "DaemonSet") or not api.api_version.startswith("apps/"):
            return
        meta = obj["metadata"]
        path = api.path(meta["name"], meta.get("namespace"))

        def rolled_out() -> bool:
            live = client.get(path)
            status = live.get("status") or {}
            if status.get("observedGeneration", 0) < live["metadata"].get("generation", 0):
                return False
            if kind == "Deployment":
                want = (live.get("spec") or {}).get("replicas", 1)
                return bool(
                    status.get("updatedReplicas", 0) >= want and status.get("availableReplicas", 0) >= want
                )
            want = status.get("desiredNumberScheduled", 0)
            return bool(
                status.get("updatedNumberScheduled", 0) >= want and status.get("numberReady", 0) >= want
            )

        wait_until(rolled_out, ROLLOUT_TIMEOUT_S, f"the rollout of {kind} {meta['name']}", interval_s=1.0)

    def _state(self, planned: State, obj: JSON, live: JSON) -> State:
        meta = obj["metadata"]
        state = dict(planned)
        state.update(
            id=self_link(obj),
            api_version=obj["apiVersion"],
            kind=obj["kind"],
            name=meta["name"],
            namespace=meta.get("namespace"),
            uid=live["metadata"]["uid"],
            live_uid=live["metadata"]["uid"],
            yaml_body_parsed=yaml.safe_dump(
                _obfuscated(obj, planned.get("sensitive_fields") or []), sort_keys=True
            ),
            yaml_incluster=_digest(_fingerprint(obj, live)),
            live_manifest_incluster=_digest(_fingerprint(obj, live)),
        )
        if state.get("field_manager") is None:
            state["field_manager"] = DEFAULT_FIELD_MANAGER
        return state

    def create(self, ctx: CallContext, planned: State) -> State:
        obj, live = self._apply(ctx, planned)
        return self._state(planned, obj, live)

    def update(self, ctx: CallContext, planned: State, prior: State) -> State:
        old, new = self.desired(prior), self.desired(planned)
        moved = any(str(old.get(k)) != str(new.get(k)) for k in ("apiVersion", "kind")) or any(
            str(old["metadata"].get(k)) != str(new["metadata"].get(k)) for k in ("name", "namespace")
        )
        if moved:  # a different object: the provider replaces
            self.delete(ctx, prior)
        obj, live = self._apply(ctx, planned)
        return self._state(planned, obj, live)

    def read(self, ctx: CallContext, state: State) -> State | None:
        client = self._client(ctx)
        obj = self.desired(state)
        if state.get("namespace") and not obj["metadata"].get("namespace"):
            obj["metadata"]["namespace"] = state["namespace"]
        try:
            api = self._api(ctx, client, obj)
            live = client.get_or_none(self._path(api, obj))
        except ProviderError:
            return None  # its kind is no longer served (a CRD deleted): the object is gone with it
        except KubeError as err:
            raise api_error(f"reading {state.get('id')}", err) from None
        if live is None:
            return None
        return {
            **state,
            "live_uid": live["metadata"]["uid"],
            "live_manifest_incluster": _digest(_fingerprint(obj, live)),
        }

    def delete(self, ctx: CallContext, state: State) -> None:
        if state.get("apply_only"):
            return None
        client = self._client(ctx)
        obj = self.desired(state)
        if state.get("namespace") and not obj["metadata"].get("namespace"):
            obj["metadata"]["namespace"] = state["namespace"]
        try:
            api = self._api(ctx, client, obj)
        except ProviderError:
            return None
        path = self._path(api, obj)
        if not delete_in_background(client, path, str(state.get("id"))):
            return None
        if state.get("wait"):
            wait_until(
                lambda: client.get_or_none(path) is None, DELETE_TIMEOUT_S, f"{state.get('id')} to be deleted"
            )
        return None

    def import_(self, ctx: CallContext, import_id: str) -> State:
        parts = import_id.split("//")
        if len(parts) not in (3, 4) or not all(parts):
            raise ProviderError(
                "Invalid import id", f"{import_id!r}: expected apiVersion//kind//name[//namespace]"
            )
        api_version, kind, name = parts[:3]
        namespace = parts[3] if len(parts) == 4 else None
        client = self._client(ctx)
        api = resource(ctx, client, api_version, kind)
        try:
            live = client.get_or_none(api.path(name, namespace if api.namespaced else None))
        except KubeError as err:
            raise api_error(f"importing {import_id}", err) from None
        if live is None:
            raise ProviderError("Cannot import non-existent remote object", import_id)
        meta = {
            k: v for k, v in live["metadata"].items() if k in ("name", "namespace", "labels", "annotations")
        }
        body = {k: v for k, v in live.items() if k not in ("status", "metadata")} | {"metadata": meta}
        planned: State = {"yaml_body": yaml.safe_dump(body, sort_keys=False), "field_manager": None}
        return self._state(planned, body, live)


def _obfuscated(obj: JSON, fields: list[str]) -> JSON:
    """The document with `sensitive_fields` (dotted paths) and a Secret's data replaced by
    "(sensitive value)"."""
    out = json.loads(json.dumps(obj))
    paths = list(fields) + (["data", "stringData"] if obj.get("kind") == "Secret" else [])
    for path in paths:
        node, keys = out, path.split(".")
        for key in keys[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
            if node is None:
                break
        if isinstance(node, dict) and keys[-1] in node:
            value = node[keys[-1]]
            node[keys[-1]] = (
                {k: "(sensitive value)" for k in value} if isinstance(value, dict) else "(sensitive value)"
            )
    return dict(out)


HANDLERS = ProviderHandlers(
    resources={"kubectl_manifest": Manifest()},
    data_sources={"kubectl_file_documents": FileDocuments()},
)
