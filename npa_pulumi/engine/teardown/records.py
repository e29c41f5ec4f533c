"""A project's teardown record: what its stack proved it owns, kept under the npa home before the stack is
destroyed, so a later, narrower teardown still has the proof (`<npa home>/teardown/<fleet>/<stack>.json`)."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, fields
from pathlib import Path

from npa_pulumi.engine.teardown.model import ProjectEvidence
from npa_pulumi.output.results import TeardownPhase
from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.home import npa_home

log = logging.getLogger(__name__)


def records_dir(fleet: str) -> Path:
    return npa_home() / "teardown" / fleet


def private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def read_record(fleet: str, stack: str) -> ProjectEvidence | None:
    path = records_dir(fleet) / f"{stack}.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        log.warning("teardown record %s is unreadable (%s): treated as no proof", path, err)
        return None
    known = {f.name for f in fields(ProjectEvidence)}
    try:
        return ProjectEvidence(**{k: v for k, v in data.items() if k in known})
    except TypeError:
        return None


def write_record(fleet: str, evidence: ProjectEvidence) -> None:
    path = private_dir(records_dir(fleet)) / f"{evidence.project_stack}.json"
    write_atomically(path, json.dumps(asdict(evidence), indent=2, sort_keys=True) + "\n", mode=0o600)


def drop_record(fleet: str, stack: str) -> None:
    (records_dir(fleet) / f"{stack}.json").unlink(missing_ok=True)


def settle_record(fleet: str, ev: ProjectEvidence, phases: list[TeardownPhase]) -> None:
    """Forget what is gone; drop the record once nothing this fleet created remains to prove."""
    done = {p.phase for p in phases if p.status in ("done", "absent")}
    if "bucket" in done:
        ev.bucket_id, ev.bucket_name, ev.bucket_created = "", "", False
    if "storage-identity" in done:
        ev.service_account_id, ev.service_account_created, ev.key_id = "", False, ""
    if "network" in done:
        ev.network_id, ev.subnet_id, ev.network_owned = "", "", False
    if "project" in done or not (ev.project_created or ev.bucket_created or ev.service_account_created):
        drop_record(fleet, ev.project_stack)
    else:
        write_record(fleet, ev)
