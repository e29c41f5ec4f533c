"""Where the audit trail lives in a DIY backend: one object per record beside the stacks, never rewritten.

    <backend>/.pulumi/npa-audit/<project>/<fleet>/<UTC time>-<random>.json

on a file:// backend (written to a temp file, then linked to its name: a name that exists is never
replaced) and on an s3:// one (one PUT of a name no other run can pick: the time to the microsecond and 64
random bits), with the same key the engine's objects are read with (diy_backend.s3_bucket). The engine
ignores what it does not know under `.pulumi/`; the records are plain JSON, readable without npa-pulumi.
Other backends (Pulumi Cloud keeps its own audit log) and an s3:// backend with no usable key here have no
trail: `append` says so and the run goes on.
"""

from __future__ import annotations

import os
import secrets
from datetime import UTC, datetime
from pathlib import Path

from npa_pulumi.engine.automation.diy_backend import S3Unreadable, diy_root, s3_bucket

AUDIT_DIR = ".pulumi/npa-audit"
SUFFIX = ".json"


class AuditUnavailable(Exception):
    """The backend keeps no trail here (another backend, no key for its bucket), or it refused a write."""


def _prefix(project_name: str, fleet: str) -> str:
    return f"{AUDIT_DIR}/{project_name}/{fleet}/"


def record_name(now: datetime | None = None) -> str:
    """A name that sorts by time and that no other run picks."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S.%fZ")
    return f"{stamp}-{secrets.token_hex(8)}{SUFFIX}"


def append(backend_url: str, project_name: str, fleet: str, text: str, name: str | None = None) -> str:
    """Write one record; returns where it is. AuditUnavailable when this backend keeps no trail here."""
    name = name or record_name()
    key = _prefix(project_name, fleet) + name
    root = diy_root(backend_url)
    if root is not None:
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{name}.{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.link(tmp, path)  # atomic, and refuses a name that exists: a record is never rewritten
        except OSError as err:
            raise AuditUnavailable(f"could not write the audit record {path}: {err}") from None
        finally:
            tmp.unlink(missing_ok=True)
        return str(path)
    bucket = s3_bucket(backend_url)
    if bucket is None:
        raise AuditUnavailable(
            "this backend keeps no npa-pulumi audit trail (file:// and s3:// backends with an access key do)"
        )
    try:
        response = bucket.client.request(
            "PUT", bucket.name, key, body=text.encode("utf-8"), content_type="application/json"
        )
    except OSError as err:
        raise AuditUnavailable(f"could not write the audit record s3://{bucket.name}/{key}: {err}") from None
    if response.status not in (200, 201):
        raise AuditUnavailable(
            f"could not write the audit record s3://{bucket.name}/{key}: HTTP {response.status}"
        )
    return f"s3://{bucket.name}/{key}"


def read_all(backend_url: str, project_name: str, fleet: str) -> list[tuple[str, str]]:
    """Every record of the fleet as (name, text), oldest first. AuditUnavailable when none can be read."""
    prefix = _prefix(project_name, fleet)
    root = diy_root(backend_url)
    if root is not None:
        directory = root / prefix
        if not directory.is_dir():
            return []
        return [
            (path.name, path.read_text(encoding="utf-8"))
            for path in sorted(directory.iterdir())
            if path.name.endswith(SUFFIX) and not path.name.startswith(".")
        ]
    bucket = s3_bucket(backend_url)
    if bucket is None:
        raise AuditUnavailable(
            "this backend keeps no npa-pulumi audit trail (file:// and s3:// backends with an access key do)"
        )
    found: list[tuple[str, str]] = []
    try:
        for key in sorted(bucket.keys(prefix, every_page=True)):
            if not key.endswith(SUFFIX):
                continue
            body = bucket.get(key)
            if body is not None:
                found.append((Path(key).name, body.decode("utf-8", "replace")))
    except S3Unreadable as err:
        raise AuditUnavailable(
            f"could not read the audit trail in s3://{bucket.name}/{prefix}: {err}"
        ) from None
    return found
