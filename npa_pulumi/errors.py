"""The product's error base: every expected failure carries an exit code and a JSON form.

Exit codes (the CLI contract): 0 ok, 1 an operation failed, 2 invalid input — and, for `destroy` and
`cleanup` only, 2 "partial cleanup": the teardown ran and left something it was asked to delete (its
receipt says what, and `destroy --receipt ID` continues it). Neither 2 is ever success.
"""

from __future__ import annotations

from typing import Any

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INVALID_INPUT = 2
EXIT_PARTIAL_CLEANUP = 2


class NpaError(Exception):
    """An expected failure that the CLI reports without a traceback."""

    exit_code = EXIT_FAILED
    kind = "error"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": str(self)}


class UserInputError(NpaError):
    """Bad input from the user (flags, selectors, files): exit 2."""

    exit_code = EXIT_INVALID_INPUT
    kind = "invalid-input"
