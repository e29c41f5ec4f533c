"""The one place a retry becomes a command line: `render_retry` spells an engine `Retry` (the operation and
the request that does it again: npa_pulumi/engine/retries.py) as the exact `npa-pulumi` command to paste.

The CLI gives it to the SDK's operations (`render_retry=`), so the text a run prints (`retry_command`,
`resume_command`) and the text it stores where another machine's `status` reads it (the destroy-incomplete
tag, the rollout's resume tag, a receipt, the kubeconfig registration's destroy hint) is this command.

    npa-pulumi up --spec fleet.yaml --cloud nebius --profile 'team a' --backend 's3://state?a=1&b=2'
        --only-projects alpha --only-clusters train --yes
    npa-pulumi destroy --receipt 20250101T000000Z-42-destroy --spec /abs/fleet.yaml --yes

Every value is shell-quoted (an s3:// URL carries `&` between its query parameters; a path may hold a
space); the flags are the commands' own (cli/fleet_options.py, cli/rollout_options.py).
"""

from __future__ import annotations

import shlex
from dataclasses import fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from npa_pulumi.sdk.requests import Retry, Rollout, Selection, TeardownOptions, Where

PROGRAM = "npa-pulumi"
_NO_SPEC = "<fleet.yaml>"  # the run read its spec from no file: the user fills it in


def render_retry(retry: Retry) -> str:
    """The command line that does `retry` again; what the CLI reads back from it is `retry.request`."""
    from npa_pulumi.sdk.requests import CleanupRequest, ReceiptDestroyRequest, UpRequest

    request = retry.request
    if isinstance(request, ReceiptDestroyRequest):
        spec = [f"--spec {shlex.quote(request.spec_path)}"] if request.spec_path else []
        return " ".join(
            [f"{PROGRAM} {retry.operation} --receipt {shlex.quote(request.receipt)}", *spec, "--yes"]
        )
    parts = [f"{PROGRAM} {retry.operation} --spec {shlex.quote(retry.spec_path or _NO_SPEC)}"]
    parts += where_flags(request.where)
    parts += selection_flags(request.selection)
    if isinstance(request, CleanupRequest):  # destroy and cleanup
        if retry.operation == "cleanup":
            parts.append(
                "--delete-orphans"
            )  # a cleanup that ran phases deleted in the cloud: so does its retry
        parts += deletion_flags(request.teardown)
    if isinstance(request, UpRequest):
        parts += rollout_flags(request.rollout)
    parts.append("--yes")
    return " ".join(parts)


def where_flags(where: Where) -> list[str]:
    """`--cloud` always (its default is local), then the profile, auth, backend and passphrase file."""
    parts = [f"--cloud {shlex.quote(where.cloud)}"]
    for flag, value in (
        ("--profile", where.profile),
        ("--auth", where.auth),
        ("--backend", where.backend),
        ("--passphrase-file", where.passphrase_file),
    ):
        if value:
            parts.append(f"{flag} {shlex.quote(value)}")
    return parts


def selection_flags(selection: Selection) -> list[str]:
    """`--only-projects` and `--only-clusters`, comma-joined (as the commands read them)."""
    parts = []
    if selection.projects:
        parts.append(f"--only-projects {shlex.quote(','.join(selection.projects))}")
    if selection.clusters:
        parts.append(f"--only-clusters {shlex.quote(','.join(selection.clusters))}")
    return parts


def deletion_flags(teardown: TeardownOptions) -> list[str]:
    """The opt-in deletions asked for, as `deletion_options` spells them (`--delete-buckets`, ...)."""
    return [f"--{f.name.replace('_', '-')}" for f in fields(teardown) if getattr(teardown, f.name)]


def rollout_flags(rollout: Rollout) -> list[str]:
    """`--waves`, `--max-in-flight`, `--max-in-flight-per-reservation` and `--ignore-maintenance`, each
    where it was given."""
    parts = []
    if rollout.waves:
        parts.append(f"--waves {shlex.quote(rollout.waves)}")
    if rollout.max_in_flight:
        parts.append(f"--max-in-flight {rollout.max_in_flight}")
    if rollout.max_in_flight_per_reservation:
        parts.append(f"--max-in-flight-per-reservation {rollout.max_in_flight_per_reservation}")
    if rollout.ignore_maintenance:
        parts.append("--ignore-maintenance")
    return parts
