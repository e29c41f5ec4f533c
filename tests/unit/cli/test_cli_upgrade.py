"""`npa-pulumi upgrade plan`: one JSON document on stdout, the text and markdown forms, exit 1 on a
refusal and 2 on invalid input, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from npa_pulumi.cli.main import cli

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: demo
defaults:
  k8s_version: "1.31"
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 16vcpu-64gb}
projects:
  - name: a
    maintenance:
      windows: [{days: [sat], start: "02:00", duration: 4h, time_zone: Europe/Amsterdam}]
    clusters:
      - name: train
        gpu_nodes: {count: 2, platform: gpu-h200-sxm, preset: 8gpu-128vcpu-1600gb, pin: true}
        infiniband_fabric: fabric-3
      - name: infer
        gpu_nodes: {count: 3, platform: gpu-l40s-d, preset: 1gpu-16vcpu-96gb}
"""
AT = ["--at", "2026-12-09T12:00+00:00"]


def _write(tmp_path: Path, text: str = SPEC, name: str = "fleet.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_json_is_one_document_with_the_hops(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["upgrade", "plan", "-f", _write(tmp_path), "--to", "1.33", "-o", "json", *AT]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["ok"] is True and document["summary"]["hops"] == 4
    infer = next(c for c in document["clusters"] if c["cluster"] == "a/infer")
    assert infer["gpu_hours_drained"] == 2 * 3  # two hops x 3 nodes x 1 GPU x 1h
    assert infer["maintenance"]["next_window"] == "2026-12-12T01:00:00+00:00"


def test_text_and_markdown(tmp_path: Path) -> None:
    spec = _write(tmp_path)
    text = CliRunner().invoke(cli, ["upgrade", "plan", "-f", spec, "--to", "1.32", *AT])
    assert text.exit_code == 0 and "a/train: 1.31 -> 1.32  [planned]" in text.stdout
    assert "train-ng-gpu-0 held at 1.31 (pinned)" in text.stdout
    markdown = CliRunner().invoke(cli, ["upgrade", "plan", "-f", spec, "--to", "1.32", "-o", "markdown", *AT])
    assert markdown.exit_code == 0
    assert "| <code>a/infer</code> | 1.31 | 1.32 | 1.31 → 1.32 | 3 |" in markdown.stdout


def test_a_refusal_exits_1_naming_object_and_version(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["upgrade", "plan", "-f", _write(tmp_path), "--to", "1.35", "-o", "json", *AT]
    )
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    train = next(c for c in document["clusters"] if c["cluster"] == "a/train")
    assert train["refusals"][0]["object"] == "node group train-ng-gpu-0 (pinned at 1.31)"
    assert train["refusals"][0]["version"] == "1.35"


def test_from_a_previous_spec(tmp_path: Path) -> None:
    old = _write(tmp_path, SPEC, "old.yaml")
    new = _write(tmp_path, SPEC.replace('k8s_version: "1.31"', 'k8s_version: "1.32"'))
    result = CliRunner().invoke(cli, ["upgrade", "plan", "-f", new, "--from", old, "-o", "json", *AT])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["planned"] == 2


def test_invalid_input_exits_2_without_a_traceback(tmp_path: Path) -> None:
    spec = _write(tmp_path)
    for args in (
        ["-f", spec],  # neither --to nor --from
        ["-f", spec, "--to", "1.33", "--from", spec],
        ["-f", spec, "--to", "latest"],
        ["-f", spec, "--to", "1.33", "--at", "tomorrow"],
        ["--to", "1.33"],
        [
            "-f",
            _write(tmp_path, SPEC.replace("Europe/Amsterdam", "Mars/Olympus"), "bad.yaml"),
            "--to",
            "1.33",
        ],
    ):
        result = CliRunner().invoke(cli, ["upgrade", "plan", *args, "-o", "json"])
        assert result.exit_code == 2, (args, result.output)
        assert json.loads(result.stdout)["ok"] is False
        assert result.exception is None or isinstance(result.exception, SystemExit)
    located = CliRunner().invoke(
        cli, ["upgrade", "plan", "-f", str(tmp_path / "bad.yaml"), "--to", "1.33", "-o", "json"]
    )
    error = json.loads(located.stdout)["error"]
    assert "projects[0].maintenance.windows[0].time_zone" in json.dumps(error)
    assert "line 9" in json.dumps(error) or '"line": 9' in json.dumps(error), error
