"""The local cloud's machine-facing API, for scripts and the local-exec provisioners of soperator's stand-in.

    "$NPA_PYTHON" -m npa_pulumi.simulator.api OPERATION [--args JSON | --args-env VAR]

OPERATION is any simulator operation (`create_cluster`, `delete_node_group`, `list_quota_allowances`, …,
see `--help`), plus `inventory` and `settings`. Its keyword arguments come as one JSON object, inline or
from an environment variable (the recipe uses `--args-env NPA_LOCAL_API_ARGS`, which spares it any shell
quoting). Two extra keys shape the call:

* `"wait": true` on `create_cluster` / `create_node_group`: wait until RUNNING (bounded by
  `wait_timeout_s`, else `$NPA_LOCAL_CLOUD_WAIT_TIMEOUT_S`, else the `wait_timeout_seconds` setting) and
  delete the object again if it does not get there, naming the quota that held it back;
* `"missing_ok": true` on `delete_*`: an object that is already gone is success.

`Unavailable` is retried with bounded backoff where a repeat is safe: reads, and creates that carry an
`idempotency_key` (`npa_pulumi.cloud.retry`; `$NPA_CLOUD_RETRY_ATTEMPTS` sets the attempts).

stdout gets one JSON document, `{"ok": true, "result": …}` or `{"ok": false, "error": {kind, message,
request}}`; a failure also prints one line on stderr. Exit codes: 0 ok, 1 the cloud refused, 2 bad usage.
Imports stay light (no pydantic, no click) because terraform starts this once per resource.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from npa_pulumi.cloud.errors import CloudError, NotFound
from npa_pulumi.cloud.retry import call_with_retry
from npa_pulumi.errors import EXIT_FAILED, EXIT_INVALID_INPUT, NpaError
from npa_pulumi.simulator.simulator import OPERATIONS, LocalSimulator

EXTRA_OPERATIONS = ("inventory", "settings")
ARGS_ENV_DEFAULT = "NPA_LOCAL_API_ARGS"


class UsageError(Exception):
    pass


def _parse(argv: list[str]) -> tuple[str, dict[str, Any]]:
    parser = argparse.ArgumentParser(
        prog="python -m npa_pulumi.simulator.api",
        description="Call one local-cloud operation with JSON keyword arguments; prints one JSON document.",
        epilog="operations: " + ", ".join((*OPERATIONS, *EXTRA_OPERATIONS)),
    )
    parser.add_argument("operation")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--args", dest="args_json", help="keyword arguments as a JSON object")
    source.add_argument(
        "--args-env", metavar="VAR", help=f"read the JSON object from $VAR (e.g. {ARGS_ENV_DEFAULT})"
    )
    ns = parser.parse_args(argv)
    if ns.operation not in OPERATIONS and ns.operation not in EXTRA_OPERATIONS:
        raise UsageError(f"unknown operation {ns.operation!r}; see --help for the list")
    raw = ns.args_json
    if ns.args_env:
        raw = os.environ.get(ns.args_env)
        if raw is None:
            raise UsageError(f"${ns.args_env} is not set")
    try:
        kwargs = json.loads(raw) if raw else {}
    except json.JSONDecodeError as err:
        raise UsageError(f"arguments are not valid JSON: {err}") from None
    if not isinstance(kwargs, dict):
        raise UsageError("arguments must be a JSON object")
    return ns.operation, kwargs


def call(simulator: LocalSimulator, operation: str, kwargs: dict[str, Any]) -> Any:
    """Run one operation; `wait` and `missing_ok` as described in the module docstring."""
    kwargs = dict(kwargs)
    wait = bool(kwargs.pop("wait", False))
    missing_ok = bool(kwargs.pop("missing_ok", False))
    wait_timeout_s = kwargs.pop("wait_timeout_s", None)
    if operation == "inventory":
        return simulator.inventory()
    if operation == "settings":
        return simulator.settings()
    method = getattr(simulator, operation)
    try:
        inspect.signature(method).bind(**kwargs)
    except TypeError as err:  # unknown or missing keyword arguments
        raise UsageError(f"{operation}: {err}") from None
    # `Unavailable` is retried with backoff where a repeat is safe (npa_pulumi.cloud.retry): reads, and
    # creates that carry an idempotency key (the recipe sends one with every create). Deletes are not
    # repeated here: a failed destroy is reported as incomplete, with the command that resumes it.
    safe = operation.startswith(("get_", "list_", "find_")) or (
        operation.startswith("create_") and kwargs.get("idempotency_key") is not None
    )
    if wait and operation in ("create_cluster", "create_node_group"):
        kind = operation.removeprefix("create_")
        return call_with_retry(
            lambda: simulator.provision(kind, wait_timeout_s, **kwargs),
            what=operation,
            safe=safe,
            on_retry=_say_retry(operation),
        )

    def once() -> Any:
        try:
            return method(**kwargs)
        except NotFound:
            if missing_ok and operation.startswith("delete_"):
                return None
            raise

    return call_with_retry(once, what=operation, safe=safe, on_retry=_say_retry(operation))


def _say_retry(operation: str) -> Callable[[int, float, CloudError], None]:
    """Each retry leaves one line on stderr, which lands in the stack's terraform.log."""

    def say(attempt: int, delay: float, err: CloudError) -> None:
        sys.stderr.write(
            f"local-cloud api {operation}: {err.kind} (attempt {attempt}), retrying in {delay:.2f}s\n"
        )

    return say


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        operation, kwargs = _parse(argv)
        result = call(LocalSimulator(), operation, kwargs)
    except UsageError as err:
        sys.stderr.write(f"local-cloud api: {err}\n")
        return EXIT_INVALID_INPUT
    except CloudError as err:
        sys.stderr.write(f"local-cloud api {argv[0]}: {err}\n")
        sys.stdout.write(json.dumps({"ok": False, "error": err.to_dict()}) + "\n")
        return EXIT_FAILED
    except NpaError as err:
        sys.stderr.write(f"local-cloud api: {err}\n")
        sys.stdout.write(json.dumps({"ok": False, "error": err.to_dict()}) + "\n")
        return err.exit_code
    sys.stdout.write(json.dumps({"ok": True, "result": result}, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
