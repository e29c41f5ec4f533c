"""The interpreter settings of the product's command-lived processes (runtime/interpreter.py): the CLI
applies them before any command module loads; a library user of the SDK keeps the interpreter as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from npa_pulumi.runtime.interpreter import GC_GEN0_THRESHOLD

PROBE = (
    "import gc, json, os\n"
    "print(json.dumps([gc.get_threshold()[0], os.environ.get('PYDANTIC_DISABLE_PLUGINS')]))\n"
)


def _probe(prelude: str, env: dict[str, str] | None = None) -> list[object]:
    environ = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    out = subprocess.run(
        [sys.executable, "-c", prelude + PROBE],
        capture_output=True,
        text=True,
        check=True,
        env={**environ, **(env or {})},
    )
    result: list[object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_a_cli_run_collects_less_often_and_loads_no_pydantic_plugins() -> None:
    prelude = (
        "import sys\n"
        "from npa_pulumi.cli import main as cli\n"
        "sys.argv = ['npa-pulumi', '--version']\n"
        "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
    )
    assert _probe(prelude) == [GC_GEN0_THRESHOLD, "__all__"]


def test_a_plugin_choice_the_user_made_is_kept() -> None:
    prelude = "from npa_pulumi.runtime.interpreter import tune_for_a_command\ntune_for_a_command()\n"
    assert _probe(prelude, {"PYDANTIC_DISABLE_PLUGINS": "logfire"}) == [GC_GEN0_THRESHOLD, "logfire"]


def test_the_sdk_leaves_a_library_users_interpreter_alone() -> None:
    assert _probe("import npa_pulumi.sdk\nimport npa_pulumi.sdk.operations\n") == [700, None]
