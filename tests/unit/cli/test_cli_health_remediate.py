"""`health --remediate --dry-run` and `health breaker reset`: their flag rules, and a reset refused for the
watcher's own identity (read through the local cloud as the watcher reads it)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from npa_pulumi.cli.main import cli
from npa_pulumi.engine.health import ledger
from npa_pulumi.engine.health.remediation import Breaker

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: fleet
projects:
  - name: research
    clusters:
      - name: train
        gpu_nodes: {count: 4, preset: 1gpu-16vcpu-200gb, platform: gpu-l40s-a}
"""
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--remediate"], "--remediate acts from --watch"),
        (
            ["--remediate", "--watch", "--iterations", "1"],
            "--watch --remediate cordons and probes nodes: add --yes",
        ),
        (["--remediate", "--dry-run", "--requalify", "--yes"], "cannot take --requalify"),
        (["--dry-run"], "--dry-run goes with --remediate"),
        (["--remediate", "--dry-run", "--watch", "--iterations", "1"], "cannot be combined with --watch"),
    ],
)
def test_remediate_flags_are_checked_before_anything_is_read(
    tmp_path: Path, flags: list[str], fragment: str
) -> None:
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC)
    result = CliRunner().invoke(cli, ["health", "-f", str(spec), *flags])
    assert result.exit_code == 2, result.output
    assert fragment in result.output


def test_breaker_reset_takes_its_own_options_and_names_the_scopes() -> None:
    result = CliRunner().invoke(cli, ["health", "breaker", "reset", "--help"])
    assert result.exit_code == 0, result.output
    assert "--scope" in result.output and "cluster:PROJECT/CLUSTER" in result.output


def test_a_reset_by_the_watchers_own_identity_is_refused(isolated_home: Path, tmp_path: Path) -> None:
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC)
    reset = ["health", "breaker", "reset", "-f", str(spec), "--scope", "fleet", "-o", "json"]
    ledger.save(
        "fleet", ledger.Ledger(breakers={"fleet": Breaker("fleet", 20, 2, 4, T0, "watcher-elsewhere")})
    )
    done = CliRunner().invoke(cli, reset)
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    me = document["by"]
    assert document["breaker"]["open"] is False and document["breaker_opened_by"] == "watcher-elsewhere"
    assert me and not ledger.load("fleet").breakers["fleet"].open
    # the same caller watched when it tripped again: refused, still open
    ledger.save("fleet", ledger.Ledger(breakers={"fleet": Breaker("fleet", 20, 2, 4, T0, me)}))
    refused = CliRunner().invoke(cli, reset)
    assert refused.exit_code == 1, refused.output
    assert "cannot be reset by that same identity" in refused.output
    assert ledger.load("fleet").breakers["fleet"].open
    unknown = CliRunner().invoke(cli, [*reset[:-4], "--scope", "cluster:research/nope"])
    assert unknown.exit_code == 2 and "no open breaker for scope 'cluster:research/nope'" in unknown.output
