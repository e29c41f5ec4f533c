"""A loopback stand-in for GitHub Actions' OIDC token endpoint, and the issuer behind it.

A job with `permissions: id-token: write` gets `ACTIONS_ID_TOKEN_REQUEST_URL` and
`ACTIONS_ID_TOKEN_REQUEST_TOKEN`; a GET of that URL (plus `&audience=...`) with the request token as a
bearer answers `{"value": "<JWT>"}`, an RS256 token of issuer `https://token.actions.githubusercontent.com`
whose `sub` names the repository and the job's context and whose `aud` is the audience asked for (GitHub's
default: `https://github.com/<owner>`). Tokens live five minutes, as GitHub's do.

The issuer here signs with a throwaway key; its JWKS goes into the fake's federated credentials
(`jwk_set_json`), which is how the fake's token exchange verifies it.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
REPOSITORY = "wire-org/fleet"
PR_SUBJECT = f"repo:{REPOSITORY}:pull_request"
REQUEST_TOKEN = "wire-actions-request-token"
TOKEN_LIFE_S = 300


@dataclass
class OidcIssuer:
    issuer: str = GITHUB_ISSUER
    key: Any = field(default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048))
    kid: str = field(default_factory=lambda: uuid.uuid4().hex)

    def jwks_json(self) -> str:
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return json.dumps({"keys": [{**public, "kid": self.kid, "use": "sig", "alg": "RS256"}]})

    def mint(
        self, subject: str, audience: str, life_s: float = TOKEN_LIFE_S, issued: float | None = None
    ) -> str:
        now = time.time() if issued is None else issued
        claims = {
            "iss": self.issuer,
            "sub": subject,
            "aud": audience,
            "iat": int(now),
            "nbf": int(now),
            "exp": int(now + life_s),
            "repository": REPOSITORY,
            "jti": uuid.uuid4().hex,
        }
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": self.kid})


@dataclass
class GithubOidc:
    """The endpoint's state: what it hands out and what it was asked."""

    issuer: OidcIssuer
    subject: str = PR_SUBJECT
    request_token: str = REQUEST_TOKEN
    life_s: float = TOKEN_LIFE_S
    status: int = 200  # answer every request with this HTTP status (403: the job lacks id-token: write)
    issued: list[str] = field(default_factory=list)  # every token handed out
    audiences: list[str | None] = field(default_factory=list)  # the audience of each request (None: default)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def default_audience(self) -> str:
        return f"https://github.com/{REPOSITORY.split('/', 1)[0]}"


def _handler(state: GithubOidc) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            audience = query.get("audience", [None])[0]
            if self.headers.get("Authorization", "") != f"bearer {state.request_token}":
                self._answer(401, {"message": "bad request token"})
                return
            if state.status != 200:
                self._answer(state.status, {"message": "refused"})
                return
            token = state.issuer.mint(state.subject, audience or state.default_audience(), state.life_s)
            with state.lock:
                state.issued.append(token)
                state.audiences.append(audience)
            self._answer(200, {"count": 1, "value": token})

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


@contextmanager
def serving_github_oidc(state: GithubOidc) -> Iterator[str]:
    """Serve the endpoint on a free loopback port; yields the request URL (with GitHub's own query)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, name="wire-github-oidc", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/_apis/distributedtask/token?api-version=2.0"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
