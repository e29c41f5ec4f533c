"""The typed requests from the CLI to the SDK and the engine: a selection checks its shard and stage once,
when it is made; bad combinations are clear UserInputErrors before any spec is read; the engine reads a
request through its parts; a command builds its selection once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from npa_pulumi.cli.fleet_output import banner_of
from npa_pulumi.cli.main import cli
from npa_pulumi.engine import requests as engine_requests
from npa_pulumi.engine.share import Share, Stage, parse_stage
from npa_pulumi.errors import UserInputError
from npa_pulumi.output.results import TeardownPhase
from npa_pulumi.plan import shards
from npa_pulumi.plan.shards import ShardError
from npa_pulumi.sdk.fleet import (
    Approval,
    DestroyRequest,
    MigVerifyRequest,
    ReceiptDestroyRequest,
    RefreshRequest,
    Rollout,
    Selection,
    StatusRequest,
    TeardownOptions,
    UpRequest,
    select,
)
from npa_pulumi.sdk.requests import Policies, Where

SPEC = str(Path(__file__).resolve().parents[3] / "examples" / "fleet1-test.yaml")


def test_a_selection_with_stage_and_shard_is_checked_once_and_selects_its_share() -> None:
    chosen = Selection(stage="clusters", shard="1/2")
    other = Selection(stage="clusters", shard="2/2")
    everything = select(SPEC).targets
    mine, theirs = select(SPEC, chosen), select(SPEC, other).targets
    assert mine.selection is chosen and mine.spec_path == SPEC
    assert sorted(t.cluster_stack for t in [*mine.targets, *theirs]) == sorted(
        t.cluster_stack for t in everything
    )
    assert not {t.cluster_stack for t in mine.targets} & {t.cluster_stack for t in theirs}


def test_projects_and_clusters_narrow_the_selection() -> None:
    [target] = select(SPEC, Selection(projects=("a",))).targets
    assert target.project_key == "a"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: Selection(stage="projects", shard="1/2"),
            "--stage projects cannot be combined with --shard",
        ),
        (lambda: Selection(stage="everything"), "expected one of projects, clusters"),
        (lambda: UpRequest(selection=Selection(shard="1/2"), break_lock=True), "--break-lock cannot"),
        (lambda: DestroyRequest(selection=Selection(shard="1/2"), break_lock=True), "--break-lock cannot"),
        (lambda: RefreshRequest(selection=Selection(shard="1/2"), break_lock=True), "--break-lock cannot"),
        (
            lambda: DestroyRequest(teardown=TeardownOptions(delete_nonempty_buckets=True)),
            "--delete-nonempty-buckets only applies together with --delete-buckets",
        ),
        (
            lambda: ReceiptDestroyRequest(
                receipt="r", teardown=TeardownOptions(delete_nonempty_buckets=True)
            ),
            "--delete-nonempty-buckets only applies",
        ),
        (lambda: UpRequest(rollout=Rollout(waves="rest;3")), "rest"),
    ],
)
def test_bad_combinations_are_clear_user_input_errors(make: object, message: str) -> None:
    with pytest.raises(UserInputError) as caught:
        make()  # type: ignore[operator]
    assert message in str(caught.value)
    assert caught.value.exit_code == 2


def test_a_bad_shard_is_an_invalid_shard() -> None:
    with pytest.raises(ShardError):
        Selection(shard="5/4")


def test_the_engine_reads_a_request_through_its_parts() -> None:
    up = UpRequest(
        selection=Selection(shard="2/3", stage="clusters"),
        where=Where(cloud="nebius", profile="prod"),
        concurrency=9,
        fail_fast=True,
        policies=Policies(packs=("p",), config="c.json"),
        create_projects=False,
        health_gate=False,
        prices="prices.yaml",
        rollout=Rollout(waves="3;rest", max_in_flight=2),
    )
    assert up.selection.share == Share(Stage.CLUSTERS, "2/3")
    assert (up.where.cloud, up.where.profile, up.concurrency) == ("nebius", "prod", 9)
    assert engine_requests.fails_fast(up) and not engine_requests.creates_projects(up)
    assert not engine_requests.runs_health_gate(up) and not engine_requests.breaks_locks(up)
    assert engine_requests.policies(up) == Policies(("p",), "c.json")
    assert engine_requests.prices(up) == "prices.yaml"
    assert engine_requests.rollout(up).waves == "3;rest" and not engine_requests.refreshes(up)
    # What an operation does not take reads as its default, never as another operation's setting.
    status = StatusRequest(prices="x")
    assert engine_requests.prices(status) == "x" and engine_requests.policies(status) == Policies()
    assert not engine_requests.fails_fast(status) and engine_requests.runs_health_gate(status)
    assert engine_requests.breaks_locks(RefreshRequest(break_lock=True))
    assert MigVerifyRequest(wait=True).timeout_s is None  # the verifier's own default


def test_a_command_builds_its_selection_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`--stage`, `--shard`: parsed and checked once per command, in the selection."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    parse, check = shards.parse_shard, parse_stage
    calls = {"parse_shard": 0, "check_stage": 0}

    def counted_parse(text: str) -> object:
        calls["parse_shard"] += 1
        return parse(text)

    def counted_check(stage: str | None, shard: str | None) -> Stage | None:
        calls["check_stage"] += 1
        return check(stage, shard)

    monkeypatch.setattr("npa_pulumi.engine.requests.parse_shard", counted_parse)
    monkeypatch.setattr("npa_pulumi.engine.requests.parse_stage", counted_check)
    stacks = {t.cluster_stack for t in select(SPEC).targets}
    # A shard of many that owns none of this small fleet's clusters: nothing runs, one JSON document.
    empty = next(f"{k}/1024" for k in range(1, 1025) if not any(parse(f"{k}/1024").owns(s) for s in stacks))
    result = CliRunner().invoke(
        cli, ["refresh", "--spec", SPEC, "--stage", "clusters", "--shard", empty, "--output", "json"]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["command"] == "refresh" and document["shard"] == empty and document["stacks"] == []
    assert calls == {"parse_shard": 1, "check_stage": 1}
    assert stacks  # the fleet has clusters; the shard just owns none


def test_the_cli_banner_of_each_approval() -> None:
    spec = select(SPEC).spec
    targets = select(SPEC).targets
    phase = TeardownPhase(phase="bucket", project_key="a", stack="fleet1-test.a", deletes={"bucket": "b"})
    deploy = banner_of(Approval("deploy", spec.name, spec, targets))
    assert deploy[0].startswith("About to create/update fleet 'fleet1-test'") and len(deploy) == 1 + len(
        targets
    )
    destroy = banner_of(Approval("destroy", spec.name, spec, targets, [phase], "r1"))
    assert destroy[0].startswith("About to DESTROY") and "Continuing the teardown of receipt r1." in destroy
    assert destroy[-1] == "  bucket:fleet1-test.a: delete {'bucket': 'b'}"
    guarded = banner_of(Approval("destroy", "f", None, [], [phase], "r1"))
    assert guarded[0] == "About to CONTINUE the teardown of fleet 'f' from receipt r1."
    cleanup = banner_of(Approval("clean up", "f", spec, [], [phase]))
    assert cleanup[:2] == [
        "About to CLEAN UP fleet 'f': delete what no stack references.",
        "Phases, in order:",
    ]


def test_the_engine_takes_the_selection_as_it_is(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK opens the engine on the selected targets: no second stage check, no second shard."""
    from npa_pulumi.sdk.operations import open_fleet

    chosen = Selection(stage="clusters", shard="1/2")
    selected = select(SPEC, chosen)

    def refuse(*_args: object) -> None:
        raise AssertionError("checked or selected again")

    monkeypatch.setattr("npa_pulumi.engine.requests.parse_shard", refuse)
    monkeypatch.setattr("npa_pulumi.engine.requests.parse_stage", refuse)
    monkeypatch.setattr("npa_pulumi.plan.shards.parse_shard", refuse)
    monkeypatch.setattr("npa_pulumi.engine.share.parse_stage", refuse)
    fleet = open_fleet(selected, RefreshRequest(selection=chosen))
    try:
        assert fleet.context.targets == selected.targets
        assert fleet.context.share == Share(Stage.CLUSTERS, "1/2")
    finally:
        fleet.close()


def test_reconcile_is_asked_only_of_the_verifiers_that_repair() -> None:
    """`verify-graphics --reconcile` is a GraphicsVerifyRequest; asked of another verifier it is refused
    before anything runs (as a MigVerifyRequest's `wait`/`reconcile` are)."""
    from typing import Any, cast

    from npa_pulumi.engine.operations.verify import Verifier, run
    from npa_pulumi.sdk.requests import GraphicsVerifyRequest

    assert GraphicsVerifyRequest().reconcile is False
    context = cast(Any, None)  # never reached
    with pytest.raises(TypeError, match="verify-graphics'"):
        run(context, GraphicsVerifyRequest(reconcile=True), Verifier.STORAGE)
    with pytest.raises(TypeError, match="verify-mig's"):
        run(context, MigVerifyRequest(reconcile=True), Verifier.GRAPHICS)
