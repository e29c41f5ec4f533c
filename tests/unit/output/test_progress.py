"""Progress lines on stderr when there is no terminal: a failed stack says why on its own line."""

from __future__ import annotations

import io

from rich.console import Console

from npa_pulumi.output.progress import HEADLINE_CHARS, Progress, headline


def _plain_progress() -> tuple[Progress, io.StringIO]:
    sink = io.StringIO()
    console = Console(file=sink, force_terminal=False, width=400, highlight=False)
    return Progress(console=console), sink


def test_a_failed_stack_line_carries_the_first_line_of_its_error() -> None:
    progress, sink = _plain_progress()
    progress.phase("fleet.alpha.train", "preparing")
    error = "\n  read of the cluster failed: boom\nstack trace\n"
    progress.phase("fleet.alpha.train", "failed", headline(error))
    last = sink.getvalue().splitlines()[-1]
    assert last.endswith("fleet.alpha.train: failed - read of the cluster failed: boom")
    assert "stack trace" not in sink.getvalue()


def test_headline_is_cut_to_its_limit_and_empty_for_an_empty_error() -> None:
    long = "x" * (HEADLINE_CHARS * 2)
    cut = headline(long)
    assert len(cut) == HEADLINE_CHARS and cut.endswith("…")
    assert headline("short reason") == "short reason"
    assert headline("\n \n") == ""


def test_headline_masks_what_looks_like_a_credential() -> None:
    said = headline("create failed: capacity block capacityblockgroup-e00abcdef1234a1b2 token=abc123secret")
    assert "e00abcdef1234a1b2" not in said and "abc123secret" not in said
    assert said.startswith("create failed: capacity block capacityblockgroup-")


def test_a_fleet_larger_than_the_terminal_shows_its_running_stacks_and_a_summary() -> None:
    """On a terminal, the live table holds what fits: the stacks still running, then the ones finished
    last, and one row that counts the rest by phase (a 10,000-stack fleet re-rendered every row before)."""
    console = Console(file=io.StringIO(), force_terminal=True, width=200, height=20)
    progress = Progress(console=console)
    for n in range(500):
        progress.add(f"fleet.p.c{n:03d}")
    for n in range(300):
        progress.phase(f"fleet.p.c{n:03d}", "done")
    progress.phase("fleet.p.c450", "terraform apply")
    progress.phase("fleet.p.c451", "failed", "boom")
    render = Console(file=io.StringIO(), width=200, height=20)
    with render.capture() as captured:
        render.print(progress.__rich__())
    rows = captured.get().splitlines()
    assert len(rows) <= 20
    assert any("fleet.p.c450" in row and "terraform apply" in row for row in rows)
    assert any("fleet.p.c451" in row and "failed" in row for row in rows)
    assert any("fleet.p.c299" in row for row in rows)  # the last finished
    summary = rows[-1]
    assert "more" in summary and "198 queued" in summary and "done" in summary


def test_a_fleet_that_fits_shows_every_stack_in_order() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=200, height=40)
    progress = Progress(console=console)
    for n in range(5):
        progress.phase(f"fleet.p.c{n}", "queued")
    render = Console(file=io.StringIO(), width=200, height=40)
    with render.capture() as captured:
        render.print(progress.__rich__())
    names = [row.split()[0] for row in captured.get().splitlines()[1:]]
    assert names == [f"fleet.p.c{n}" for n in range(5)]
