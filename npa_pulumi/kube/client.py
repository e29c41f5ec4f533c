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


@dataclass(frozen=True)
class _Target:
    host: str
    port: int
    context: ssl.SSLContext
    token: str | None


def _ssl_context(user: JSON, cluster: JSON) -> ssl.SSLContext:
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


def _exec_token(spec: JSON) -> str:
    """Run an exec credential plugin and return the token of the ExecCredential it prints."""
    command = spec.get("command", "")
    if not shutil.which(command):
        raise KubeError(f"the kubeconfig's credential plugin {command!r} is not installed")
    env = None
    if spec.get("env"):
        import os

        env = dict(os.environ, **{e["name"]: e["value"] for e in spec["env"]})
    proc = subprocess.run(
        [command, *spec.get("args", [])], capture_output=True, text=True, env=env, timeout=60, check=False
    )
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
            raise KubeError(f"unsupported API server address {server!r} (https://HOST[:PORT] expected)")
        self.server = server
        self._target = _Target(parsed.hostname, parsed.port or 443, context, token)
        self.timeout_s = timeout_s

    @classmethod
    def from_kubeconfig(
        cls, text: str, context_name: str | None = None, timeout_s: float = 10.0
    ) -> KubeClient:
        config = load(text)
        name = context_name or config.get("current-context")
        contexts = {c["name"]: c["context"] for c in config.get("contexts") or []}
        if name not in contexts:
            raise KubeError(f"the kubeconfig has no context {name!r}")
        context = contexts[name]
        cluster = {c["name"]: c["cluster"] for c in config.get("clusters") or []}[context["cluster"]]
        user = {u["name"]: u["user"] for u in config.get("users") or []}.get(context.get("user", ""), {})
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

    def delete(self, path: str) -> bool:
        """Delete; False when it was already gone."""
        try:
            self.request(
                "DELETE", path, {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
            )
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
}
