"""The machine-output contract, held across redesigns: the `--output json` document of each read-only
command on the example fleets, against goldens (tests/fixtures/json_contract/).

When the goldens were written they were checked against what the code before the engine's redesign (one
fleet graph, typed requests, backends as peer folders, typed stack outputs) printed for the same commands:
the same documents, except for the one field added since by design (`health.graphics_smoke_image` in `plan`,
the graphics probe's image). The documents are normalized for what differs per run only: the temporary home,
timestamps and elapsed times.
A deliberate change of a document regenerates the golden: `UPDATE_GOLDEN=1 .venv/bin/python -m pytest
tests/unit/repo/test_json_contract.py`, reviewed in the diff."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from npa_pulumi.cli.main import cli

REPO = Path(__file__).resolve().parents[3]
GOLDEN = REPO / "tests" / "fixtures" / "json_contract"
EXAMPLES = ("fleet1-test", "canary-rollout", "kuberay", "mixed-backends", "mixed-local", "rtxpro-mig")
# Every example is planned; the reads that touch the cloud and the backend are run on two fleets of
# different shapes (one backend; both backends with a project of each).
COMMANDS: list[tuple[str, tuple[str, ...]]] = [(example, ("plan",)) for example in EXAMPLES]
COMMANDS += [
    (example, command)
    for example in ("fleet1-test", "mixed-backends")
    for command in (
        ("status", "--cloud", "local"),
        ("status", "--cloud", "local", "--no-live"),
        ("preflight", "--cloud", "local"),
        ("destroy", "--cloud", "local", "--dry-run"),
        ("refresh", "--cloud", "local", "--stage", "clusters", "--shard", "7/1024"),
    )
]


def _name(example: str, command: tuple[str, ...]) -> str:
    words = [w.strip("-").replace("/", "-") for w in command]
    return f"{example}__{'_'.join(words)}.json"


def _normalized(text: str, home: Path) -> str:
    text = text.replace(str(home), "<HOME>")
    text = re.sub(
        r'"(started_at|finished_at|at|updated_at|generated_at|created_at)": "[^"]*"', r'"\1": "<T>"', text
    )
    return re.sub(r'"(elapsed_s|duration_s)": [0-9.e-]+', r'"\1": 0', text)


@pytest.mark.parametrize(("example", "command"), COMMANDS, ids=[_name(e, c)[:-5] for e, c in COMMANDS])
def test_the_json_document_is_the_golden(example: str, command: tuple[str, ...], isolated_home: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["local-cloud", "init"]).exit_code == 0
    spec = REPO / "examples" / f"{example}.yaml"
    result = runner.invoke(cli, [command[0], "--spec", str(spec), *command[1:], "--output", "json"])
    document = f"rc={result.exit_code}\n" + _normalized(result.stdout, isolated_home)
    golden = GOLDEN / _name(example, command)
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(document)
    assert document == golden.read_text(), f"{golden.name}: the document changed (see the module docstring)"
