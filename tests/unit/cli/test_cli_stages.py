"""`--stage`, `--shard` on the read-only commands and `preview-merge`: bad input is refused before anything
runs (no spec read, no engine, no cloud), with one JSON document and what would be valid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from npa_pulumi.cli.main import cli

SPEC = str(Path(__file__).resolve().parents[3] / "examples" / "fleet1-test.yaml")


def _run(*args: str) -> tuple[int, dict[str, object], str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else {}, result.output


@pytest.mark.parametrize("command", ["up", "preview", "destroy", "refresh"])
def test_projects_stage_is_never_sharded(command: str) -> None:
    code, document, _ = _run(
        command, "--spec", SPEC, "--stage", "projects", "--shard", "1/2", "--output", "json"
    )
    assert code == 2
    message = str(document["error"]["message"])  # type: ignore[index]
    assert "--stage projects cannot be combined with --shard" in message and "--stage clusters" in message


@pytest.mark.parametrize("command", ["up", "preview", "destroy", "refresh"])
def test_an_unknown_stage_names_the_valid_ones(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "--spec", SPEC, "--stage", "everything"])
    assert result.exit_code == 2
    assert "'projects', 'clusters'" in result.output and "Traceback" not in result.output


def test_status_takes_a_shard_and_refuses_a_bad_one() -> None:
    code, document, _ = _run("status", "--spec", SPEC, "--shard", "5/4", "--output", "json")
    assert code == 2 and document["error"]["kind"] == "invalid-shard"  # type: ignore[index]


def test_preview_merge_refuses_unreadable_and_foreign_documents(tmp_path: Path) -> None:
    code, document, _ = _run("preview-merge", str(tmp_path / "missing.json"))
    assert code == 2 and "cannot be read" in document["error"]["message"]  # type: ignore[index]
    (tmp_path / "up.json").write_text(json.dumps({"command": "up", "stacks": []}))
    code, document, _ = _run("preview-merge", str(tmp_path / "up.json"))
    assert code == 2 and "not the JSON of `npa-pulumi preview" in document["error"]["message"]  # type: ignore[index]
    (tmp_path / "p.json").write_text(
        json.dumps({"command": "preview", "fleet": "f", "cloud": "local", "backend": "b"})
    )
    (tmp_path / "pre.json").write_text("[]")
    code, document, _ = _run(
        "preview-merge", str(tmp_path / "p.json"), "--preflight", str(tmp_path / "pre.json")
    )
    assert code == 2 and "not a `npa-pulumi preflight --output json` report" in document["error"]["message"]  # type: ignore[index]
    # The one valid document merges into itself: an empty preview, exit 0.
    code, document, _ = _run("preview-merge", str(tmp_path / "p.json"))
    assert code == 0 and document["command"] == "preview" and document["stacks"] == []
