"""Continuing a teardown from its receipt: `npa-pulumi destroy --receipt ID`.

A destroy that ends as a partial cleanup (a permission denied on a delete, a deletion that was asked for
and refused because ownership could not be proved, a bucket that changed, a stack that would not go)
names one command that continues it: `npa-pulumi destroy --receipt ID --yes`.
The receipt holds the fleet, the cloud, the backend, the profile and tenant, the selection and the flags
that were asked for, and each phase's outcome. Identity comes from the exact flags given, then the
receipt, then the spec; where two of them name the same thing differently, the run stops before any
mutation (exit 2).

Without the spec, only the guarded phases (bucket, storage identity, project) can run: they need the
cloud and the teardown record (`<npa home>/teardown/<fleet>/<project stack>.json`), the proof of
ownership written before the project stack was destroyed. A cluster or network phase that is not finished
destroys a Pulumi stack, which needs the spec: the receipt's resume command then carries `--spec`.

Phases the receipt records as done stay done (`carry_completed`): a retry never turns them back into
"unknown" or "absent". Every resumed run writes a receipt of its own that names the one it continues.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine.requests import DestroyRequest, ReceiptDestroyRequest, Selection, Where
from npa_pulumi.engine.retries import RenderRetry, Retry, attach, attach_resume, receipt_resume, text_of
from npa_pulumi.engine.runlock import exclusive_run
from npa_pulumi.engine.teardown.model import (
    RECEIPT_VERSION,
    STACK_PHASES,
    UNFINISHED,
    ProjectEvidence,
    TeardownOptions,
)
from npa_pulumi.engine.teardown.phases import GuardedPhases, phase_factory
from npa_pulumi.engine.teardown.receipts import (
    ReceiptIdentity,
    new_receipt_path,
    receipt,
    receipts_dir,
    receipts_root,
    resume_retry,
    write_receipt,
)
from npa_pulumi.engine.teardown.records import read_record, settle_record
from npa_pulumi.errors import UserInputError
from npa_pulumi.output.results import FleetResult, TeardownPhase

if TYPE_CHECKING:
    from npa_pulumi.cloud.port import CloudPort
    from npa_pulumi.plan import Target
    from npa_pulumi.spec import FleetSpec

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ReceiptMismatch(UserInputError):
    """The flags, the receipt or the spec name the same thing differently: nothing was changed."""

    kind = "receipt-mismatch"


@dataclass(frozen=True)
class Receipt:
    id: str
    path: Path
    document: dict[str, Any]

    def text(self, key: str) -> str | None:
        value = self.document.get(key)
        return value if isinstance(value, str) and value else None

    @property
    def fleet(self) -> str:
        return str(self.document["fleet"])

    @property
    def asked(self) -> dict[str, Any]:
        asked = self.document.get("asked")
        return asked if isinstance(asked, dict) else {}

    @property
    def projects(self) -> list[str]:
        return [str(p) for p in self.asked.get("projects") or []]

    @property
    def clusters(self) -> list[str]:
        return [str(c) for c in self.asked.get("clusters") or []]

    def options(self) -> TeardownOptions:
        return TeardownOptions(**{f.name: self.asked.get(f.name) is True for f in fields(TeardownOptions)})

    def phases(self) -> list[TeardownPhase]:
        known = set(TeardownPhase.model_fields)
        return [
            TeardownPhase(**{k: v for k, v in item.items() if k in known})
            for item in self.document.get("phases") or []
        ]

    def unfinished_stack_phases(self) -> list[TeardownPhase]:
        return [p for p in self.phases() if p.phase in STACK_PHASES and p.status in UNFINISHED]


def find_receipt(ref: str) -> Receipt:
    """A receipt by id (its file name without `.json`, under any fleet's receipts) or by path."""
    candidate = Path(ref).expanduser()
    if ref.endswith(".json") and candidate.is_file():
        paths = [candidate]
    elif _ID.match(ref):
        paths = sorted(receipts_root().glob(f"*/{ref}.json"))
    else:
        raise UserInputError(
            f"--receipt {ref!r}: not a receipt id (letters, digits, '-', '_', '.') nor a file"
        )
    if not paths:
        raise UserInputError(
            f"no receipt {ref!r} under {receipts_root()}: `npa-pulumi destroy` prints the id of the "
            "receipt it writes (JSON: receipt_id)"
        )
    if len(paths) > 1:
        raise UserInputError(f"receipt id {ref!r} is ambiguous: {', '.join(map(str, paths))}; pass the path")
    try:
        document = json.loads(paths[0].read_text())
    except (OSError, ValueError) as err:
        raise UserInputError(f"receipt {paths[0]} is unreadable: {err}") from None
    if not isinstance(document, dict) or document.get("version") != RECEIPT_VERSION:
        raise UserInputError(f"receipt {paths[0]} is not a version-{RECEIPT_VERSION} npa-pulumi receipt")
    if document.get("command") != "destroy" or not isinstance(document.get("fleet"), str):
        raise UserInputError(f"receipt {paths[0]} is not a destroy receipt: only a destroy can be continued")
    if paths[0].parent != receipts_dir(document["fleet"]) and candidate != paths[0]:
        raise UserInputError(f"receipt {paths[0]} is filed under another fleet than {document['fleet']!r}")
    return Receipt(paths[0].stem, paths[0], document)


def check_identity(receipt: Receipt, given: dict[str, str | None]) -> None:
    """Each identity the caller gave (an explicit flag, or the spec) must equal what the receipt recorded,
    where both name it; otherwise nothing runs."""
    clashes = [
        f"{name}: {value!r} given, the receipt has {receipt.text(name)!r}"
        for name, value in given.items()
        if value and receipt.text(name) and value != receipt.text(name)
    ]
    if clashes:
        raise ReceiptMismatch(
            f"receipt {receipt.id} does not match: " + "; ".join(clashes) + ". Nothing was changed."
        )


def carry_completed(receipt: Receipt, phases: list[TeardownPhase]) -> list[TeardownPhase]:
    """The receipt's phase list, each replaced by this run's outcome; a phase the receipt records as
    done stays done (this run finds it absent, or no longer plans it at all)."""
    now = {p.name: p for p in phases}
    merged: list[TeardownPhase] = []
    for before in receipt.phases():
        after = now.pop(before.name, None)
        if before.status == "done" and (after is None or after.status == "absent"):
            carried = before.model_copy(
                update={"reason": f"done by receipt {receipt.id}", "retry_command": None, "retry": None}
            )
            merged.append(carried)
        elif after is not None:
            merged.append(after)
        else:
            merged.append(before)
    return merged + list(now.values())  # anything this run found that the receipt did not plan


@dataclass(frozen=True)
class ResolvedReceipt:
    """What `destroy --receipt ID` continues, resolved once from the request, the receipt and the spec:
    with a spec, the `destroy` request (its selection narrowed to the receipt's clusters) that runs the
    receipt's stacks and phases again; without one, only the guarded phases, on `cloud` with `profile`."""

    receipt: Receipt
    teardown: TeardownOptions
    cloud: str
    profile: str | None
    destroy: DestroyRequest | None = None
    spec: FleetSpec | None = None
    spec_path: str | None = None
    targets: tuple[Target, ...] = ()


def resolve_receipt(request: ReceiptDestroyRequest) -> ResolvedReceipt:
    """The one place a receipt becomes what runs: identity from what the request gives, then the receipt,
    then the spec; any clash (or a selection the receipt does not cover, or a spec that no longer has one of
    its clusters) stops before a change (`ReceiptMismatch`, exit 2). The receipt's deletions stay asked for;
    the request's add to them."""
    from npa_pulumi.engine.automation import resolve_backend_url

    receipt = find_receipt(request.receipt)
    selection = request.selection
    if selection.shard or selection.clusters:
        raise ReceiptMismatch(
            "--receipt continues exactly the receipt's selection: drop --shard/--only-clusters"
        )
    if selection.projects and sorted(selection.projects) != sorted(receipt.projects):
        raise ReceiptMismatch(
            f"--only-projects {','.join(selection.projects)} given, receipt {receipt.id} covers "
            f"{','.join(receipt.projects)}. Nothing was changed."
        )
    backend = resolve_backend_url(request.backend) if request.backend else None
    check_identity(receipt, {"cloud": request.cloud, "backend": backend, "profile": request.profile})
    recorded = receipt.options()
    teardown = TeardownOptions(
        **{
            f.name: getattr(recorded, f.name) or getattr(request.teardown, f.name)
            for f in fields(TeardownOptions)
        }
    )
    cloud = receipt.text("cloud") or request.cloud or "local"
    profile = request.profile or receipt.text("profile")
    if not request.spec_path:
        return ResolvedReceipt(receipt, teardown, cloud, profile)
    return _with_spec(request, receipt, teardown, cloud, profile)


def _with_spec(
    request: ReceiptDestroyRequest,
    receipt: Receipt,
    teardown: TeardownOptions,
    cloud: str,
    profile: str | None,
) -> ResolvedReceipt:
    from npa_pulumi.plan import resolve_targets
    from npa_pulumi.spec import load_spec

    assert request.spec_path is not None
    spec = load_spec(request.spec_path)
    check_identity(receipt, {"fleet": spec.name, "tenant_id": spec.tenant_id or None})
    selection = Selection(projects=tuple(receipt.projects), prefix=request.selection.prefix)
    everything = resolve_targets(spec, list(selection.projects), [], selection.prefix)
    clusters = set(receipt.clusters)
    missing = clusters - {t.cluster_stack for t in everything}
    if missing:
        raise ReceiptMismatch(
            f"receipt {receipt.id} destroys {', '.join(sorted(missing))}, which this spec no longer has. "
            "Nothing was changed."
        )
    destroy = DestroyRequest(
        selection=selection,
        where=Where(
            cloud=cloud,
            profile=profile,
            auth=request.auth,
            backend=request.backend or receipt.text("backend"),
            passphrase_file=request.passphrase_file or receipt.text("passphrase_file"),
        ),
        recipes=request.recipes,
        concurrency=request.concurrency,
        show_progress=request.show_progress,
        teardown=teardown,
        dry_run=request.dry_run,
    )
    targets = tuple(t for t in everything if t.cluster_stack in clusters)
    return ResolvedReceipt(receipt, teardown, cloud, profile, destroy, spec, request.spec_path, targets)


class Resume:
    """The guarded phases of a receipt, continued without the spec."""

    def __init__(
        self,
        receipt: Receipt,
        options: TeardownOptions,
        cloud: CloudPort,
        say: Any,
        render_retry: RenderRetry | None = None,
    ) -> None:
        self.receipt = receipt
        self.options = options
        self.cloud = cloud
        self.say = say
        self.render_retry = render_retry  # how the caller spells a retry (engine/retries.py)
        self.path = new_receipt_path(receipt.fleet)
        self.evidence: dict[str, ProjectEvidence] = {}
        self.guarded = GuardedPhases(
            cloud,
            receipt.fleet,
            options,
            say,
            lambda phase, _key: attach(phase, self.retry([]), render_retry),
        )

    def retry(self, phases: list[TeardownPhase]) -> Retry:
        """This run's receipt continued (with the spec while a stack phase of `phases` is left)."""
        return resume_retry(self.path.stem, phases, self.receipt.text("spec_path"))

    def plan(self) -> list[TeardownPhase]:
        """Read-only: the receipt's unfinished guarded phases, planned again from the teardown records."""
        left = self.receipt.unfinished_stack_phases()
        if left:
            names = ", ".join(p.name for p in left)
            spec = self.receipt.text("spec_path") or "<fleet.yaml>"
            again = text_of(receipt_resume(self.receipt.id, spec), self.render_retry)
            raise UserInputError(
                f"receipt {self.receipt.id} has unfinished stack phases ({names}); destroying a stack needs "
                f"the spec: {again}"
            )
        phases: list[TeardownPhase] = []
        for stack in dict.fromkeys(p.stack for p in self.receipt.phases() if p.phase not in STACK_PHASES):
            phases.extend(self._plan_stack(stack))
        return carry_completed(self.receipt, phases)

    def _plan_stack(self, stack: str) -> list[TeardownPhase]:
        mine = [p for p in self.receipt.phases() if p.stack == stack]
        evidence = read_record(self.receipt.fleet, stack)
        if evidence is None:
            return [self._unproven(p) for p in mine if p.phase not in STACK_PHASES]
        self.evidence[stack] = evidence
        earlier = [p for p in mine if p.phase in STACK_PHASES]
        return self.guarded.plan(evidence, phase_factory(evidence.project_key, stack), earlier)

    def _unproven(self, before: TeardownPhase) -> TeardownPhase:
        """No teardown record: a phase the receipt left unfinished has no proof of ownership any more, so
        it is refused (and stays a partial cleanup), never deleted unproven."""
        if before.status not in UNFINISHED:
            return before
        return before.model_copy(
            update={
                "status": "refused",
                "reason": f"no teardown record of {before.stack} proves this fleet created it: "
                "nothing deleted",
                "blocked_by": [],
            }
        )

    def run(self, phases: list[TeardownPhase]) -> None:
        for stack, evidence in self.evidence.items():
            mine = [p for p in phases if p.stack == stack]
            self.guarded.run(evidence, evidence.project_key, mine)
            settle_record(self.receipt.fleet, evidence, mine)


def run_resume(resume: Resume, result: FleetResult, phases: list[TeardownPhase], dry_run: bool) -> None:
    """`destroy --receipt ID` without the spec: the planned `phases`, unless a dry run run and receipted."""
    result.phases = phases
    result.dry_run = dry_run
    result.resumes = resume.receipt.id
    if dry_run:
        return
    started = time.time()
    result.receipt, result.receipt_id = str(resume.path), resume.path.stem

    def record(outcome: str) -> None:
        write_receipt(resume.receipt.fleet, _document(resume, result, started, outcome), resume.path)

    # The same hold a destroy takes (engine/runlock.py): a resume never races a destroy of the same stacks.
    stacks = {p.stack for p in result.phases}
    with exclusive_run(
        resume.receipt.text("backend") or "", resume.receipt.fleet, "destroy", stacks
    ) as notes:
        for note in notes:
            resume.say(note)
        record("running")
        try:
            resume.run(result.phases)
        finally:
            if result.partial_cleanup:
                attach_resume(result, resume.retry(result.phases), resume.render_retry)
            record(result.outcome)


def _document(resume: Resume, result: FleetResult, started: float, outcome: str) -> dict[str, Any]:
    """The resumed run's receipt: the continued receipt's identity and selection, this run's outcomes."""
    identity = ReceiptIdentity.from_document({**resume.receipt.document, "fleet": resume.receipt.fleet})
    asked = (resume.receipt.projects, resume.receipt.clusters, resume.options)
    return receipt(
        "destroy",
        resume.path,
        identity,
        asked,
        result.phases,
        started,
        outcome,
        resumes=resume.receipt.id,
        resume_command=result.resume_command,
    )
