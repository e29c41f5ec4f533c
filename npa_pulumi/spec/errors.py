"""The spec's one error type: every problem found in a spec, each with its path and YAML position."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from npa_pulumi.errors import UserInputError


class SpecProblem(BaseModel):
    """One thing wrong with a spec.

    `path` is the spec path (`projects[1].clusters[0].gpu_nodes.preset`, "" for the document itself);
    `line` and `column` are 1-based positions in the YAML source (None when the spec did not come from
    YAML, or the path has no position); `hint` says what would be valid.
    """

    model_config = ConfigDict(frozen=True)

    path: str
    line: int | None = None
    column: int | None = None
    message: str
    hint: str | None = None

    def format(self, source: str) -> str:
        where = source if self.line is None else f"{source}:{self.line}:{self.column}"
        text = f"{where}: {self.path or '(document)'}: {self.message}"
        return f"{text} ({self.hint})" if self.hint else text


class SpecError(UserInputError):
    """A spec that cannot be used, with every problem found in it (exit code 2 in the CLI)."""

    kind = "invalid-spec"

    def __init__(self, problems: list[SpecProblem], source: str = "<string>") -> None:
        if not problems:
            raise ValueError("SpecError needs at least one problem")
        self.problems = list(problems)
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        count = len(self.problems)
        header = f"invalid fleet spec {self.source} ({count} problem{'s' if count != 1 else ''}):"
        return "\n".join([header, *(problem.format(self.source) for problem in self.problems)])

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message": f"invalid fleet spec {self.source}",
            "source": self.source,
            "problems": [problem.model_dump() for problem in self.problems],
        }


def single_problem(
    message: str,
    source: str,
    *,
    hint: str | None = None,
    line: int | None = None,
    column: int | None = None,
    path: str = "",
) -> SpecError:
    """A SpecError for a document-level problem (unreadable file, bad YAML, empty document, ...)."""
    return SpecError([SpecProblem(path=path, line=line, column=column, message=message, hint=hint)], source)
