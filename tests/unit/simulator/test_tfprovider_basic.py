"""The local random, time and http providers' handlers (npa_pulumi/simulator/tfproviders), called as the
worker calls them, with the values upstream k8s-training gives them."""

from __future__ import annotations

import datetime as dt
import http.server
import re
import threading
from collections.abc import Iterator

import pytest

from npa_pulumi.simulator.tfproviders import http as http_provider
from npa_pulumi.simulator.tfproviders import random as random_provider
from npa_pulumi.simulator.tfproviders import time as time_provider
from npa_pulumi.simulator.tfproviders.base import CallContext, ProviderError
from npa_pulumi.simulator.tfproviders.registry import PROVIDERS as REGISTRY

CTX = CallContext(provider_config={})
STRING = random_provider.HANDLERS.resources["random_string"]
PASSWORD = random_provider.HANDLERS.resources["random_password"]


def _planned(**given: object) -> dict[str, object]:
    """A plan as Terraform sends it: every schema attribute present, unset ones null."""
    keys = (
        "length",
        "keepers",
        "lower",
        "upper",
        "numeric",
        "number",
        "special",
        "min_lower",
        "min_upper",
        "min_numeric",
        "min_special",
        "override_special",
        "result",
        "id",
    )
    return {key: given.get(key) for key in keys}


def test_the_registry_serves_each_provider_by_its_address() -> None:
    assert REGISTRY["hashicorp/random"] is random_provider.HANDLERS
    assert set(REGISTRY) >= {
        "hashicorp/helm",
        "hashicorp/kubernetes",
        "gavinbunney/kubectl",
        "hashicorp/time",
    }
    assert "time_static" in REGISTRY["hashicorp/time"].resources
    assert "http" in REGISTRY["hashicorp/http"].data_sources


def test_random_string_as_locals_tf_asks_for_it() -> None:
    # locals.tf: 6 characters, no specials, keepers = parent_id
    planned = _planned(
        length=6, upper=True, lower=True, numeric=True, special=False, keepers={"ami_id": "p-1"}
    )
    state = STRING.create(CTX, planned)
    assert re.fullmatch(r"[A-Za-z0-9]{6}", str(state["result"]))
    assert state["id"] == state["result"] and state["keepers"] == {"ami_id": "p-1"}
    assert (state["min_lower"], state["number"], state["special"]) == (0, True, False)
    assert STRING.read(CTX, state) == state


def test_random_string_minimums_and_classes() -> None:
    # o11y/loki.tf: 2 characters, lower-case and digits only
    for _ in range(20):
        result = str(STRING.create(CTX, _planned(length=2, upper=False, special=False))["result"])
        assert re.fullmatch(r"[a-z0-9]{2}", result)
    result = str(STRING.create(CTX, _planned(length=8, min_numeric=8))["result"])
    assert result.isdigit()
    with pytest.raises(ProviderError) as raised:
        STRING.create(CTX, _planned(length=3, min_upper=2, min_lower=2))
    assert "must be >= to the sum" in raised.value.detail


def test_random_password_is_sensitive_material_with_a_bcrypt_hash() -> None:
    # o11y/grafana.tf: 16 characters from the classes and the override specials "@#$%"
    state = PASSWORD.create(
        CTX, _planned(length=16, special=True, upper=True, lower=True, override_special="@#$%")
    )
    result = str(state["result"])
    assert re.fullmatch(r"[A-Za-z0-9@#$%]{16}", result)
    assert state["id"] == "none", "a password's id does not carry the secret"
    bcrypt_hash = str(state["bcrypt_hash"])
    if bcrypt_hash:  # the libc's bcrypt: it verifies the password
        import crypt

        assert crypt.crypt(result, bcrypt_hash) == bcrypt_hash
    other = PASSWORD.create(CTX, _planned(length=16))
    assert other["result"] != result


def test_random_import_takes_the_value() -> None:
    state = STRING.import_(CTX, "abc123")
    assert (state["result"], state["id"], state["length"], state["special"]) == ("abc123", "abc123", 6, True)


def test_time_static_now_and_given() -> None:
    static = time_provider.HANDLERS.resources["time_static"]
    before = int(dt.datetime.now(dt.UTC).timestamp())
    state = static.create(CTX, {"rfc3339": None, "triggers": None})
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", str(state["rfc3339"]))
    assert state["id"] == state["rfc3339"] and before <= int(state["unix"]) <= before + 5
    given = static.create(CTX, {"rfc3339": "2024-02-29T23:30:15+02:00", "triggers": {"a": "b"}})
    # The parts are UTC's, as the provider's.
    assert (given["year"], given["month"], given["day"], given["hour"], given["minute"], given["second"]) == (
        2024,
        2,
        29,
        21,
        30,
        15,
    )
    assert given["unix"] == 1709242215
    assert static.import_(CTX, "2020-01-01T00:00:00Z")["unix"] == 1577836800
    with pytest.raises(ProviderError, match="RFC3339"):
        static.create(CTX, {"rfc3339": "yesterday"})


@pytest.fixture
def loopback_server() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: gatekeeper-system\n"
            self.send_response(404 if self.path == "/missing" else 200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("X-Seen", self.headers.get("X-Ask", ""))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_http_answers_a_loopback_url_for_real(loopback_server: str) -> None:
    data = http_provider.HANDLERS.data_sources["http"]
    state = data.read_data(
        CTX, {"url": f"{loopback_server}/gatekeeper.yaml", "request_headers": {"X-Ask": "yes"}}
    )
    assert state["status_code"] == 200
    assert "gatekeeper-system" in str(state["response_body"]) and state["body"] == state["response_body"]
    assert state["response_headers"]["X-Seen"] == "yes"
    # v3 reports a status instead of failing on it: postconditions judge it
    assert data.read_data(CTX, {"url": f"{loopback_server}/missing"})["status_code"] == 404


def test_http_refuses_what_is_outside_the_machine() -> None:
    data = http_provider.HANDLERS.data_sources["http"]
    url = "https://raw.githubusercontent.com/open-policy-agent/gatekeeper/v3.17.1/deploy/gatekeeper.yaml"
    with pytest.raises(ProviderError) as raised:
        data.read_data(CTX, {"url": url})
    assert "raw.githubusercontent.com" in raised.value.summary
    assert "opa_gatekeeper_enable" in raised.value.detail and "loopback" in raised.value.detail
    with pytest.raises(ProviderError):
        data.read_data(CTX, {"url": "http://10.0.0.1/x"})
