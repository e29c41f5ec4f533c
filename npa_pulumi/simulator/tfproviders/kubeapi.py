"""What the Kubernetes-side providers (kubernetes, kubectl, helm) share: a client for the cluster's real API
server built from the provider block, as client-go builds one, and the API's discovery (which URL serves a
kind).

The provider block the module writes names the cluster's public endpoint (a bare `host[:port]`, used as
https://), its CA (PEM) and a bearer token (var.iam_token). The API server itself checks the token: each
local cluster's kube-apiserver accepts its tenant's local IAM token (simulator/kube/controlplane.py), so a
wrong token is refused there, with a 401, as on mk8s."""

from __future__ import annotations

import os
import re
import ssl
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npa_pulumi.kube.client import KubeClient, KubeError
from npa_pulumi.simulator.tfproviders.base import CallContext, ProviderError

JSON = dict[str, Any]
CLIENT_KEY = "kube.client"
DISCOVERY_KEY = "kube.discovery"


def server_url(host: str) -> str:
    """client-go's reading of `host`: a bare host[:port] means https (a CA is given)."""
    host = host.strip().rstrip("/")
    if "://" not in host:
        host = "https://" + host
    parsed = urllib.parse.urlsplit(host)
    if parsed.scheme != "https" or not parsed.hostname:
        raise ProviderError(
            "Invalid provider configuration",
            f"host {host!r}: an https:// URL or a bare host[:port] is expected",
        )
    return f"https://{parsed.netloc}"


def _tls(config: JSON) -> ssl.SSLContext:
    context = ssl.create_default_context()
    try:
        if config.get("cluster_ca_certificate"):
            context.load_verify_locations(cadata=str(config["cluster_ca_certificate"]))
        if config.get("insecure"):
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if config.get("client_certificate") and config.get("client_key"):
            with tempfile.TemporaryDirectory(prefix="npa-tfkube-") as tmp:
                cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
                cert.write_text(str(config["client_certificate"]))
                key.touch(mode=0o600)
                key.write_text(str(config["client_key"]))
                context.load_cert_chain(cert, key)
    except (OSError, ValueError, ssl.SSLError) as err:
        raise ProviderError(
            "Invalid provider configuration", f"the TLS material does not load: {err}"
        ) from None
    return context


def _from_kubeconfig(config: JSON) -> KubeClient:
    paths = [str(p) for p in config.get("config_paths") or []]
    if config.get("config_path"):
        paths.insert(0, str(config["config_path"]))
    path = Path(os.path.expanduser(paths[0]))
    try:
        return KubeClient.from_kubeconfig(path.read_text(), config.get("config_context") or None)
    except (OSError, KubeError) as err:
        raise ProviderError("Invalid provider configuration", f"kubeconfig {path}: {err}") from None


def client_for(config: JSON, load_config_file: bool = True) -> KubeClient:
    """The client the provider block describes: host + CA + token (what upstream k8s-training sets), or a
    kubeconfig file (config_path/config_paths)."""
    if config.get("tls_server_name") or config.get("proxy_url") or config.get("exec"):
        raise ProviderError(
            "Unsupported provider configuration",
            "the local cloud's Kubernetes providers support host, cluster_ca_certificate, token, "
            "client_certificate/client_key, insecure and config_path(s); not tls_server_name, proxy_url "
            "or exec",
        )
    if config.get("host"):
        return KubeClient(server_url(str(config["host"])), _tls(config), config.get("token") or None, 30.0)
    if load_config_file and (config.get("config_path") or config.get("config_paths")):
        return _from_kubeconfig(config)
    raise ProviderError(
        "Kubernetes API not configured",
        "set the provider's host (the cluster's status.control_plane.endpoints.public_endpoint), "
        "cluster_ca_certificate and token",
    )


_CLOUD_DIR_ENV = "NPA_LOCAL_CLOUD_DIR"
# A cluster's public endpoint on a local cloud that runs no API servers (records.endpoint_for).
_SERVERLESS_ENDPOINT = re.compile(
    r"^(?:https://)?pub\.(?P<cluster>[a-z0-9-]+)\.mk8s\.[a-z0-9-]+\.local-cloud\.invalid"
)


def serverless_cluster(config: JSON) -> str | None:
    """The cluster a release targets when the local cloud runs no Kubernetes API servers (`local-cloud set
    kubernetes-api 0`, for runs that never look inside a cluster): its endpoint then names no server, so the
    release is recorded in Terraform's state and told to the local cloud, and nothing else. None when the
    cluster has an API server (the release is then installed in it, as Helm does)."""
    if not os.environ.get(_CLOUD_DIR_ENV):
        return None
    match = _SERVERLESS_ENDPOINT.match(str((config or {}).get("host") or ""))
    if match is None or _api_servers_run():
        return None
    return match.group("cluster")


def _api_servers_run() -> bool:
    from npa_pulumi.simulator.simulator import LocalSimulator

    return bool(LocalSimulator(Path(os.environ[_CLOUD_DIR_ENV]), auto_init=False).kubernetes_api_enabled())


def cached_client(ctx: CallContext, config: JSON, load_config_file: bool = True) -> KubeClient:
    client = ctx.cache.get(CLIENT_KEY)
    if client is None:
        client = client_for(config, load_config_file)
        ctx.cache[CLIENT_KEY] = client
    assert isinstance(client, KubeClient)
    return client


def api_error(action: str, err: KubeError) -> ProviderError:
    """A diagnostic for an API failure; an authentication failure says which credential was refused."""
    if err.status == 401:
        return ProviderError(
            f"{action}: Unauthorized",
            "the cluster's API server refused the provider's credentials (the token must be the local "
            f"IAM's token of the cluster's tenant, var.iam_token): {err}",
        )
    if err.unreachable:
        return ProviderError(f"{action}: the Kubernetes API is unreachable", str(err))
    return ProviderError(action, str(err))


# --------------------------------------------------------------------------------- discovery


@dataclass(frozen=True)
class ApiResource:
    api_version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def prefix(self) -> str:
        return "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"

    def collection(self, namespace: str | None) -> str:
        if self.namespaced:
            return f"{self.prefix}/namespaces/{namespace or 'default'}/{self.plural}"
        return f"{self.prefix}/{self.plural}"

    def path(self, name: str, namespace: str | None) -> str:
        return f"{self.collection(namespace)}/{name}"


def resource(ctx: CallContext, client: KubeClient, api_version: str, kind: str) -> ApiResource:
    """Which plural and scope serve `kind` in `api_version`, from the API's discovery (CRDs included)."""
    cache: dict[str, list[JSON]] = ctx.cache.setdefault(DISCOVERY_KEY, {})
    if api_version not in cache:
        prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        try:
            cache[api_version] = list(client.get(prefix).get("resources") or [])
        except KubeError as err:
            if err.status == 404:
                raise ProviderError(
                    f"no {kind} in {api_version}", f"the cluster serves no API group version {api_version!r}"
                ) from None
            raise api_error(f"discovering {api_version}", err) from None
    for entry in cache[api_version]:
        if entry.get("kind") == kind and "/" not in str(entry.get("name", "")):
            return ApiResource(api_version, kind, str(entry["name"]), bool(entry.get("namespaced")))
    cache.pop(api_version, None)  # a CRD applied later may add it: ask again next time
    raise ProviderError(
        f"no {kind} in {api_version}", f"the cluster's API {api_version} has no kind {kind!r}"
    )


def delete_in_background(client: KubeClient, path: str, what: str) -> bool:
    """DELETE with background propagation, as both providers do; False when the object was already gone."""
    try:
        client.request(
            "DELETE",
            path,
            {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
        )
    except KubeError as err:
        if err.status == 404:
            return False
        raise api_error(f"deleting {what}", err) from None
    return True


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.5) -> None:
    """Poll `condition` until it holds; a ProviderError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            raise ProviderError(f"timed out after {timeout_s:g}s", f"waiting for {what}")
        time.sleep(interval_s)


def parse_duration(text: str | None, default_s: float) -> float:
    """A Terraform timeouts duration ("20m", "1h30m", "90s")."""
    if not text:
        return default_s
    total, number = 0.0, ""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0}
    for char in text.strip():
        if char.isdigit() or char == ".":
            number += char
        elif char in units and number:
            total += float(number) * units[char]
            number = ""
        else:
            raise ProviderError("Invalid timeout", f"{text!r} is not a duration like 20m or 1h30m")
    if number:
        raise ProviderError("Invalid timeout", f"{text!r}: a unit (h, m, s) is missing")
    return total
