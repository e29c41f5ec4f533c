"""Every retry command a run prints is the exact command to paste: the same spec, cloud, profile, backend
and passphrase file, each value shell-quoted (an s3:// backend URL carries `&`), for up/destroy and for
the cloud sweep alike. The engine makes a `Retry` (engine/retries.py); only the CLI's renderer
(cli/retry_commands.py) spells it, as the engine's own code spelled it before the move (checked here against
that code, kept below as `_Before`), and the CLI reads its rendering back as the same request."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import click
import pytest

from npa_pulumi.cli.adopt_commands import adopt_command
from npa_pulumi.cli.deploy_commands import up_command
from npa_pulumi.cli.fleet_options import fleet_fields, rollout, selection, teardown
from npa_pulumi.cli.retry_commands import deletion_flags, render_retry
from npa_pulumi.cli.teardown_commands import cleanup_command, destroy_command
from npa_pulumi.engine.context import FleetContext
from npa_pulumi.engine.requests import FleetRequest, ReceiptDestroyRequest, Rollout, Where
from npa_pulumi.engine.retries import (
    Operation,
    Retry,
    cleanup_retry,
    receipt_resume,
    rollout_resume,
    stack_retry,
)
from npa_pulumi.engine.teardown.cleanup import Cleanup
from npa_pulumi.engine.teardown.model import TeardownOptions
from npa_pulumi.plan import resolve_targets
from npa_pulumi.spec import load_spec

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: retry
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - project_id: project-existing1
    clusters: [{name: train}]
"""
BACKEND = "s3://state?endpoint=http://127.0.0.1:9&region=eu-north1&s3ForcePathStyle=true"


def _context(isolated_home: Path, tmp_path: Path) -> FleetContext:
    path = tmp_path / "my fleet.yaml"
    path.write_text(SPEC)
    passphrase = tmp_path / "pass phrase"
    passphrase.write_text("s3cret\n")
    passphrase.chmod(0o600)
    spec = load_spec(path)
    request = FleetRequest(
        where=Where(cloud="nebius", profile="team a", backend=BACKEND, passphrase_file=str(passphrase))
    )
    return FleetContext(spec, resolve_targets(spec, [], [], None), request, spec_path=str(path))


def _flags(command: str) -> dict[str, str]:
    words = shlex.split(command)
    return {w: words[i + 1] for i, w in enumerate(words) if w.startswith("--") and i + 1 < len(words)}


def test_a_retry_command_names_everything_the_run_used(isolated_home: Path, tmp_path: Path) -> None:
    context = _context(isolated_home, tmp_path)
    command = render_retry(context.retry(Operation.UP, "project-existing1", "train"))
    flags = _flags(command)
    assert shlex.split(command)[:2] == ["npa-pulumi", "up"] and command.endswith(" --yes")
    assert flags["--spec"] == str(tmp_path / "my fleet.yaml")
    assert flags["--backend"] == BACKEND  # quoted: the shell keeps the `&`s
    assert flags["--profile"] == "team a"
    assert flags["--passphrase-file"] == str(tmp_path / "pass phrase")
    assert flags["--cloud"] == "nebius"
    assert (flags["--only-projects"], flags["--only-clusters"]) == ("project-existing1", "train")


def test_the_cloud_sweeps_retry_command_is_as_exact(isolated_home: Path, tmp_path: Path) -> None:
    context = _context(isolated_home, tmp_path)
    command = render_retry(Cleanup(context, TeardownOptions(delete_buckets=True)).retry())
    flags = _flags(command)
    assert shlex.split(command)[:2] == ["npa-pulumi", "cleanup"]
    assert flags["--backend"] == BACKEND
    assert flags["--profile"] == "team a"
    assert flags["--passphrase-file"] == str(tmp_path / "pass phrase")
    assert "--delete-buckets" in shlex.split(command) and command.endswith(" --yes")
    assert "--delete-orphans" in shlex.split(command)  # without it a cleanup deletes nothing in the cloud


def test_a_keyless_run_s_retry_command_repeats_auth_and_its_providers_see_it(
    isolated_home: Path, tmp_path: Path
) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(SPEC)
    spec = load_spec(path)
    request = FleetRequest(where=Where(cloud="nebius", auth="federated"))
    context = FleetContext(spec, resolve_targets(spec, [], [], None), request, spec_path=str(path))
    assert (
        _flags(render_retry(context.retry(Operation.UP, "project-existing1", "train")))["--auth"]
        == "federated"
    )
    # The dynamic providers make their own adapter: the engine's environment carries the choice.
    assert context.settings.extra_env["NPA_NEBIUS_AUTH"] == "federated"
    plain = _context(isolated_home, tmp_path)
    assert "--auth" not in render_retry(plain.retry(Operation.UP, "project-existing1", "train"))
    assert "NPA_NEBIUS_AUTH" not in plain.settings.extra_env


def test_retry_flags_repeat_exactly_what_was_asked() -> None:
    assert deletion_flags(TeardownOptions()) == []
    asked = TeardownOptions(delete_buckets=True, delete_projects=True)
    assert deletion_flags(asked) == ["--delete-buckets", "--delete-projects"]
    every = TeardownOptions(True, True, True, True)
    assert deletion_flags(every) == [
        "--delete-buckets",
        "--delete-nonempty-buckets",
        "--delete-storage-identity",
        "--delete-projects",
    ]


# ------------------------------------------------------------------ the text, byte for byte as before


class _Before:
    """The engine's own spelling before retries became values (context.py `command_line` and
    `retry_command`, teardown/model.py `flags`, teardown/run.py and cleanup.py's `retry_command`,
    rollout.py's and receipts.py's `resume_command`), verbatim: the texts JSON documents and stored state
    (tags, receipts, kubeconfig registrations) held, which the renderer must keep."""

    def __init__(self, where: Where, spec_path: str | None) -> None:
        self.where, self.spec_path = where, spec_path

    def command_line(self, command: str) -> list[str]:
        spec = self.spec_path or "<fleet.yaml>"
        parts = [f"npa-pulumi {command} --spec {shlex.quote(spec)} --cloud {self.where.cloud}"]
        if self.where.profile:
            parts.append(f"--profile {shlex.quote(self.where.profile)}")
        if self.where.auth:
            parts.append(f"--auth {shlex.quote(self.where.auth)}")
        if self.where.backend:
            parts.append(f"--backend {shlex.quote(self.where.backend)}")
        if self.where.passphrase_file:
            parts.append(f"--passphrase-file {shlex.quote(self.where.passphrase_file)}")
        return parts

    def retry_command(self, command: str, project_key: str, cluster: str | None) -> str:
        parts = self.command_line(command)
        parts.append(f"--only-projects {project_key}")
        if cluster:
            parts.append(f"--only-clusters {cluster}")
        parts.append("--yes")
        return " ".join(parts)

    @staticmethod
    def flags(options: TeardownOptions) -> list[str]:
        names = {
            "delete_buckets": "--delete-buckets",
            "delete_nonempty_buckets": "--delete-nonempty-buckets",
            "delete_storage_identity": "--delete-storage-identity",
            "delete_projects": "--delete-projects",
        }
        return [flag for name, flag in names.items() if getattr(options, name)]

    def destroy_retry(self, project_key: str, cluster: str | None, options: TeardownOptions) -> str:
        base = self.retry_command("destroy", project_key, cluster).removesuffix(" --yes")
        return " ".join([base, *self.flags(options), "--yes"])

    def cleanup_retry(self, options: TeardownOptions) -> str:
        # cleanup deletes in the cloud only with --delete-orphans, so a cleanup's retry names it
        return " ".join([*self.command_line("cleanup"), "--delete-orphans", *self.flags(options), "--yes"])

    def rollout_resume(self, options: Rollout) -> str:
        parts = self.command_line("up")
        if options.waves:
            parts.append(f"--waves {shlex.quote(options.waves)}")
        if options.max_in_flight:
            parts.append(f"--max-in-flight {options.max_in_flight}")
        if options.max_in_flight_per_reservation:
            parts.append(f"--max-in-flight-per-reservation {options.max_in_flight_per_reservation}")
        parts.append("--yes")
        return " ".join(parts)

    @staticmethod
    def receipt_resume(receipt_id: str, spec_path: str | None) -> str:
        spec = f" --spec {shlex.quote(spec_path)}" if spec_path else ""
        return f"npa-pulumi destroy --receipt {receipt_id}{spec} --yes"


WHERES = [
    Where(),
    Where(cloud="nebius", profile="team a", backend=BACKEND, passphrase_file="/keys/pass phrase"),
    Where(cloud="nebius", auth="federated", backend="file:///state dir", secrets_provider="awskms://k"),
    Where(cloud="local", profile="p", auth="auto", passphrase_file="/p"),
]
SPECS = [None, "fleet.yaml", "/home/me/my fleet.yaml", "it's.yaml"]
ASKED = [
    TeardownOptions(),
    TeardownOptions(delete_buckets=True, delete_nonempty_buckets=True),
    TeardownOptions(True, True, True, True),
]
ROLLOUTS = [Rollout(), Rollout(waves="research/train;2;rest"), Rollout("25%;rest", 3, 1)]


@pytest.mark.parametrize("where", WHERES)
@pytest.mark.parametrize("spec_path", SPECS)
def test_every_retry_renders_as_the_engine_spelled_it_before(where: Where, spec_path: str | None) -> None:
    before = _Before(where, spec_path)
    for operation in (Operation.UP, Operation.ADOPT):
        for cluster in ("train", None):
            retry = stack_retry(operation, where, spec_path, "research", cluster)
            assert render_retry(retry) == before.retry_command(str(operation), "research", cluster)
    for options in ASKED:
        for cluster in ("train", None):
            retry = stack_retry(Operation.DESTROY, where, spec_path, "research", cluster, options)
            assert render_retry(retry) == before.destroy_retry("research", cluster, options)
        assert render_retry(cleanup_retry(where, spec_path, options)) == before.cleanup_retry(options)
    for chosen in ROLLOUTS:
        assert render_retry(rollout_resume(where, spec_path, chosen)) == before.rollout_resume(chosen)


def test_a_receipt_resume_renders_as_before() -> None:
    receipt = "20250101T000000Z-42-destroy"
    for spec_path in (None, "/abs/fleet.yaml", "/abs/my fleet.yaml"):
        expected = _Before.receipt_resume(receipt, spec_path)
        assert render_retry(receipt_resume(receipt, spec_path)) == expected
    assert (
        render_retry(receipt_resume(receipt, "/abs/my fleet.yaml"))
        == f"npa-pulumi destroy --receipt {receipt} --spec '/abs/my fleet.yaml' --yes"
    )


def test_the_exact_text_of_a_retry() -> None:
    where = Where(cloud="nebius", profile="team a", backend=BACKEND)
    retry = stack_retry(Operation.DESTROY, where, "my fleet.yaml", "alpha", "train", TeardownOptions(True))
    assert render_retry(retry) == (
        "npa-pulumi destroy --spec 'my fleet.yaml' --cloud nebius --profile 'team a' "
        f"--backend '{BACKEND}' --only-projects alpha --only-clusters train --delete-buckets --yes"
    )


# ------------------------------------------------------------------ what the CLI reads back


def _parsed(command: click.Command, text: str) -> dict[str, Any]:
    words = shlex.split(text)
    assert words[0] == "npa-pulumi" and words[1] == command.name
    with command.make_context(str(command.name), words[2:]) as ctx:
        return dict(ctx.params)


def _read_back(retry: Retry) -> dict[str, Any]:
    """The parts of the request the CLI builds from the rendered command, and the spec it names."""
    commands = {
        Operation.UP: up_command,
        Operation.ADOPT: adopt_command,
        Operation.DESTROY: destroy_command,
        Operation.CLEANUP: cleanup_command,
    }
    kw = _parsed(commands[retry.operation], render_retry(retry))
    assert kw["yes"] is True
    if kw.get("receipt_ref"):
        return {"receipt": kw["receipt_ref"], "spec_path": kw["spec_path"]}
    chosen = selection(kw)
    read = {"spec": kw["spec_path"], "selection": chosen, "where": fleet_fields(kw, chosen)["where"]}
    if "delete_buckets" in kw:
        read["teardown"] = teardown(kw)
    if "waves" in kw:
        read["rollout"] = rollout(kw)
    return read


@pytest.mark.parametrize("where", WHERES)
def test_the_cli_reads_a_rendered_retry_back_as_the_same_request(where: Where) -> None:
    retries = [
        stack_retry(op, where, "f.yaml", "research", "train") for op in (Operation.UP, Operation.ADOPT)
    ]
    retries += [stack_retry(Operation.DESTROY, where, "my f.yaml", "research", None, o) for o in ASKED]
    retries += [cleanup_retry(where, "f.yaml", o) for o in ASKED]
    retries += [rollout_resume(where, "f.yaml", r) for r in ROLLOUTS]
    for retry in retries:
        request = retry.request
        assert not isinstance(request, ReceiptDestroyRequest)
        read = _read_back(retry)
        assert read["spec"] == retry.spec_path
        assert read["selection"] == request.selection
        assert read["where"] == request.where  # a new stack's secrets provider is not the retry's
        if "teardown" in read:
            assert read["teardown"] == request.teardown  # type: ignore[union-attr]
        if "rollout" in read:
            assert read["rollout"] == request.rollout  # type: ignore[union-attr]
    resume = receipt_resume("20250101T000000Z-42-destroy", "/abs/my fleet.yaml")
    assert _read_back(resume) == {"receipt": "20250101T000000Z-42-destroy", "spec_path": "/abs/my fleet.yaml"}
