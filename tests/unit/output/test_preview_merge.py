"""preview-merge (npa_pulumi/output/merge.py): shards' preview documents into the unsharded preview."""

from __future__ import annotations

from typing import Any

import pytest

from npa_pulumi.output.markdown import COMMENT_LIMIT, render_preview_markdown
from npa_pulumi.output.merge import MergeRefused, PreviewDocument, merge_previews
from npa_pulumi.output.results import FleetResult, StackResult


def _stack(name: str, status: str = "changes", kind: str = "cluster", **extra: Any) -> StackResult:
    project = name.split(".")[1]
    cluster = name.split(".")[2] if kind == "cluster" else None
    return StackResult(
        stack=name,
        kind=kind,
        project_key=project,
        cluster_name=cluster,
        status=status,
        changes={"create": 3} if status == "changes" else {},
        **extra,
    )


def _result(stacks: list[StackResult], shard: str | None = None, **extra: Any) -> FleetResult:
    return FleetResult(
        command="preview", fleet="f", cloud="local", backend="s3://b", stacks=stacks, shard=shard, **extra
    )


def _doc(name: str, result: FleetResult) -> PreviewDocument:
    return PreviewDocument(name, result.to_json())


FULL = _result(
    [
        _stack("f.p1", kind="project", outputs={"project_id": "project-1"}),
        _stack("f.p2", "no-changes", kind="project"),
        _stack("f.p1.a"),
        _stack("f.p1.b", "no-changes"),
        _stack("f.p2.c", "failed", error="boom"),
    ]
)
ORDER = ["f.p1", "f.p1.a", "f.p1.b", "f.p2", "f.p2.c"]


def _shards() -> list[PreviewDocument]:
    p1, p2, a, b, c = FULL.stacks
    return [
        _doc("s2.json", _result([p1, p2, b, c], shard="2/2")),
        _doc("s1.json", _result([p1, a], shard="1/2")),
    ]


def test_merged_shards_equal_the_unsharded_preview() -> None:
    merged = merge_previews(_shards(), ORDER)
    full = FULL.to_json()
    assert merged.to_json() == full
    assert render_preview_markdown(merged) == render_preview_markdown(FULL)
    assert merged.failed_count == 1  # the failed cluster fails the merge, as it failed the preview


def test_round_trip_keeps_project_outputs() -> None:
    again = FleetResult.from_json(FULL.to_json())
    assert again.stacks[0].outputs == {"project_id": "project-1"}
    assert again.to_json() == FULL.to_json()


def test_the_worst_preview_of_a_shared_project_stack_is_kept() -> None:
    calm = _stack("f.p1", "no-changes", kind="project")
    broken = _stack("f.p1", "failed", kind="project", error="locked")
    merged = merge_previews(
        [
            _doc("1", _result([calm, _stack("f.p1.a")], shard="1/2")),
            _doc("2", _result([broken, _stack("f.p1.b")], shard="2/2")),
        ]
    )
    assert [s.status for s in merged.stacks] == ["failed", "changes", "changes"]


@pytest.mark.parametrize(
    ("documents", "message"),
    [
        ([], "no preview documents"),
        ([_doc("1", _result([], shard="1/3")), _doc("3", _result([], shard="3/3"))], "2/3 missing"),
        ([_doc("1", _result([], shard="1/2")), _doc("1b", _result([], shard="1/2"))], "given twice"),
        ([_doc("1", _result([], shard="1/2")), _doc("x", _result([], shard="1/3"))], "different counts"),
        ([_doc("1", _result([], shard="1/2")), _doc("u", _result([]))], "an unsharded preview"),
        ([_doc("1", _result([], shard="1/2"))], "2/2 missing"),
        ([PreviewDocument("up.json", {"command": "up"})], "not the JSON of `npa-pulumi preview"),
        ([PreviewDocument("list.json", [1])], "not the JSON of `npa-pulumi preview"),
        ([PreviewDocument("bad.json", {"command": "preview", "stacks": [{"stack": 1}]})], "not a preview"),
    ],
)
def test_bad_inputs_are_refused_by_name(documents: list[PreviewDocument], message: str) -> None:
    with pytest.raises(MergeRefused) as refused:
        merge_previews(documents)
    assert message in str(refused.value)


def test_overlapping_cluster_stacks_and_other_fleets_are_refused() -> None:
    a = _stack("f.p1.a")
    with pytest.raises(MergeRefused, match=r"f\.p1\.a is in both 1 and 2"):
        merge_previews([_doc("1", _result([a], shard="1/2")), _doc("2", _result([a], shard="2/2"))])
    other = _result([], shard="2/2")
    other.fleet = "g"
    with pytest.raises(MergeRefused, match="different fleets"):
        merge_previews([_doc("1", _result([], shard="1/2")), _doc("2", other)])


def test_preflight_is_never_added_up_from_shards() -> None:
    fits = {"ok": True, "requirements": [], "capacity_blocks": [], "errors": []}
    shards = [_doc(str(k), _result([], shard=f"{k}/2", preflight=fits)) for k in (1, 2)]
    merged = merge_previews(shards)
    assert merged.preflight is None
    assert any("--preflight" in w for w in merged.warnings)
    whole = {"ok": False, "requirements": [], "capacity_blocks": [], "errors": ["x"]}
    assert merge_previews(shards, preflight=whole).preflight == whole


def test_a_large_merged_fleet_stays_within_the_comment_limit() -> None:
    stacks = [_stack(f"f.p{k}", kind="project") for k in range(20)]
    stacks += [
        _stack(f"f.p{k}.c{i}", diff=[{"urn": f"u{i}", "op": "create"}]) for k in range(20) for i in range(40)
    ]
    shards = [
        _doc(
            str(k),
            _result(
                [s for n, s in enumerate(stacks) if s.kind == "project" or n % 4 == k - 1], shard=f"{k}/4"
            ),
        )
        for k in range(1, 5)
    ]
    merged = merge_previews(shards)
    assert len(merged.stacks) == len(stacks)
    assert len(render_preview_markdown(merged).encode()) <= COMMENT_LIMIT
