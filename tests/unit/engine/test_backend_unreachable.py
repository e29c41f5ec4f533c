"""A stack whose state backend answers nothing (its S3 endpoint down): a clean error naming the stack and
the engine's own words, not a traceback; any other engine error is left as it was."""

from __future__ import annotations

from pulumi.automation._cmd import CommandResult
from pulumi.automation.errors import CommandError

from npa_pulumi.engine.automation.selection import backend_unreachable

REFUSED = (
    'error: read ".pulumi/meta.yaml": blob (key ".pulumi/meta.yaml") (code=Unknown): operation error S3: '
    "GetObject, exceeded maximum number of attempts, 3, https response error StatusCode: 0, request send "
    'failed, Get "http://127.0.0.1:53109/b/.pulumi/meta.yaml": dial tcp 127.0.0.1:53109: connect: '
    "connection refused\n"
)


def test_an_unreachable_backend_is_a_clean_error() -> None:
    err = CommandError(CommandResult(stdout="", stderr=REFUSED, code=1))
    clean = backend_unreachable("f.p.c", err)
    assert clean is not None and clean.kind == "backend-unreachable"
    assert str(clean).startswith('stack f.p.c: the state backend did not answer (read ".pulumi/meta.yaml"')
    assert "connection refused" in str(clean) and str(clean).endswith("; run again")


def test_other_engine_errors_are_left_alone() -> None:
    err = CommandError(CommandResult(stdout="", stderr="error: incorrect passphrase\n", code=1))
    assert backend_unreachable("f.p.c", err) is None
