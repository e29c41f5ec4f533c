"""`NebiusCloud.access_token()` through the official SDK's token machinery to the wire fake.

The token becomes the recipe's `TF_VAR_iam_token`, so it must be one the API accepts for the adapter's
own identity: the profile's token file, or a fresh `TokenExchangeService/Exchange` for a service
account's credentials file. A refused exchange must fail at once with a typed error (not after a
timeout), a transient one must be retried, and the token must never reach a log, a repr or an error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import jwt
import pytest
from pydantic import SecretStr
from wire.coverage import RecordingCloud, covers, declared
from wire.world import TENANT, TOKEN, WireWorld, wire_world

from npa_pulumi.cloud.errors import CloudError, PermissionDenied, Unauthenticated

pytestmark = pytest.mark.integration

PROJECT = "project-e00existing"
EXCHANGE = "TokenExchangeService/Exchange"
AMBIENT_TOKEN = "wire-ambient-token-same-tenant"


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WireWorld]:
    with wire_world(tmp_path, monkeypatch) as w:
        yield w


@pytest.fixture
def recorded(request: pytest.FixtureRequest, world: WireWorld) -> Iterator[Callable[..., Any]]:
    """Adapters built like `world.cloud(...)`, recorded; a test must call every method it `@covers`."""
    clouds: list[RecordingCloud] = []

    def make(**options: Any) -> Any:
        cloud = RecordingCloud(world.cloud(**options))
        clouds.append(cloud)
        return cloud

    yield make
    called = set().union(*(c.called for c in clouds)) if clouds else set()
    missing = declared(request.function) - called
    assert not missing, f"{request.function.__name__} declares {sorted(missing)} but never calls them"


def exchanges(world: WireWorld) -> list[Any]:
    return world.fake.calls_to(EXCHANGE)


@covers("access_token")
def test_a_token_file_profile_yields_the_profile_token(
    world: WireWorld, recorded: Callable[..., Any]
) -> None:
    cloud = recorded()
    token = cloud.access_token()
    assert isinstance(token, SecretStr)
    assert token.get_secret_value() == TOKEN
    assert TOKEN not in repr(token) and TOKEN not in str(token)
    assert world.fake.tokens[token.get_secret_value()].subject == "useraccount-e00wire"
    assert world.fake.calls == []  # a token file needs no round trip

    # It is the very token the adapter authenticates with.
    cloud.principal()
    assert world.fake.calls[-1].metadata["authorization"] == f"Bearer {token.get_secret_value()}"


@covers("access_token", "principal")
def test_a_service_account_token_is_exchanged_fresh_for_every_run(
    world: WireWorld, recorded: Callable[..., Any]
) -> None:
    credentials = world.service_account_credentials(PROJECT)
    cloud = recorded(credentials_file=str(credentials), tenant_id=TENANT)

    first = cloud.access_token().get_secret_value()
    minted = world.fake.tokens[first]
    assert (minted.kind, minted.project_id) == ("service_account", PROJECT)
    assert minted.subject.startswith("serviceaccount-")
    (request, *_) = [c.request for c in exchanges(world)]
    claims = jwt.decode(request.subject_token, options={"verify_signature": False})
    assert claims["sub"] == claims["iss"] == minted.subject  # signed as the account, by its key
    assert request.grant_type == "urn:ietf:params:oauth:grant-type:token-exchange"

    # A second run gets a freshly exchanged token, not a cached one that may be close to expiry.
    seen = len(exchanges(world))
    second = cloud.access_token().get_secret_value()
    assert second != first and len(exchanges(world)) > seen
    assert world.fake.tokens[second].subject == minted.subject

    # The adapter's own calls use the same identity.
    assert cloud.principal().subject == minted.subject
    (profile_call,) = world.fake.calls_to("ProfileService/Get")
    used = profile_call.metadata["authorization"].removeprefix("Bearer ")
    assert world.fake.tokens[used].subject == minted.subject and used != TOKEN


@covers("access_token")
def test_an_ambient_token_is_returned_when_reuse_is_opted_in(
    world: WireWorld, recorded: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    world.fake.add_token(AMBIENT_TOKEN, "useraccount-e00ambient", {TENANT})
    monkeypatch.setenv("NEBIUS_IAM_TOKEN", AMBIENT_TOKEN)
    assert recorded().access_token().get_secret_value() == TOKEN  # stripped unless opted in
    monkeypatch.setenv("NPA_REUSE_IAM_TOKEN", "1")
    assert recorded().access_token().get_secret_value() == AMBIENT_TOKEN


@covers("access_token")
def test_a_refused_exchange_fails_at_once_with_a_typed_error(
    world: WireWorld, recorded: Callable[..., Any]
) -> None:
    credentials = world.service_account_credentials(PROJECT)
    world.fake.fail_next(EXCHANGE, grpc.StatusCode.PERMISSION_DENIED, times=50, message="key revoked")
    cloud = recorded(credentials_file=str(credentials), tenant_id=TENANT, call_timeout_s=20.0)
    with pytest.raises(PermissionDenied) as err:
        cloud.access_token()
    # The refusal itself, typed: a wait for a token that never comes would end in the call's timeout
    # (20 s) as a timeout error, not as PermissionDenied with the exchange's own message.
    assert "key revoked" in str(err.value)
    assert exchanges(world)[0].code == "PERMISSION_DENIED"
    assert err.value.request is not None and err.value.request.method == "iam.TokenExchange"


@covers("access_token")
def test_credentials_the_api_does_not_know_are_unauthenticated(
    world: WireWorld, recorded: Callable[..., Any]
) -> None:
    credentials = world.service_account_credentials(PROJECT)
    world.fake.sa_public_keys.clear()  # the key was deleted from the account
    with pytest.raises(Unauthenticated):
        recorded(credentials_file=str(credentials), tenant_id=TENANT).access_token()
    assert exchanges(world)[0].code == "UNAUTHENTICATED"


@covers("access_token")
def test_a_transient_exchange_failure_is_retried(world: WireWorld, recorded: Callable[..., Any]) -> None:
    credentials = world.service_account_credentials(PROJECT)
    world.fake.fail_next(EXCHANGE, grpc.StatusCode.UNAVAILABLE, times=2)
    token = recorded(credentials_file=str(credentials), tenant_id=TENANT).access_token()
    assert token.get_secret_value() in world.fake.tokens
    codes = [c.code for c in exchanges(world)]
    assert codes[:2] == ["UNAVAILABLE", "UNAVAILABLE"] and "OK" in codes


@covers("access_token")
def test_an_empty_token_file_is_not_a_token(world: WireWorld, recorded: Callable[..., Any]) -> None:
    world.token_file("", "wire")
    with pytest.raises(CloudError) as err:
        recorded().access_token()
    assert isinstance(err.value, Unauthenticated), repr(err.value)


@covers("access_token")
def test_tokens_never_reach_logs_reprs_or_errors(
    world: WireWorld, recorded: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    credentials = world.service_account_credentials(PROJECT)
    private_key = credentials.read_text()
    cloud = recorded(credentials_file=str(credentials), tenant_id=TENANT)
    minted = cloud.access_token()
    world.fake.fail_next(EXCHANGE, grpc.StatusCode.UNAVAILABLE, times=1)
    cloud.access_token()  # one transient failure, retried and logged
    world.fake.fail_next(EXCHANGE, grpc.StatusCode.PERMISSION_DENIED, times=50)
    with pytest.raises(PermissionDenied) as err:
        cloud.access_token()
    profile_token = recorded().access_token()

    secrets = [minted.get_secret_value(), profile_token.get_secret_value(), *world.fake.tokens]
    assert "unavailable" in caplog.text.lower()  # the log was really captured
    texts = [
        caplog.text,
        repr(cloud.inner),
        repr(minted),
        str(minted),
        repr(profile_token),
        str(err.value),
        repr(err.value),
        repr(err.value.request),
        str(err.value.__cause__),
        str(err.value.__context__),
    ]
    for text in texts:
        for secret in secrets:
            assert secret not in text
        assert "PRIVATE KEY" not in text and private_key[200:260] not in text


@covers("access_token")
def test_concurrent_runs_share_one_exchange_and_async_callers_work(
    world: WireWorld, recorded: Callable[..., Any]
) -> None:
    # Several Terraform runs of one fleet may ask at once; a Pulumi provider may ask from a running loop.
    credentials = world.service_account_credentials(PROJECT)
    cloud = recorded(credentials_file=str(credentials), tenant_id=TENANT)
    with ThreadPoolExecutor(max_workers=8) as pool:
        tokens = list(pool.map(lambda _: cloud.access_token().get_secret_value(), range(8)))
    assert all(world.fake.tokens[t].kind == "service_account" for t in tokens)
    assert 1 <= len(exchanges(world)) < 8  # concurrent callers join one renewal

    async def inside_a_loop() -> str:
        return str(cloud.access_token().get_secret_value())

    assert asyncio.run(inside_a_loop()) in world.fake.tokens
