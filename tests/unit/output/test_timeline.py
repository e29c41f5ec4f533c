"""The run timeline (output/timeline.py) from OTLP JSON traces shaped like `--trace-file`'s
(tests/timeline_trace.py): stacks and phases, waves, waits, the longest path, the reversed dependencies of
destroy, bad input, and the page (`report --timeline`, `preview --output html --timeline`): scrubbed,
escaped, self-contained. tests/integration/test_report_browser.py renders it in headless Chromium and
tests/integration/test_traced_fleet.py draws a real run's trace."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from timeline_trace import destroy_trace, up_trace

from npa_pulumi.cli.main import cli
from npa_pulumi.output.html_report import render_report
from npa_pulumi.output.timeline import (
    TraceError,
    load_timeline,
    read_timeline,
    seconds_text,
    timeline_section,
    timeline_svg,
)

REPO = Path(__file__).resolve().parents[3]


def _rows(document: dict[str, Any]) -> dict[str, Any]:
    return {row.stack: row for row in read_timeline(document).stacks}


STACKS = ["tl.p1", "tl.p2", "tl.p2.d", "tl.p1.a", "tl.p1.b", "tl.p1.e", "tl.p2.c"]
PATH = ["tl.p1", "tl.p1.a", "tl.p1.e", "tl.p2.c"]


def test_stacks_phases_and_waves() -> None:
    timeline = read_timeline(up_trace())
    assert (timeline.command, timeline.fleet, timeline.status) == ("up", "tl", "failed")
    assert timeline.duration_s == pytest.approx(100)
    assert [r.stack for r in timeline.stacks] == STACKS  # outside the waves first, then by wave and start
    rows = {r.stack: r for r in timeline.stacks}
    assert [(r.wave, r.kind) for r in rows.values()] == [
        (None, "project"),
        (None, "project"),
        (1, "cluster"),
        (1, "cluster"),
        (2, "cluster"),
        (2, "cluster"),
        (2, "cluster"),
    ]
    assert [(w.index, w.of, w.state) for w in timeline.waves] == [(1, 2, "passed"), (2, 2, "halted")]
    a = rows["tl.p1.a"]
    assert [(p.name, p.start_s, p.end_s) for p in a.phases] == [("preparing", 20, 21), ("updating", 21, 50)]
    assert [s.name for s in a.steps] == ["TerraformModule", "terraform apply", "kubeconfig"]
    assert a.engine_spans == 2  # counted, not drawn
    assert rows["tl.p2.c"].failed and not rows["tl.p1.b"].failed
    assert [s.name for s in timeline.run_steps] == ["preflight"]


def test_waits_from_readiness_to_start() -> None:
    rows = _rows(up_trace())
    assert {name: round(row.ready_s, 3) for name, row in rows.items()} == {
        "tl.p1": 5,  # the scheduler's start
        "tl.p2": 5,
        "tl.p2.d": 10,  # its project stack done
        "tl.p1.a": 20,
        "tl.p1.b": 50,  # the wave barrier
        "tl.p1.e": 50,
        "tl.p2.c": 50,
    }
    waits = {name: round(row.wait_s, 3) for name, row in rows.items() if row.wait_s}
    assert waits == {"tl.p2.d": 4, "tl.p2.c": 10}


def test_the_longest_path_follows_what_held_each_stack_up() -> None:
    timeline = read_timeline(up_trace())
    assert [timeline.row(key).stack for key in timeline.longest_path] == PATH
    assert timeline.longest_path_s == pytest.approx(90)
    assert [row.stack for row in timeline.stacks if row.critical] == [
        "tl.p1",
        "tl.p1.a",
        "tl.p1.e",
        "tl.p2.c",
    ]


def test_destroy_reverses_the_project_dependency() -> None:
    timeline = read_timeline(destroy_trace())
    rows = {r.stack: r for r in timeline.stacks}
    assert rows["tl.p1"].ready_s == pytest.approx(30)  # its last cluster gone
    assert rows["tl.p1"].wait_s == pytest.approx(0)
    assert [timeline.row(k).stack for k in timeline.longest_path] == ["tl.p1.b", "tl.p1"]
    assert not rows["tl.p1.a"].critical


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "no resourceSpans"),
        ({"resourceSpans": "x"}, "no resourceSpans"),
        ({"resourceSpans": []}, "no spans"),
        (
            {
                "resourceSpans": [
                    {
                        "scopeSpans": [
                            {"spans": [{"name": "x", "startTimeUnixNano": "1", "endTimeUnixNano": "2"}]}
                        ]
                    }
                ]
            },
            "no npa-pulumi run",
        ),
    ],
)
def test_what_is_not_a_trace_of_a_run_says_why(document: Any, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        read_timeline(document)


def test_a_collectors_json_lines_are_read_as_one_trace(tmp_path: Path) -> None:
    """The OpenTelemetry Collector's file exporter writes one export request a line."""
    document = up_trace()
    lines = tmp_path / "collector.jsonl"
    lines.write_text("\n".join(json.dumps({"resourceSpans": [r]}) for r in document["resourceSpans"]) + "\n")
    timeline = load_timeline(lines)
    assert [r.stack for r in timeline.stacks] == STACKS
    assert {r.stack: r.engine_spans for r in timeline.stacks}["tl.p1.a"] == 2  # the engine's line joined


def test_a_file_that_is_not_json(tmp_path: Path) -> None:
    bad = tmp_path / "trace.json"
    bad.write_text("not json")
    with pytest.raises(TraceError, match="not JSON"):
        load_timeline(bad)
    with pytest.raises(TraceError, match="cannot be read"):
        load_timeline(tmp_path / "missing.json")


class _Svg(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stacks: dict[str, dict[str, str]] = {}
        self.waves: list[str] = []
        self.links = 0
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        self.tags.add(tag)
        if tag == "g" and "stack" in found.get("class", "").split():
            self.stacks[found["data-stack"]] = found
        if tag == "g" and found.get("class") == "wave":
            self.waves.append(found["data-wave"])
        if tag == "path" and found.get("class") == "longest-path":
            self.links += 1


def test_the_svg_draws_each_stack_the_waves_waits_and_the_path() -> None:
    svg = timeline_svg(read_timeline(up_trace()))
    parsed = _Svg()
    parsed.feed(svg)
    assert list(parsed.stacks) == STACKS
    assert [s for s, row in parsed.stacks.items() if row["data-critical"] == "true"] == PATH
    assert parsed.stacks["tl.p2.c"]["data-status"] == "failed"
    assert float(parsed.stacks["tl.p2.c"]["data-wait-s"]) == pytest.approx(10)
    assert parsed.waves == ["1", "2"]
    assert parsed.links == 3  # four stacks on the path, three links
    assert svg.count('class="wait"') == 2
    assert svg.count('class="critical-outline"') == 4
    assert not parsed.tags & {"script", "image", "foreignobject", "a"}


def test_the_section_is_scrubbed_and_escaped() -> None:
    secret = "abcdef0123456789secretvalue"
    section = timeline_section(read_timeline(up_trace(step_name=f"<b>terraform</b> token={secret}")))
    assert secret not in section and "[secret]" in section
    assert "<b>terraform" not in section and "&lt;b&gt;terraform" in section
    assert "Longest path</b> (1 m 30 s)" in section
    assert seconds_text(12.34) == "12.3 s" and seconds_text(3725) == "1 h 02 m"


def _status_document() -> dict[str, Any]:
    return {
        "command": "status",
        "fleet": "tl",
        "cloud": "local",
        "backend": "file:///state",
        "clusters": [
            {"project_key": "p1", "cluster_name": "a", "stack": "tl.p1.a", "status": "deployed"},
        ],
    }


def test_report_and_preview_take_a_timeline(tmp_path: Path) -> None:
    spec = tmp_path / "fleet.yaml"
    spec.write_text(
        "apiVersion: npa.fleet/v0.0.1\nname: tl\nregion: us-central1\n"
        "defaults:\n  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}\n"
        "projects:\n  - name: p1\n    clusters: [{name: a}]\n"
    )
    status = tmp_path / "status.json"
    status.write_text(json.dumps(_status_document()))
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(up_trace()))
    page = tmp_path / "page.html"
    runner = CliRunner()
    common = ["--spec", str(spec), "--from-json", str(status), "--output", str(page)]
    done = runner.invoke(cli, ["report", *common, "--timeline", str(trace)])
    assert done.exit_code == 0, done.output
    html = page.read_text()
    assert 'id="timeline"' in html and "Longest path" in html
    assert not re.search(r"(?i)(src|href)\s*=\s*[\"']?(https?:)?//", html)

    bad = tmp_path / "status-copy.json"
    bad.write_text("{}")
    refused = runner.invoke(cli, ["report", *common, "--timeline", str(bad)])
    assert refused.exit_code == 2
    assert f"--timeline {bad}" in refused.output and "resourceSpans" in refused.output
    assert "Traceback" not in refused.output

    text_preview = runner.invoke(cli, ["preview", "--spec", str(spec), "--timeline", str(trace)])
    assert text_preview.exit_code == 2 and "--output html" in text_preview.output


def test_the_report_page_carries_the_section() -> None:
    section = timeline_section(read_timeline(up_trace()))
    page = render_report(_status_document(), None, sections=[("Timeline", section)])
    assert '<h2 id="section-timeline">Timeline</h2>' in page
    assert page.index("GPUs per project") < page.index('id="timeline"')
