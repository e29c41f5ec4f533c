"""Slugs, DNS labels, project keys and display names, stack names, spec paths."""

from __future__ import annotations

import pytest

from npa_pulumi.spec import ProjectSpec
from npa_pulumi.spec.names import (
    cluster_stack_name,
    did_you_mean,
    format_path,
    is_dns_label,
    project_stack_name,
    slug,
    stack_name_problem,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Team A", "team-a"),
        ("  x__y  ", "x-y"),
        ("--a--b--", "a-b"),
        ("a.b/c", "a-b-c"),
        ("", ""),
        ("---", ""),
    ],
)
def test_slug(value: str, expected: str) -> None:
    assert slug(value) == expected


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("a", True),
        ("a-1", True),
        ("1a", True),
        ("x" * 63, True),
        ("x" * 64, False),
        ("", False),
        ("A", False),
        ("a_b", False),
        ("-a", False),
        ("a-", False),
    ],
)
def test_dns_label(value: str, valid: bool) -> None:
    assert is_dns_label(value) is valid


@pytest.mark.parametrize(
    ("project", "key", "display"),
    [
        (ProjectSpec(name="a"), "a", "pre-a"),
        (ProjectSpec(name="pre-a"), "pre-a", "pre-a"),  # the prefix is never doubled
        (ProjectSpec(name="Team_B"), "team-b", "pre-Team_B"),
        (ProjectSpec(project_id="project-e00x"), "project-e00x", "project-e00x"),
        (ProjectSpec(name="a", project_id="project-e00x"), "a", "pre-a"),
        (ProjectSpec(), "project", ""),
    ],
)
def test_project_key_and_display_name(project: ProjectSpec, key: str, display: str) -> None:
    assert project.key() == key
    assert project.display_name("pre-") == display


def test_display_name_without_prefix() -> None:
    assert ProjectSpec(name="a").display_name("") == "a"


def test_stack_names() -> None:
    assert project_stack_name("fleet", "a") == "fleet.a"
    assert cluster_stack_name("fleet", "a", "train") == "fleet.a.train"
    assert stack_name_problem("fleet.a.train") is None
    assert stack_name_problem("x" * 101) is not None and "at most 100" in str(stack_name_problem("x" * 101))
    assert stack_name_problem("x" * 100) is None
    assert "may only contain" in str(stack_name_problem("café.a"))


def test_format_path() -> None:
    assert (
        format_path(("projects", 1, "clusters", 0, "gpu_nodes", "preset"))
        == "projects[1].clusters[0].gpu_nodes.preset"
    )
    assert format_path(("repos", "a.list")) == 'repos["a.list"]'
    assert format_path(()) == ""
    assert format_path(("apiVersion",)) == "apiVersion"


def test_did_you_mean() -> None:
    assert did_you_mean("gpu_nodse", ["gpu_nodes", "cpu_nodes"]) == "gpu_nodes"
    assert did_you_mean("zzz", ["gpu_nodes"]) is None
