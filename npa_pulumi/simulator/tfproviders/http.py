"""hashicorp/http (as pinned) on the local cloud: data "http" (docs/data-sources/http.md).

Nothing outside this machine is reachable from the local cloud, so only a loopback URL (localhost,
127.0.0.0/8, ::1) is fetched, for real; any other is refused with an error that says so. Upstream
k8s-training reads one URL this way: the OPA Gatekeeper manifest from raw.githubusercontent.com, and only
with `opa_gatekeeper_enable`, which the product's tfvars turn off on the local cloud."""

from __future__ import annotations

import base64
import ipaddress
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from npa_pulumi.simulator.tfproviders.base import CallContext, ProviderError, ProviderHandlers, State

METHODS = ("GET", "HEAD", "POST")


def is_loopback(host: str) -> bool:
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_reachable(url: str) -> urllib.parse.SplitResult:
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ProviderError("Error creating request", f"{url!r} is not an http:// or https:// URL")
    if not is_loopback(parsed.hostname):
        raise ProviderError(
            f"the local cloud cannot fetch {url}",
            f"{parsed.hostname} is outside this machine, and the local cloud reaches nothing outside it: "
            'data "http" answers loopback URLs only. Upstream k8s-training fetches the OPA Gatekeeper '
            "manifest this way when opa_gatekeeper_enable is true; the product's default recipe turns "
            "opa_gatekeeper_enable off on the local cloud (docs/local-cloud.md).",
        )
    return parsed


def _ssl_context(config: State) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if config.get("ca_cert_pem"):
        context.load_verify_locations(cadata=config["ca_cert_pem"])
    if config.get("insecure"):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if config.get("client_cert_pem") and config.get("client_key_pem"):
        import tempfile
        from pathlib import Path

        with tempfile.TemporaryDirectory(prefix="npa-http-") as tmp:
            cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert.write_text(config["client_cert_pem"])
            key.touch(mode=0o600)
            key.write_text(config["client_key_pem"])
            context.load_cert_chain(cert, key)
    return context


def _attempts(config: State) -> tuple[int, float, float]:
    retry = config.get("retry") or {}
    attempts = int(retry.get("attempts") or 0)
    min_delay = float(retry.get("min_delay_ms") or 0) / 1000
    max_delay = float(retry.get("max_delay_ms") or 0) / 1000
    return attempts, min_delay, max(max_delay, min_delay)


def fetch(config: State) -> State:
    url = str(config.get("url") or "")
    check_reachable(url)
    method = str(config.get("method") or "GET").upper()
    if method not in METHODS:
        raise ProviderError(
            "Invalid Attribute Value", f"method must be one of {', '.join(METHODS)}, got {method}"
        )
    body = config.get("request_body")
    data = None if body is None else str(body).encode()
    headers = dict(config.get("request_headers") or {})
    timeout_s = float(config.get("request_timeout_ms") or 0) / 1000 or None
    attempts, delay, max_delay = _attempts(config)
    context = _ssl_context(config) if url.startswith("https") else None
    for attempt in range(attempts + 1):
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout_s, context=context) as response:
                return _result(config, response.status, dict(response.headers.items()), response.read())
        except urllib.error.HTTPError as err:  # a status is an answer: v3 leaves judging it to the config
            return _result(config, err.code, dict(err.headers.items()), err.read())
        except (urllib.error.URLError, OSError) as err:
            if attempt >= attempts:
                raise ProviderError(f"Error making request to {url}", str(err)) from None
            time.sleep(delay)
            delay = min(max(delay * 2, 0.001), max_delay) if max_delay else delay
    raise AssertionError("unreachable")


def _result(config: State, status: int, headers: dict[str, str], raw: bytes) -> State:
    text = raw.decode("utf-8", errors="replace")
    state: dict[str, Any] = dict(config)
    state.update(
        id=config["url"],
        status_code=status,
        response_headers=headers,
        response_body=text,
        body=text,  # the deprecated name of response_body
        response_body_base64=base64.b64encode(raw).decode(),
    )
    return state


class HttpData:
    def read_data(self, ctx: CallContext, config: State) -> State:
        return fetch(config)


HANDLERS = ProviderHandlers(data_sources={"http": HttpData()})
