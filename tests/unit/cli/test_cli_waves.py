"""`--waves`, `--max-in-flight`, `--max-in-flight-per-reservation` on the command line: `plan` shows the
waves they make, and a bad value is refused before anything runs (no engine, no cloud), naming the wave."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from npa_pulumi.cli.main import cli

EXAMPLE = str(Path(__file__).resolve().parents[3] / "examples" / "canary-rollout.yaml")
PLAIN = str(Path(__file__).resolve().parents[3] / "examples" / "fleet1-test.yaml")


def test_plan_shows_the_specs_waves_and_the_flags_replace_them() -> None:
    shown = CliRunner().invoke(cli, ["plan", "--spec", EXAMPLE, "--output", "json"])
    assert shown.exit_code == 0, shown.output
    rollout = json.loads(shown.stdout)["rollout"]
    assert rollout["waves"][0]["clusters"] == ["research/train"]
    assert rollout["max_in_flight_per_reservation"] == 2

    flagged = CliRunner().invoke(
        cli, ["plan", "--spec", PLAIN, "--waves", "b/*;rest", "--max-in-flight", "1", "--output", "json"]
    )
    assert flagged.exit_code == 0, flagged.output
    rollout = json.loads(flagged.stdout)["rollout"]
    assert [w["rule"] for w in rollout["waves"]] == ["b/*", "rest"] and rollout["max_in_flight"] == 1

    text = CliRunner().invoke(cli, ["plan", "--spec", EXAMPLE])
    assert "wave 2 (count 3): research/eval, prod/a, prod/b" in text.output


@pytest.mark.parametrize("command", ["up", "preview", "plan"])
def test_a_bad_waves_flag_is_refused_before_anything_runs(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "--spec", EXAMPLE, "--waves", "rest;3", "--output", "json"])
    assert result.exit_code == 2, result.output
    assert "--waves: wave 1 ('rest')" in result.output and "Traceback" not in result.output
