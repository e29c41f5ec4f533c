"""Keyless authentication (`--auth federated`): a CI provider's OIDC token, exchanged for a Nebius IAM token.

Nebius IAM trusts an OIDC issuer through *federated credentials* on a service account (issuer URL, the
token's `sub` claim, the account it acts as). The SDK's own provider does the rest:
`nebius.aio.token.federated_credentials.FederatedCredentialsBearer` sends the RFC 8693 exchange
(`TokenExchangeService.Exchange`, the account as subject, the OIDC token as actor) and renews the IAM token
in the background before it expires. What this module adds is where the OIDC token comes from, asked for
afresh at every exchange (a GitHub Actions token lives about five minutes; the IAM token far longer):

* a token file (`NPA_NEBIUS_FEDERATED_TOKEN_FILE`), re-read at every renewal (GitLab's `id_tokens`, a
  Kubernetes projected service-account token, anything that keeps a file fresh);
* else GitHub Actions' token endpoint (`ACTIONS_ID_TOKEN_REQUEST_URL` / `ACTIONS_ID_TOKEN_REQUEST_TOKEN`,
  present in a job with `permissions: id-token: write`), asked with `audience=` when one is configured.

Before a token is sent it is checked for what can be known without the issuer's keys: that it is a JWT,
that it has not expired, and that it carries the configured audience. Neither the OIDC token, GitHub's
request token nor the IAM token is ever logged or put into an error; messages name the source only.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import SecretStr

if TYPE_CHECKING:
    from .settings import NebiusSettings

ENV_GITHUB_REQUEST_URL = "ACTIONS_ID_TOKEN_REQUEST_URL"
ENV_GITHUB_REQUEST_TOKEN = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"
GITHUB_TIMEOUT_S = 15.0
# A token that expires within this many seconds is as good as expired: the exchange takes a round trip.
EXPIRY_MARGIN_S = 10.0


class OidcTokenError(Exception):
    """The OIDC token cannot be had or cannot be used. The message names the source, never the token."""


class OidcSource(Protocol):
    def describe(self) -> str: ...

    def fetch(self) -> str:
        """A fresh OIDC token (a JWT), checked; raises OidcTokenError."""
        ...


def check_token(token: str, source: str, audience: str | None, now: float | None = None) -> None:
    """What can be checked without the issuer's keys: a JWT, not expired, for the expected audience."""
    import jwt

    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        raise OidcTokenError(f"{source} does not hold a JWT (an OIDC ID token)") from None
    now = time.time() if now is None else now
    expires = claims.get("exp")
    if isinstance(expires, int | float) and expires <= now + EXPIRY_MARGIN_S:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires))
        raise OidcTokenError(f"the OIDC token from {source} expired at {when}; it must be fresh")
    if audience:
        found = claims.get("aud")
        audiences = [found] if isinstance(found, str) else list(found or [])
        if audience not in audiences:
            shown = ", ".join(str(a) for a in audiences) or "none"
            raise OidcTokenError(
                f"the OIDC token from {source} is for audience {shown}, not {audience!r} "
                "(NPA_NEBIUS_FEDERATED_AUDIENCE)"
            )


@dataclass(frozen=True)
class TokenFile:
    """An OIDC token that something else keeps fresh in a file."""

    path: Path
    audience: str | None = None

    def describe(self) -> str:
        return f"token file {self.path}"

    def fetch(self) -> str:
        try:
            token = self.path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise OidcTokenError(f"OIDC token file {self.path} does not exist") from None
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or type(exc).__name__
            raise OidcTokenError(f"cannot read OIDC token file {self.path}: {reason}") from None
        if not token:
            raise OidcTokenError(f"OIDC token file {self.path} is empty")
        check_token(token, self.describe(), self.audience)
        return token


@dataclass(frozen=True)
class GithubActions:
    """GitHub Actions' OIDC token endpoint: GET the request URL (plus `audience=`) with the job's request
    token as a bearer; the answer is `{"value": "<JWT>"}`."""

    request_url: str
    request_token: SecretStr = field(repr=False)
    audience: str | None = None

    def describe(self) -> str:
        return "GitHub Actions' OIDC token endpoint"

    def url(self) -> str:
        if not self.audience:
            return self.request_url  # GitHub's default audience: https://github.com/<owner>
        joiner = "&" if urllib.parse.urlsplit(self.request_url).query else "?"
        return f"{self.request_url}{joiner}{urllib.parse.urlencode({'audience': self.audience})}"

    def fetch(self) -> str:
        request = urllib.request.Request(
            self.url(),
            headers={
                "Authorization": f"bearer {self.request_token.get_secret_value()}",
                "Accept": "application/json; api-version=2.0",
                "User-Agent": "npa-pulumi",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=GITHUB_TIMEOUT_S) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            raise OidcTokenError(
                f"{self.describe()} answered HTTP {exc.code}; the job needs `permissions: id-token: write`"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", None) or type(exc).__name__
            raise OidcTokenError(f"{self.describe()} is unreachable: {reason}") from None
        try:
            value = json.loads(body).get("value")
        except (ValueError, AttributeError):
            value = None
        if not isinstance(value, str) or not value:
            raise OidcTokenError(f"{self.describe()} answered without a token")
        check_token(value, self.describe(), self.audience)
        return value


def oidc_source(settings: NebiusSettings, env: Mapping[str, str]) -> OidcSource:
    """Where the OIDC token comes from: the token file when one is configured, else GitHub Actions.
    Raises OidcTokenError (naming what to set) when neither is there."""
    if settings.federated_token_file is not None:
        path = settings.federated_token_file.expanduser()
        if not path.is_absolute():
            # Every process of the run re-reads it (the engine's providers run in another directory).
            raise OidcTokenError(f"NPA_NEBIUS_FEDERATED_TOKEN_FILE {path} must be an absolute path")
        return TokenFile(path, settings.federated_audience)
    url, token = env.get(ENV_GITHUB_REQUEST_URL, ""), env.get(ENV_GITHUB_REQUEST_TOKEN, "")
    if url and token:
        return GithubActions(url, SecretStr(token), settings.federated_audience)
    if url or token:
        missing = ENV_GITHUB_REQUEST_TOKEN if url else ENV_GITHUB_REQUEST_URL
        raise OidcTokenError(f"{missing} is not set (GitHub Actions sets both in a job with id-token: write)")
    raise OidcTokenError(
        "no OIDC token to exchange: set NPA_NEBIUS_FEDERATED_TOKEN_FILE, or run in a GitHub Actions job "
        "with `permissions: id-token: write` (it sets ACTIONS_ID_TOKEN_REQUEST_URL and _TOKEN)"
    )


def federated_bearer(source: OidcSource, service_account_id: str) -> Any:
    """The SDK's federated-credentials bearer (exchange + background renewal) over `source`. Its channel is
    set once the SDK exists (`bearer.set_channel(sdk)`): the exchange goes through the SDK's own channel."""
    from nebius.aio.token.federated_credentials import FederatedCredentialsBearer
    from nebius.base.service_account.federated_credentials import (
        FederatedCredentialsBearer as CredentialsReader,
    )
    from nebius.base.service_account.federated_credentials import FederatedCredentialsTokenRequester

    class Reader(CredentialsReader):
        def credentials(self) -> str:
            return source.fetch()

    class Requester(FederatedCredentialsTokenRequester):
        async def get_exchange_token_request_async(self) -> Any:
            # Reading a file or asking GitHub blocks: off the SDK's event loop.
            return await asyncio.to_thread(self.get_exchange_token_request)

    return FederatedCredentialsBearer(Requester(service_account_id, Reader()))
