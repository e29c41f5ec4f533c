"""What a run leaves to do again is a value (engine/retries.py): each engine site makes the right `Retry`
(operation and narrowed request), puts it on the result beside its text, and writes the text its caller's
renderer spells where it stores one; a caller with no renderer (a Python caller of the SDK) gets the
neutral text, never a command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from npa_pulumi.cli.retry_commands import render_retry
from npa_pulumi.engine.automation import StackOp
from npa_pulumi.engine.context import FleetContext
from npa_pulumi.engine.lifecycle import DESTROY_INCOMPLETE, TAG_RETRY, TAG_STATE
from npa_pulumi.engine.operations.common import apply_lifecycle
from npa_pulumi.engine.requests import (
    AdoptRequest,
    CleanupRequest,
    DestroyRequest,
    FleetRequest,
    ReceiptDestroyRequest,
    Selection,
    UpRequest,
    Where,
)
from npa_pulumi.engine.retries import (
    Operation,
    RenderRetry,
    Retry,
    cleanup_retry,
    describe,
    receipt_resume,
    stack_retry,
    text_of,
)
from npa_pulumi.engine.teardown.cleanup import Cleanup
from npa_pulumi.engine.teardown.model import TeardownOptions
from npa_pulumi.engine.teardown.phases import phase_factory
from npa_pulumi.engine.teardown.receipts import resume_retry
from npa_pulumi.engine.teardown.resume import Receipt, Resume
from npa_pulumi.engine.teardown.run import Teardown
from npa_pulumi.errors import UserInputError
from npa_pulumi.output.results import FleetResult, PhaseOutcome, StackResult, TeardownPhase
from npa_pulumi.plan import resolve_targets
from npa_pulumi.spec import load_spec

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: again
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - project_id: project-existing1
    clusters: [{name: train}]
"""
WHERE = Where(cloud="local", profile="team a", backend="file:///state", secrets_provider="awskms://k")
NARROW = Where(cloud="local", profile="team a", backend="file:///state")  # a retry's: no secrets provider
ASKED = TeardownOptions(delete_buckets=True, delete_projects=True)


def _context(tmp_path: Path, render: RenderRetry | None = None) -> FleetContext:
    path = tmp_path / "fleet.yaml"
    path.write_text(SPEC)
    spec = load_spec(path)
    request = FleetRequest(where=WHERE)
    return FleetContext(spec, resolve_targets(spec, [], [], None), request, str(path), render_retry=render)


class Recorder:
    """The executor's lifecycle writes, as `status` on another machine would read them back."""

    def __init__(self) -> None:
        self.tags: dict[str, dict[str, str]] = {}

    def write_lifecycle(self, op: StackOp, tags: dict[str, str], remove: tuple[str, ...] = ()) -> None:
        self.tags[op.stack] = dict(tags)


# ------------------------------------------------------------------------------------ the value


def test_a_retry_pairs_an_operation_with_its_own_request() -> None:
    assert Retry(Operation.DESTROY, ReceiptDestroyRequest(receipt="r")).operation is Operation.DESTROY
    with pytest.raises(TypeError):
        Retry(Operation.CLEANUP, DestroyRequest())  # a destroy request is a cleanup's type, not its kind
    with pytest.raises(TypeError):
        Retry(Operation.UP, AdoptRequest())
    with pytest.raises(ValueError):
        stack_retry(Operation.CLEANUP, WHERE, None, "alpha")


def test_a_stack_retry_is_narrowed_to_its_project_and_cluster() -> None:
    retry = stack_retry(Operation.DESTROY, WHERE, "f.yaml", "alpha", "train", ASKED)
    assert retry == Retry(
        Operation.DESTROY,
        DestroyRequest(
            selection=Selection(projects=("alpha",), clusters=("train",)), where=NARROW, teardown=ASKED
        ),
        "f.yaml",
    )
    project = stack_retry(Operation.UP, WHERE, None, "alpha")
    assert project.request == UpRequest(selection=Selection(projects=("alpha",)), where=NARROW)


def test_the_neutral_text_names_each_field_once_and_is_no_command_line() -> None:
    retry = stack_retry(Operation.DESTROY, WHERE, "/my fleet.yaml", "alpha", "train", ASKED)
    assert describe(retry) == (
        'operation=destroy spec="/my fleet.yaml" cloud=local profile="team a" backend=file:///state '
        "projects=alpha clusters=train delete_buckets=true delete_projects=true"
    )
    assert describe(receipt_resume("20250101T000000Z-1-destroy")) == (
        "operation=destroy receipt=20250101T000000Z-1-destroy"
    )
    quoted = describe(cleanup_retry(Where(backend='s3://b?a="1"'), None, TeardownOptions()))
    assert quoted == r'operation=cleanup cloud=local backend="s3://b?a=\"1\""'  # JSON escapes
    assert text_of(retry, None) == describe(retry)
    assert text_of(retry, render_retry) == render_retry(retry)


# ------------------------------------------------------------------------------------ the sites


def test_the_context_puts_its_retry_on_a_result_as_its_caller_spells_it(
    isolated_home: Path, tmp_path: Path
) -> None:
    spec_path = str(tmp_path / "fleet.yaml")
    for render, spell in ((render_retry, render_retry), (None, describe)):
        context = _context(tmp_path, render)
        stack = StackResult(stack="again.p.train", kind="cluster", project_key="p", status="failed")
        text = context.mark_retry(stack, context.retry(Operation.UP, "p", "train"))
        assert stack.retry == stack_retry(Operation.UP, WHERE, spec_path, "p", "train")
        assert stack.retry_command == text == spell(stack.retry)
        assert "retry" not in stack.model_dump() and stack.model_dump()["retry_command"] == text


def test_a_kept_cluster_whose_gate_failed_is_retried_by_up(isolated_home: Path, tmp_path: Path) -> None:
    context = _context(tmp_path, render_retry)
    stack = StackResult(
        stack="again.project-existing1.train",
        kind="cluster",
        project_key="project-existing1",
        cluster_name="train",
        status="deployed",
        outputs={"lifecycle": "deployed-validation-failed", "health_evidence": {"reason": "nccl"}},
    )
    apply_lifecycle(context, stack)
    assert stack.status == "deployed-validation-failed"
    assert stack.retry == context.retry(Operation.UP, "project-existing1", "train")
    assert stack.retry_command == render_retry(stack.retry)


def test_a_failed_cluster_destroy_records_its_retry_in_the_result_the_phase_and_the_tag(
    isolated_home: Path, tmp_path: Path
) -> None:
    for render, spell in ((render_retry, render_retry), (None, describe)):
        context = _context(tmp_path, render)
        recorder = Recorder()
        context.executor = recorder  # type: ignore[assignment]
        teardown = Teardown(context, ASKED)
        op = StackOp("again.project-existing1.train", "cluster", "project-existing1", "train", None, {})
        phase = phase_factory("project-existing1", op.stack)("cluster")
        item = op.result("failed", error="the destroy failed: boom")
        teardown._after_cluster(op, item, phase)
        expected = context.retry(Operation.DESTROY, "project-existing1", "train", ASKED)
        assert item.status == "destroy-incomplete" and item.retry == phase.retry == expected
        assert isinstance(expected.request, DestroyRequest) and expected.request.teardown == ASKED
        assert item.retry_command == phase.retry_command == spell(expected)
        assert phase.status is PhaseOutcome.FAILED
        # What `status` on another machine shows: the same text, in the stack's lifecycle tags.
        assert recorder.tags[op.stack][TAG_STATE] == DESTROY_INCOMPLETE
        assert recorder.tags[op.stack][TAG_RETRY] == spell(expected)[:250]
        # A guarded phase of the project (bucket, storage identity, project) retries the project's destroy.
        bucket = phase_factory("project-existing1", "again.project-existing1")("bucket")
        teardown.guarded.retry(bucket, "project-existing1")
        assert bucket.retry == context.retry(Operation.DESTROY, "project-existing1", None, ASKED)
        assert bucket.retry_command == spell(bucket.retry)
        assert "retry" not in bucket.to_json()  # receipts and JSON keep the text only


def test_the_cloud_sweep_retries_itself_with_the_same_deletions(isolated_home: Path, tmp_path: Path) -> None:
    context = _context(tmp_path, render_retry)
    retry = Cleanup(context, ASKED).retry()
    assert retry == Retry(
        Operation.CLEANUP, CleanupRequest(where=NARROW, teardown=ASKED), str(tmp_path / "fleet.yaml")
    )


def test_a_receipt_resume_names_the_spec_only_while_a_stack_phase_is_left() -> None:
    guarded = TeardownPhase(phase="bucket", project_key="a", stack="f.a", status=PhaseOutcome.REFUSED)
    stack = TeardownPhase(phase="cluster", project_key="a", stack="f.a.c", status=PhaseOutcome.FAILED)
    done = stack.model_copy(update={"status": PhaseOutcome.DONE})
    assert resume_retry("r1", [guarded, done], "/abs/f.yaml") == receipt_resume("r1")
    assert resume_retry("r1", [guarded, stack], "/abs/f.yaml") == Retry(
        Operation.DESTROY, ReceiptDestroyRequest(receipt="r1", spec_path="/abs/f.yaml")
    )
    assert resume_retry("r1", [stack], None) == receipt_resume("r1")  # no spec recorded: none to name


def test_a_resume_without_the_spec_names_the_retry_that_has_it(isolated_home: Path) -> None:
    document = {
        "fleet": "again",
        "spec_path": "/abs/my fleet.yaml",
        "phases": [{"phase": "cluster", "project_key": "a", "stack": "again.a.c", "status": "failed"}],
    }
    receipt = Receipt("r1", Path("r1.json"), document)
    for render, spell in ((render_retry, render_retry), (None, describe)):
        resume = Resume(receipt, TeardownOptions(), cloud=None, say=print, render_retry=render)  # type: ignore[arg-type]
        with pytest.raises(UserInputError) as raised:
            resume.plan()
        assert str(raised.value).endswith(f"the spec: {spell(receipt_resume('r1', '/abs/my fleet.yaml'))}")
        phase = TeardownPhase(phase="bucket", project_key="a", stack="again.a")
        resume.guarded.retry(phase, "a")  # a guarded phase left: this resume's own receipt continues it
        assert phase.retry == receipt_resume(resume.path.stem)
        assert phase.retry_command == spell(phase.retry)
    assert render_retry(receipt_resume("r1", "/abs/my fleet.yaml")).endswith(
        "--spec '/abs/my fleet.yaml' --yes"
    )


def test_a_result_keeps_its_resume_outside_the_json() -> None:
    result = FleetResult(command="destroy", fleet="f", cloud="local", backend="b")
    result.resume, result.resume_command = receipt_resume("r1"), "text"
    assert "resume" not in result.model_dump() and result.to_json()["resume_command"] == "text"


def test_the_sdk_hands_its_callers_renderer_to_the_engine(isolated_home: Path, tmp_path: Path) -> None:
    from npa_pulumi.sdk.operations import open_fleet, select

    path = tmp_path / "fleet.yaml"
    path.write_text(SPEC)
    selected = select(path)
    assert open_fleet(selected, UpRequest(), render_retry).context.render_retry is render_retry
    neutral = open_fleet(selected, UpRequest()).context  # a Python caller's default: the neutral text
    assert neutral.retry_text(neutral.retry(Operation.UP, "p")) == (
        f"operation=up spec={path} cloud=local projects=p"
    )
