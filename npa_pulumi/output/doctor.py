"""`npa-pulumi doctor`'s result: one check per thing the fleet needs on this machine, and its renderings.

A check is `ok`, `warn` (works, but worth fixing), `fail` (the requested operation cannot run: the command
exits 1) or `skip` (not needed for the chosen cloud). Every check that is not `ok` says how to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from rich.markup import escape

from npa_pulumi.output.streams import stdout_console


class CheckStatus(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class Check:
    name: str  # a stable id: python, package, engine, terraform, ...
    status: CheckStatus
    summary: str  # what was found
    fix: str | None = None  # how to fix it (a command where there is one)
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status.value,
            "summary": self.summary,
            "fix": self.fix,
            "details": self.details,
        }


@dataclass(frozen=True)
class DoctorReport:
    cloud: str
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return not any(c.status is CheckStatus.FAIL for c in self.checks)

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def to_json(self) -> dict[str, Any]:
        counts = {s.value: sum(1 for c in self.checks if c.status is s) for s in CheckStatus}
        return {
            "command": "doctor",
            "cloud": self.cloud,
            "ok": self.ok,
            "counts": counts,
            "checks": [c.to_json() for c in self.checks],
        }


_MARK = {
    CheckStatus.OK: "[green]ok  [/]",
    CheckStatus.WARN: "[yellow]warn[/]",
    CheckStatus.FAIL: "[bold red]FAIL[/]",
    CheckStatus.SKIP: "[dim]skip[/]",
}


def print_doctor(report: DoctorReport) -> None:
    console = stdout_console()
    for check in report.checks:
        console.print(
            f"{_MARK[check.status]} {escape(check.name):<18} {escape(check.summary)}", soft_wrap=True
        )
        if check.fix and check.status is not CheckStatus.OK:
            console.print(f"     [dim]fix:[/] {escape(check.fix)}", soft_wrap=True)
    failed = [c.name for c in report.checks if c.status is CheckStatus.FAIL]
    if failed:
        console.print(f"\n[bold red]not ready[/] for --cloud {report.cloud}: {', '.join(failed)}")
    else:
        console.print(f"\n[green]ready[/] for --cloud {report.cloud}")
