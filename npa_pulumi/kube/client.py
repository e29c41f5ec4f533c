"""A small Kubernetes API client over the standard library: enough to read objects, apply them
server-side and patch status, with the credentials a kubeconfig holds.

Server-side apply (`PATCH application/apply-patch+yaml`) makes every write "make it so": the API server
merges, tracks field ownership per manager, and the call is idempotent, so agents and gates can simply
re-apply what they want.
"""

from __future__ import annotations

import base64
import http.client
import json
import shutil
import ssl
import subprocess
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from npa_pulumi.kube.kubeconfig import load

JSON = dict[str, Any]


class KubeError(Exception):
    """An API call failed; `status` is the HTTP status (0 when the server could not be reached)."""

    def __init__(self, message: str, status: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason

    @property
    def unreachable(self) -> bool:
        return self.status == 0

    @property
    def unauthorized(self) -> bool:
        return self.status in (401, 403)


class KubeconfigError(KubeError):
    """The kubeconfig itself cannot be used: malformed, no such context, cluster or user, a credential
    plugin that is not installed, certificate data that does not load. No request was sent."""


@dataclass(frozen=True)
class _Target:
    host: str
    port: int
    context: ssl.SSLContext
    token: str | None


def _ssl_context(user: JSON, cluster: JSON) -> ssl.SSLContext:
    try:
        return _load_ssl_context(user, cluster)
    except (OSError, ValueError, ssl.SSLError) as err:  # binascii.Error is a ValueError
        raise KubeconfigError(f"the kubeconfig's certificate data does not load: {err}") from None


def _load_ssl_context(user: JSON, cluster: JSON) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca = cluster.get("certificate-authority-data")
    if ca:
        context.load_verify_locations(cadata=base64.b64decode(ca).decode())
    elif cluster.get("certificate-authority"):
        context.load_verify_locations(cafile=cluster["certificate-authority"])
    if cluster.get("insecure-skip-tls-verify"):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    cert, key = user.get("client-certificate-data"), user.get("client-key-data")
    if cert and key:
        # ssl only loads a chain from files: write both to a private temp dir that lives for the call.
        with tempfile.TemporaryDirectory(prefix="npa-kube-") as tmp:
            cert_file, key_file = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert_file.write_bytes(base64.b64decode(cert))
            key_file.touch(mode=0o600)
            key_file.write_bytes(base64.b64decode(key))
            context.load_cert_chain(cert_file, key_file)
    elif user.get("client-certificate") and user.get("client-key"):
        context.load_cert_chain(user["client-certificate"], user["client-key"])
    return context


# What client-go tells an exec plugin about the call (KUBERNETES_EXEC_INFO): never interactive. The plugin
# gets no terminal either (stdin is /dev/null), so a login that would prompt or open a browser fails
# instead of waiting for a person who is not there.
_EXEC_INFO = json.dumps(
    {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "spec": {"interactive": False},
    }
)


def _exec_token(spec: JSON) -> str:
    """Run an exec credential plugin, non-interactively, and return the token of the ExecCredential it
    prints."""
    import os

    command = spec.get("command", "")
    if not command or not shutil.which(command):
        raise KubeconfigError(f"the kubeconfig's credential plugin {command!r} is not installed")
    env = dict(os.environ, KUBERNETES_EXEC_INFO=_EXEC_INFO)
    env.update({e["name"]: e["value"] for e in spec.get("env") or []})
    try:
        proc = subprocess.run(
            [command, *spec.get("args", [])],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise KubeError(f"the credential plugin {command!r} did not answer in 60s", 401) from None
    if proc.returncode != 0:
        raise KubeError(f"the credential plugin {command!r} failed (exit {proc.returncode})", 401)
    try:
        token = json.loads(proc.stdout)["status"]["token"]
    except (ValueError, KeyError, TypeError):
        raise KubeError(f"the credential plugin {command!r} printed no ExecCredential token", 401) from None
    return str(token)


class KubeClient:
    """One API server, one identity. Build it with `from_kubeconfig`."""

    def __init__(
        self, server: str, context: ssl.SSLContext, token: str | None = None, timeout_s: float = 10.0
    ):
        parsed = urllib.parse.urlsplit(server)
        if parsed.scheme != "https" or not parsed.hostname:
            raise KubeconfigError(f"unsupported API server address {server!r} (https://HOST[:PORT] expected)")
        self.server = server
        self._target = _Target(parsed.hostname, parsed.port or 443, context, token)
        self.timeout_s = timeout_s

    @classmethod
    def from_kubeconfig(
        cls, text: str, context_name: str | None = None, timeout_s: float = 10.0
    ) -> KubeClient:
        try:
            config = load(text)
            name = context_name or config.get("current-context")
            contexts = {c["name"]: c["context"] for c in config.get("contexts") or []}
            if name not in contexts:
                raise KubeconfigError(f"the kubeconfig has no context {name!r}")
            context = contexts[name]
            clusters = {c["name"]: c["cluster"] for c in config.get("clusters") or []}
            if context.get("cluster") not in clusters:
                raise KubeconfigError(f"the kubeconfig's context {name!r} names no cluster it holds")
            cluster = clusters[context["cluster"]]
            users = {u["name"]: u["user"] for u in config.get("users") or []}
            user = users.get(context.get("user", ""), {})
        except KubeconfigError:
            raise
        except (yaml.YAMLError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise KubeconfigError(f"the kubeconfig is malformed ({type(err).__name__})") from None
        token = user.get("token")
        if user.get("exec"):
            token = _exec_token(user["exec"])
        return cls(cluster["server"], _ssl_context(user, cluster), token, timeout_s)

    # ------------------------------------------------------------------ transport

    def request(
        self,
        method: str,
        path: str,
        body: JSON | list[JSON] | None = None,
        content_type: str = "application/json",
    ) -> JSON:
        target = self._target
        connection = http.client.HTTPSConnection(
            target.host, target.port, context=target.context, timeout=self.timeout_s
        )
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        if target.token:
            headers["Authorization"] = f"Bearer {target.token}"
        try:
            connection.request(method, path, None if body is None else json.dumps(body), headers)
            response = connection.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as err:
            raise KubeError(f"the API server {self.server} is unreachable: {err}") from None
        finally:
            connection.close()
        data: JSON = {}
        if raw:
            try:
                data = json.loads(raw)
            except ValueError:
                data = {"message": raw[:200].decode(errors="replace")}
        if response.status >= 400:
            message = data.get("message") or response.reason
            raise KubeError(
                f"{method} {path}: {response.status} {message}", response.status, data.get("reason", "")
            )
        return data

    # ------------------------------------------------------------------ verbs

    def get(self, path: str) -> JSON:
        return self.request("GET", path)

    def get_or_none(self, path: str) -> JSON | None:
        try:
            return self.get(path)
        except KubeError as err:
            if err.status == 404:
                return None
            raise

    def list(self, path: str, label_selector: str = "") -> list[JSON]:
        query = f"?labelSelector={urllib.parse.quote(label_selector)}" if label_selector else ""
        return list(self.get(path + query).get("items") or [])

    def apply(self, path: str, obj: JSON, field_manager: str) -> JSON:
        """Server-side apply of `obj` at `path` (the object's own URL, status subresource included)."""
        query = urllib.parse.urlencode({"fieldManager": field_manager, "force": "true"})
        return self.request("PATCH", f"{path}?{query}", obj, "application/apply-patch+yaml")

    def delete(self, path: str, preconditions: dict[str, str] | None = None, grace_s: int | None = 0) -> bool:
        """Delete; False when it was already gone. `preconditions` ({"uid": ..., "resourceVersion": ...})
        make it delete exactly that object (409 Conflict otherwise); `grace_s` None keeps the object's own
        grace period."""
        options: JSON = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_s is not None:
            options["gracePeriodSeconds"] = grace_s
        if preconditions:
            options["preconditions"] = preconditions
        try:
            self.request("DELETE", path, options)
        except KubeError as err:
            if err.status == 404:
                return False
            raise
        return True

    def create(self, collection: str, obj: JSON) -> JSON:
        """POST `obj` to its collection's URL (409 AlreadyExists when its name is taken)."""
        return self.request("POST", collection, obj)

    def merge_patch(self, path: str, patch: JSON) -> JSON:
        return self.request("PATCH", path, patch, "application/merge-patch+json")

    def evict(self, namespace: str, name: str, uid: str = "") -> bool:
        """Ask the API server to evict one pod (the `policy/v1` Eviction subresource): it refuses with 429
        while a PodDisruptionBudget allows no disruption, and deletes the pod with its own grace period
        otherwise. `uid`: only that pod, not a later one of the same name. False when it was already gone."""
        body: JSON = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if uid:
            body["deleteOptions"] = {"preconditions": {"uid": uid}}
        try:
            self.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", body)
        except KubeError as err:
            if err.status == 404:
                return False
            raise
        return True

    def healthy(self) -> bool:
        try:
            self.request("GET", "/readyz")
        except KubeError:
            return False
        return True


def object_path(obj: JSON) -> str:
    """The URL of an object of the kinds the fleet handles, from its apiVersion, kind, namespace and name."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    name = obj["metadata"]["name"]
    namespace = obj["metadata"].get("namespace")
    plural = _PLURALS.get(kind) or kind.lower() + "s"
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if namespace:
        return f"{prefix}/namespaces/{namespace}/{plural}/{name}"
    return f"{prefix}/{plural}/{name}"


_PLURALS = {
    "StorageClass": "storageclasses",
    "CSIDriver": "csidrivers",
    "CustomResourceDefinition": "customresourcedefinitions",
    "RayCluster": "rayclusters",
    "ClusterPolicy": "clusterpolicies",
    "RuntimeClass": "runtimeclasses",
    "PodDisruptionBudget": "poddisruptionbudgets",
}
