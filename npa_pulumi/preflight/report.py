"""The preflight report: what the fleet needs, what the tenant has, and why a deploy may not start.

The JSON form is a contract (`{"ok", "requirements", "capacity_blocks", "errors", "notes", "deployed"}`:
`deployed` says what each deployed cluster is charged and why); byte quantities stay
integers there and become GiB only in the text form. Capacity block ids are masked everywhere, because
reports end up in CI logs and pull-request comments.
"""

from __future__ import annotations

import io
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from rich.console import Console
from rich.table import Table

from npa_pulumi.errors import NpaError
from npa_pulumi.preflight.demand import GIB

RequirementStatus = Literal["shortfall", "error", "missing", "ok", "unlimited", "unadvertised"]
CapacityStatus = Literal["rejected", "ok"]

# Failures first (so a long table never hides them), then what fits.
_REQUIREMENT_RANK: dict[str, int] = {
    "shortfall": 0,
    "missing": 1,
    "error": 1,
    "ok": 2,
    "unlimited": 2,
    "unadvertised": 2,
}
FAILING_REQUIREMENT_STATUSES = frozenset({"shortfall", "missing", "error"})


class _ReportModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RequirementLine(_ReportModel):
    """One (quota, region): `available` None means unlimited (or not quota-controlled when unadvertised).

    A line whose evidence is missing or unusable is failed closed: nothing is proven available, so
    `available` is 0 and the whole requirement is the shortfall.
    """

    name: str
    region: str
    required: int
    available: int | None
    limit: int | None
    shortfall: int
    unit: str  # byte | count | vcpu | gpu
    status: RequirementStatus
    evidence: str = ""  # exact | fraction | not-used | unlimited | "" ; how `available` was derived
    scope: str = ""  # tenant | unscoped
    detail: str = ""

    @property
    def failing(self) -> bool:
        return self.status in FAILING_REQUIREMENT_STATUSES


class CapacityBlockLine(_ReportModel):
    id: str  # masked, never the full block id
    region: str
    platform: str
    fabric: str
    required_gpus: int
    free_gpus: int | None
    limit: int | None
    status: CapacityStatus
    reason: str = ""


class ChargedAmount(_ReportModel):
    """One quota amount a deployed cluster is charged (bytes stay integers, as in `requirements`)."""

    name: str
    region: str
    amount: int
    unit: str


class ChargedGpus(_ReportModel):
    """Reserved GPUs a deployed cluster is charged against one capacity block."""

    id: str  # masked, never the full block id
    gpus: int


class DeployedClusterLine(_ReportModel):
    """A selected cluster whose stack is deployed: what preflight charges it, and why.

    `charge`: `zero` (the live cluster holds everything its target asks for), `difference` (it holds part:
    only the rest is charged), `full` (the live cloud does not prove it: charged as a new cluster)."""

    target: str  # <project>/<cluster>
    stack: str
    charge: Literal["zero", "difference", "full"]
    reasons: list[str]
    charged: list[ChargedAmount] = []
    reserved_gpus: list[ChargedGpus] = []

    def describe(self) -> str:
        """One line: what the cluster is charged and why (the report's note for it)."""
        why = "; ".join(self.reasons[:8])
        if self.charge == "full":
            return f"{self.target}: deployed, but charged in full: {why}"
        if self.charge == "zero":
            held = (
                "the live cluster (RUNNING, in its project) holds every node group as its spec asks "
                "(platform, preset, count, boot disk, preemptibility, reservation)"
            )
            return f"{self.target}: deployed, charged zero (live proof): {held}{'; ' + why if why else ''}"
        what = [f"{b.id} +{b.gpus} reserved GPU(s)" for b in self.reserved_gpus] + [
            f"{a.name} +{human_amount(a.amount, a.unit)}{_unit_suffix(a.unit)}" for a in self.charged
        ]
        return (
            f"{self.target}: deployed, charged the difference (live proof): {', '.join(what)}; because {why}"
        )


def _unit_suffix(unit: str) -> str:
    return "" if unit == "count" else f" {human_unit(unit)}"


def sort_requirements(lines: list[RequirementLine]) -> list[RequirementLine]:
    return sorted(lines, key=lambda ln: (_REQUIREMENT_RANK[ln.status], ln.region, ln.name))


def sort_capacity_blocks(lines: list[CapacityBlockLine]) -> list[CapacityBlockLine]:
    return sorted(lines, key=lambda ln: (ln.status != "rejected", ln.region, ln.id))


class PreflightReport(_ReportModel):
    ok: bool
    requirements: list[RequirementLine]
    capacity_blocks: list[CapacityBlockLine]
    errors: list[str]
    notes: list[str] = []
    deployed: list[DeployedClusterLine] = []

    @classmethod
    def build(
        cls,
        requirements: list[RequirementLine],
        capacity_blocks: list[CapacityBlockLine],
        errors: list[str],
        notes: list[str] | None = None,
    ) -> PreflightReport:
        """Order the lines (failures first) and derive `ok`, so no caller can get either wrong."""
        ok = (
            not errors
            and not any(ln.failing for ln in requirements)
            and all(b.status == "ok" for b in capacity_blocks)
        )
        return cls(
            ok=ok,
            requirements=sort_requirements(requirements),
            capacity_blocks=sort_capacity_blocks(capacity_blocks),
            errors=list(errors),
            notes=list(notes or []),
        )

    @property
    def shortfalls(self) -> list[RequirementLine]:
        return [ln for ln in self.requirements if ln.status == "shortfall"]

    def to_json(self) -> dict[str, Any]:
        """The JSON document: `{"ok", "requirements", "capacity_blocks", "errors", "notes", "deployed"}`."""
        return self.model_dump(mode="json")

    def summary(self) -> str:
        """A plain-text explanation of a failed preflight (every shortfall, block and error)."""
        if self.ok:
            return "preflight ok: the tenant's quotas and capacity blocks cover the selected targets"
        lines: list[str] = []
        failing = [ln for ln in self.requirements if ln.failing]
        if failing:
            lines.append("tenant quota is too low for this fleet (or cannot be proven sufficient):")
            lines.extend(f"  - {describe_requirement(ln)}" for ln in failing)
        lines.extend(self.errors)
        return "\n".join(lines)


def _gib(n: int) -> str:
    return f"{n // GIB:,}" if n % GIB == 0 else f"{n / GIB:,.2f}"


def human_amount(value: int | None, unit: str, *, none: str = "unlimited") -> str:
    if value is None:
        return none
    return _gib(value) if unit == "byte" else f"{value:,}"


def human_unit(unit: str) -> str:
    return "GiB" if unit == "byte" else unit


def describe_requirement(ln: RequirementLine) -> str:
    unit = human_unit(ln.unit)
    needs = f"{ln.name} [{ln.region}]: needs {human_amount(ln.required, ln.unit)} {unit}"
    if ln.status in ("missing", "error"):
        return f"{needs}; {ln.detail}"
    if ln.status == "unadvertised":
        return f"{needs}; not advertised in the tenant catalog (not quota-controlled here)"
    if ln.status == "unlimited":
        return f"{needs}; tenant allowance is unlimited"
    text = (
        f"{needs}, {human_amount(ln.available, ln.unit)} {unit} available from tenant limit "
        f"{human_amount(ln.limit, ln.unit)} {unit}"
    )
    return f"{text}; shortfall {human_amount(ln.shortfall, ln.unit)} {unit}" if ln.shortfall else text


def requirements_table(report: PreflightReport) -> Table:
    table = Table(title="Quota requirements", title_justify="left")
    for column in ("Quota", "Region"):
        table.add_column(column)
    for column in ("Needed", "Available", "Limit", "Shortfall"):
        table.add_column(column, justify="right")
    table.add_column("Unit")
    table.add_column("Status")
    for ln in report.requirements:
        none = "-" if ln.status in ("missing", "error", "unadvertised") else "unlimited"
        style = "bold red" if ln.failing else ""
        table.add_row(
            ln.name,
            ln.region,
            human_amount(ln.required, ln.unit),
            human_amount(ln.available, ln.unit, none=none),
            human_amount(ln.limit, ln.unit, none=none),
            human_amount(ln.shortfall, ln.unit) if ln.shortfall else "-",
            human_unit(ln.unit),
            ln.status if not ln.detail else f"{ln.status}: {ln.detail}",
            style=style,
        )
    return table


def capacity_table(report: PreflightReport) -> Table:
    table = Table(title="Capacity blocks (STRICT)", title_justify="left")
    for column in ("Block", "Region", "Platform", "Fabric"):
        table.add_column(column)
    for column in ("Needed GPUs", "Free GPUs", "Limit"):
        table.add_column(column, justify="right")
    table.add_column("Status")
    for b in report.capacity_blocks:
        table.add_row(
            b.id,
            b.region,
            b.platform,
            b.fabric or "-",
            f"{b.required_gpus:,}",
            "unknown" if b.free_gpus is None else f"{b.free_gpus:,}",
            "-" if b.limit is None else f"{b.limit:,}",
            b.status if not b.reason else f"{b.status}: {b.reason}",
            style="bold red" if b.status == "rejected" else "",
        )
    return table


def print_report(report: PreflightReport, console: Console) -> None:
    """Render the report on `console` (text output): requirements, capacity blocks, then errors."""
    if report.requirements:
        console.print(requirements_table(report))
    if report.capacity_blocks:
        console.print(capacity_table(report))
    for note in report.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    for error in report.errors:
        console.print(f"error: {error}", markup=False, highlight=False, style="red")
    verdict = "preflight ok" if report.ok else "preflight FAILED: nothing was created or changed"
    console.print(verdict, style="bold green" if report.ok else "bold red", markup=False, highlight=False)


def render_text(report: PreflightReport, width: int = 160) -> str:
    """The text form as a plain string (no colour), e.g. for logs and tests."""
    buffer = io.StringIO()
    console = Console(width=width, color_system=None, force_terminal=False, file=buffer)
    print_report(report, console)
    return buffer.getvalue()


class PreflightFailed(NpaError):
    """Preflight found a shortfall or could not prove capacity; `up` stops before any mutation (exit 1)."""

    kind = "preflight-failed"

    def __init__(self, report: PreflightReport) -> None:
        super().__init__(report.summary())
        self.report = report

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "preflight": self.report.to_json()}
