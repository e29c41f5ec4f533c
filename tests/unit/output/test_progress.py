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
