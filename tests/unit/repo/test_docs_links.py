"""The README and the docs pages hold together: every relative link (and its #anchor) resolves, and
docs/README.md, the index by reader, links every page in docs/."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest


def _repo_root() -> Path:
    # Found by its pyproject.toml, so the test keeps working wherever tests/unit puts it.
    for parent in Path(__file__).resolve().parents:
        if (parent / "pyproject.toml").is_file() and (parent / "docs").is_dir():
            return parent
    raise AssertionError("no repository root above this test")


REPO = _repo_root()
DOCS = REPO / "docs"
PAGES = sorted([REPO / "README.md", *DOCS.glob("*.md")])

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"", re.I)


def _prose(text: str) -> str:
    """The text outside fenced code blocks and code spans: links inside code are examples, not links."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = text.strip().lower()
    return "".join(ch for ch in text if ch.isalnum() or ch in " -_").replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    found: set[str] = set(HTML_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for heading in HEADING.findall(text):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(found)


def links(path: Path) -> list[str]:
    return LINK.findall(_prose(path.read_text(encoding="utf-8")))


def broken_links(path: Path) -> list[str]:
    problems = []
    for target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            problems.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{target}: no heading or anchor #{anchor} in {resolved.name}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_docs_index_links_every_page() -> None:
    index = DOCS / "README.md"
    linked = {(DOCS / target.partition("#")[0]).resolve() for target in links(index)}
    missing = [p.name for p in DOCS.glob("*.md") if p.name != "README.md" and p.resolve() not in linked]
    assert missing == [], f"docs/README.md does not link {missing}"


def test_the_checker_catches_what_it_should(tmp_path: Path) -> None:
    # The checks above pass only if this one shows they can fail.
    (tmp_path / "other.md").write_text("# A heading (`--flag`)\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-heading---flag) [ok2](other.md#twice-1) [web](https://example.com/x)\n"
        "[gone](missing.md) [bad anchor](other.md#nowhere) ![img](also-missing.png)\n"
        "`[in code](missing-too.md)`\n\n```\n[in a block](missing-three.md)\n```\n"
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "other.md#nowhere: no heading or anchor #nowhere in other.md",
        "also-missing.png: no such file",
    ]
