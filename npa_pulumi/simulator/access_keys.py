"""Access-key secrets: shown once, at creation, and only their SHA-256 is stored (`probe_bucket` checks a
presented secret against it). The cloud's S3 server (SeaweedFS, seaweed.py) verifies HMAC signatures,
which needs the secret itself, so a secret is not random: it is derived from its key id under the cloud's
master key (a 0600 file in the cloud's directory, `access_key_secret`), and each key's secret is derived
again for the server's identities file.
The database alone never reveals a secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from pathlib import Path

MASTER_KEY_FILENAME = "access-keys.master"
SECRET_DERIVATION = "hmac-sha256-v1"  # access-key data `secret_derivation`: how its secret was made
_AWS_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def new_aws_access_key_id() -> str:
    return "NPALOCAL" + "".join(secrets.choice(_AWS_ID_ALPHABET) for _ in range(12))


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _master_key(directory: Path) -> bytes:
    """The cloud's access-key master key, created (0600, first writer wins) on first use."""
    path = directory / MASTER_KEY_FILENAME
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        text = ""
    if not text:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(32) + "\n")
        try:
            os.link(tmp, path)  # atomic and exclusive: a reader never sees a half-written key
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
        text = path.read_text().strip()
    return bytes.fromhex(text)


def access_key_secret(directory: Path, aws_access_key_id: str) -> str:
    """The secret of the access key `aws_access_key_id` of the cloud at `directory` (never logged)."""
    digest = hmac.new(
        _master_key(directory), b"npa-local-access-key:" + aws_access_key_id.encode(), hashlib.sha256
    ).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")
