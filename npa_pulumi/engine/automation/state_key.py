"""A federated run's key to its s3:// state bucket: minted for the run, held in memory, deleted when it ends.

Nebius Object Storage's S3 API signs requests with access keys, not IAM tokens, so keyless CI (`--auth
federated`: no Nebius secret in the CI system) still needs a key for the Pulumi DIY backend in a bucket.
When a run authenticates federated against an `s3://` backend on Nebius and the environment gives no AWS
credentials at all, the run mints one for the service account it acts as (IAM v2 `AccessKeyService.Create`,
the account's own project as parent, `spec.expires_at` a little past the run's expected length:
`NPA_STATE_KEY_LIFETIME_S`, default two hours) and deletes it (best effort) when the run ends.

Where it lives: only in this process's memory and environment. `AWS_ACCESS_KEY_ID` /
`AWS_SECRET_ACCESS_KEY` are set in `os.environ` for the run, which is where the Pulumi engines the run
starts read them (the Automation API passes the process's environment on) and where npa-pulumi's own S3
reads find them (cloud/aws_credentials.py: diy_backend.s3_bucket, the audit store); daemons never inherit
them (runtime/daemons.py strips `AWS_*`). Nothing writes the key to a file, a log, a receipt or the state:
messages name the account and the expiry, never the key's id or secret.

Before the run uses it, the key lists the bucket once (a new key may take a moment to reach the storage
endpoint: InvalidAccessKeyId is retried for up to a minute), so a missing storage grant on the bucket, or
a bucket that does not exist, is an error naming it here rather than an engine failure later.

One process, one held key: a second run in the same process (the SDK, a command that opens the fleet
twice) reuses it for the same bucket while at least half its life is left, and mints a fresh one
otherwise; every key minted is deleted at release (`release_state_keys`, registered with `atexit` at the
first mint, so a CLI command deletes it as it exits, however it exits short of being killed; a killed
run's key expires by itself).

A refused mint is an `StateKeyError` (exit 1) naming what to grant: the account may create access keys
for itself (docs/ci-previews.md, "The state bucket without a key"; `backend init --ci-repository` prints
the access permit).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from pydantic import SecretStr

from npa_pulumi.cloud.aws_credentials import (
    ACCESS_KEY_ENV,
    CREDENTIALS_FILE_ENV,
    PROFILE_ENV,
    SECRET_KEY_ENV,
)
from npa_pulumi.cloud.factory import AUTH_ENV
from npa_pulumi.errors import NpaError, UserInputError

if TYPE_CHECKING:
    from npa_pulumi.cloud.port import AccessKey, CloudPort

READY_TIMEOUT_S = 60.0  # how long a new key may take to be accepted by the bucket's endpoint
NOT_YET = "InvalidAccessKeyId"  # what S3 answers a key it does not know (yet)
LIFETIME_ENV = "NPA_STATE_KEY_LIFETIME_S"
DEFAULT_LIFETIME_S = 2 * 3600  # a CI preview or deploy job, with room; set it to the job's timeout
MIN_LIFETIME_S = 300
SESSION_TOKEN_ENV = "AWS_SESSION_TOKEN"
# Any of these in the environment means the operator chose the bucket's credentials: never mint then.
GIVEN_CREDENTIALS = (ACCESS_KEY_ENV, SECRET_KEY_ENV, PROFILE_ENV, CREDENTIALS_FILE_ENV, SESSION_TOKEN_ENV)
FEDERATED = "federated"


class StateKeyError(NpaError):
    """The state bucket's key could not be minted (or came back unusable): exit 1."""

    kind = "state-key"


def lifetime_s(env: Mapping[str, str] | None = None) -> int:
    """How long a minted key lives: `NPA_STATE_KEY_LIFETIME_S` (seconds), else two hours."""
    raw = (os.environ if env is None else env).get(LIFETIME_ENV, "").strip()
    if not raw:
        return DEFAULT_LIFETIME_S
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < MIN_LIFETIME_S:
        raise UserInputError(
            f"{LIFETIME_ENV}={raw!r}: expected whole seconds, at least {MIN_LIFETIME_S} (the state bucket's "
            "key must outlive the run: set it a little past the job's timeout)"
        )
    return value


def bucket_name(backend_url: str) -> str:
    return urllib.parse.urlsplit(backend_url).netloc


@dataclass(frozen=True)
class MintedKey:
    """A key held for runs of this process. `secret` never leaves memory and this process's environment."""

    cloud: CloudPort = field(repr=False)
    key: AccessKey = field(repr=False)  # its AWS id signs every request: not for logs either
    secret: SecretStr
    expires_at: datetime
    account: str  # the service account it belongs to
    bucket: str

    def remaining_s(self, now: datetime) -> float:
        return (self.expires_at - now).total_seconds()

    def describe(self) -> str:
        when = self.expires_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        return f"a key to state bucket {self.bucket} for {self.account}, expiring {when}"


def _grant_hint(account: str, project: str) -> str:
    return (
        f"grant {account} the right to create access keys for itself: a group it is a member of needs an "
        f"access permit with role `admin` on its own project {project or '(the account project)'}, a "
        "project that holds no other account (`npa-pulumi backend init --cloud nebius --ci-repository "
        "OWNER/REPO` prints it; docs/ci-previews.md). Or give the run a key to the state bucket "
        f"({ACCESS_KEY_ENV} / {SECRET_KEY_ENV}): then none is minted"
    )


Probe = Callable[[str, str, SecretStr], str | None]


def list_probe(backend_url: str, key_id: str, secret: SecretStr) -> str | None:
    """List the backend's bucket (one key at most) with this key: None when S3 answers, else its error code
    (`InvalidAccessKeyId`, `AccessDenied`, `NoSuchBucket`, `HTTP <n>`). OSError when it is unreachable."""
    from .diy_backend import s3_bucket

    bucket = s3_bucket(backend_url, (key_id, secret))
    if bucket is None:
        return None  # a URL npa-pulumi does not read itself (a key prefix): the engine says what it finds
    response = bucket.client.request("GET", bucket.name, query="list-type=2&max-keys=1")
    if response.status == 200:
        return None
    return response.error_code() or f"HTTP {response.status}"


class StateKeys:
    """The process's minted state-bucket keys (module-level `STATE_KEYS`). `probe` checks that a new key
    reads the bucket (`list_probe`), retried with `sleep` for `ready_timeout_s` while S3 does not know it."""

    def __init__(
        self,
        clock: Callable[[], datetime] | None = None,
        probe: Probe = list_probe,
        sleep: Callable[[float], None] = time.sleep,
        ready_timeout_s: float = READY_TIMEOUT_S,
    ) -> None:
        self._lock = threading.Lock()
        self._held: MintedKey | None = None
        self._minted: list[MintedKey] = []  # every key minted and not yet deleted
        self._clock = clock or (lambda: datetime.now(UTC))
        self._probe, self._sleep, self._ready_timeout_s = probe, sleep, ready_timeout_s
        self._atexit = False

    @property
    def held(self) -> MintedKey | None:
        return self._held

    def wanted(
        self, backend_url: str, cloud: str, auth: str | None, env: Mapping[str, str] | None = None
    ) -> bool:
        """Whether a run must mint its key: federated auth (`auth`, else `NPA_NEBIUS_AUTH`) on Nebius, an
        `s3://` backend, and no AWS credentials in the environment (a key this process holds is not the
        operator's)."""
        env = os.environ if env is None else env
        chosen = (auth or env.get(AUTH_ENV, "")).strip().lower()
        if cloud != "nebius" or chosen != FEDERATED or not backend_url.startswith("s3://"):
            return False
        held = self._held
        ours = held is not None and env.get(ACCESS_KEY_ENV) == held.key.aws_access_key_id
        if ours:
            return True
        return not any(env.get(name) for name in GIVEN_CREDENTIALS)

    def ensure(
        self,
        backend_url: str,
        cloud_kind: str,
        auth: str | None,
        cloud: Callable[[], CloudPort],
        life_s: int | None = None,
    ) -> MintedKey | None:
        """The key for a run against `backend_url`, minted when `wanted` (else None: the environment's
        credentials, or none needed). `cloud` builds (or returns) the run's federated adapter; `life_s`
        overrides `NPA_STATE_KEY_LIFETIME_S` (doctor's probe needs minutes, not hours)."""
        if not self.wanted(backend_url, cloud_kind, auth):
            return None
        life, bucket = life_s or lifetime_s(), bucket_name(backend_url)
        with self._lock:
            held = self._held
            if held is not None and held.bucket == bucket and held.remaining_s(self._clock()) >= life / 2:
                return held
            minted = self._mint(cloud(), bucket, life)
            try:
                self._wait_usable(minted, backend_url)
            except BaseException:
                self._delete(minted)
                raise
            self._minted.append(minted)
            self._held = minted
            os.environ[ACCESS_KEY_ENV] = minted.key.aws_access_key_id
            os.environ[SECRET_KEY_ENV] = minted.secret.get_secret_value()
            if not self._atexit:
                atexit.register(self.release_at_exit)
                self._atexit = True
            return minted

    def _mint(self, cloud: CloudPort, bucket: str, life: int) -> MintedKey:
        from npa_pulumi.cloud.errors import CloudError, InvalidArgument, PermissionDenied, Unauthenticated

        principal = cloud.principal()
        account, project = principal.subject, principal.project_id
        if not account or not project:
            raise StateKeyError(
                f"federated auth names no service account with a project ({account or 'no subject'}): a key "
                f"to state bucket {bucket} can only be minted for a service account"
            )
        expires = self._clock() + timedelta(seconds=life)
        try:
            created = cloud.create_access_key(project, account, expires_at=expires)
        except (PermissionDenied, Unauthenticated) as err:
            raise StateKeyError(
                f"Nebius refused to mint a key to state bucket {bucket} for {account}: {err.message}. "
                + _grant_hint(account, project)
            ) from None
        except InvalidArgument as err:
            raise StateKeyError(
                f"Nebius refused a key to state bucket {bucket} expiring {expires:%Y-%m-%d %H:%M UTC}: "
                f"{err.message}. Set {LIFETIME_ENV} to a life it accepts"
            ) from None
        except CloudError as err:
            raise StateKeyError(
                f"could not mint a key to state bucket {bucket} for {account}: {err}"
            ) from None
        minted = MintedKey(
            cloud, created.key, created.secret, created.key.expires_at or expires, account, bucket
        )
        now = self._clock()
        if created.key.state == "EXPIRED" or minted.remaining_s(now) <= 0:
            self._delete(minted)
            raise StateKeyError(
                f"the key to state bucket {bucket} minted for {account} had already expired "
                f"({minted.expires_at:%Y-%m-%d %H:%M:%S UTC}, now {now:%H:%M:%S UTC}): check this machine's "
                f"clock and {LIFETIME_ENV}"
            )
        return minted

    def _wait_usable(self, minted: MintedKey, backend_url: str) -> None:
        """The new key lists the bucket, or a StateKeyError says why it cannot."""
        waited, pause = 0.0, 1.0
        while True:
            try:
                refused = self._probe(backend_url, minted.key.aws_access_key_id, minted.secret)
            except OSError as err:
                reason = getattr(err, "reason", None) or err
                raise StateKeyError(f"state bucket {minted.bucket} is unreachable: {reason}") from None
            if refused is None:
                return
            if refused != NOT_YET or waited >= self._ready_timeout_s:
                break
            self._sleep(pause)
            waited, pause = waited + pause, min(pause * 2, 8.0)
        if refused == "NoSuchBucket":
            raise StateKeyError(
                f"state bucket {minted.bucket} does not exist (`npa-pulumi backend init` creates it)"
            )
        if refused == NOT_YET:
            raise StateKeyError(
                f"{minted.describe()} was minted, but the bucket's endpoint still does not know it after "
                f"{waited:.0f} s ({NOT_YET})"
            )
        raise StateKeyError(
            f"{minted.describe()} was minted, but may not read the bucket ({refused}): a group "
            f"{minted.account} is a member of needs an access permit with role `storage.object-editor` on "
            "the bucket (`npa-pulumi backend init --cloud nebius --ci-repository OWNER/REPO` prints it)"
        )

    @staticmethod
    def _delete(minted: MintedKey) -> str | None:
        """Delete one key; the reason it failed (None: deleted, or already gone)."""
        from npa_pulumi.cloud.errors import CloudError, NotFound

        try:
            minted.cloud.delete_access_key(minted.key.id)
        except NotFound:
            return None
        except CloudError as err:
            return err.message
        except Exception as err:  # best effort at the end of a run: never a traceback over its result
            return type(err).__name__
        return None

    def release(self) -> list[str]:
        """Delete every key this process minted (best effort) and take the held one out of the
        environment. Returns what could not be deleted, in words (each such key expires by itself)."""
        with self._lock:
            minted, self._minted = self._minted, []
            held, self._held = self._held, None
        if held is not None and os.environ.get(ACCESS_KEY_ENV) == held.key.aws_access_key_id:
            os.environ.pop(ACCESS_KEY_ENV, None)
            if os.environ.get(SECRET_KEY_ENV) == held.secret.get_secret_value():
                os.environ.pop(SECRET_KEY_ENV, None)
        failures = []
        for key in minted:
            reason = self._delete(key)
            if reason is not None:
                failures.append(f"could not delete {key.describe()} ({key.key.id}): {reason}")
        return failures

    def release_at_exit(self) -> None:
        for failure in self.release():
            sys.stderr.write(f"npa-pulumi: {failure}; it expires by itself\n")


STATE_KEYS = StateKeys()


def ensure_state_key(
    backend_url: str, cloud_kind: str, auth: str | None, cloud: Callable[[], CloudPort]
) -> MintedKey | None:
    """`STATE_KEYS.ensure`: the run's minted key to its state bucket, or None when none is needed."""
    return STATE_KEYS.ensure(backend_url, cloud_kind, auth, cloud)


def release_state_keys() -> list[str]:
    """`STATE_KEYS.release`: delete the keys this process minted; what could not be deleted, in words."""
    return STATE_KEYS.release()
