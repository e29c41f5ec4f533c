"""The S3 access key npa-pulumi itself signs with, found where the Pulumi engine (AWS SDK v2) finds it:
`AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`, else the profile `AWS_PROFILE` (default `default`) of the
shared credentials file `AWS_SHARED_CREDENTIALS_FILE` (default `~/.aws/credentials`), which is what
`backend init --cloud local` writes. A session token, or a profile that needs more than a static key
(a role, SSO, a credential process), is left to the engine: None. The secret is never logged.
"""

from __future__ import annotations

import configparser
import os
from pathlib import Path

from pydantic import SecretStr

ACCESS_KEY_ENV = "AWS_ACCESS_KEY_ID"
SECRET_KEY_ENV = "AWS_SECRET_ACCESS_KEY"
PROFILE_ENV = "AWS_PROFILE"
CREDENTIALS_FILE_ENV = "AWS_SHARED_CREDENTIALS_FILE"


def credentials_file() -> Path:
    return Path(os.environ.get(CREDENTIALS_FILE_ENV) or Path.home() / ".aws" / "credentials").expanduser()


def from_profile(path: Path, profile: str) -> tuple[str, SecretStr] | None:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(path.read_text())
    except (OSError, UnicodeDecodeError, configparser.Error):
        return None
    if not parser.has_section(profile):
        return None
    section = parser[profile]
    key, secret = section.get("aws_access_key_id", ""), section.get("aws_secret_access_key", "")
    if not (key and secret) or section.get("aws_session_token"):
        return None
    return key.strip(), SecretStr(secret.strip())


def from_environment() -> tuple[str, SecretStr] | None:
    """The static access key the environment names (the variables, else the shared-credentials
    profile), or None."""
    if os.environ.get("AWS_SESSION_TOKEN"):
        return None  # a session token would have to be signed too
    key, secret = os.environ.get(ACCESS_KEY_ENV, ""), os.environ.get(SECRET_KEY_ENV, "")
    if key and secret:
        return key, SecretStr(secret)
    if key or secret:
        return None
    if not (os.environ.get(PROFILE_ENV) or os.environ.get(CREDENTIALS_FILE_ENV)):
        return None
    return from_profile(credentials_file(), os.environ.get(PROFILE_ENV) or "default")
