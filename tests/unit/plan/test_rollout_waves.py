"""Staged rollouts: wave assignment (plan/rollout.py), the `--waves` syntax, halting decisions, and the
spec's `rollout:` block with located errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from npa_pulumi.errors import UserInputError
from npa_pulumi.plan.rollout import (
    HaltOn,
    MemberOutcome,
    RolloutMember,
    RolloutPolicy,
    WaveKind,
    WaveRule,
    assign_waves,
    halt_reason,
    parse_waves,
    reservation_labels,
    with_overrides,
)
from npa_pulumi.spec import SpecError, parse_spec

CPU = {"count": 1, "platform": "cpu-d3", "preset": "4vcpu-16gb"}


def members(*keys: str, reservations: dict[str, str] | None = None) -> list[RolloutMember]:
    return [RolloutMember(f"f-{k.replace('/', '-')}", k, (reservations or {}).get(k, "")) for k in keys]


SEVEN = members("research/train", "research/eval", "prod/a", "prod/b", "prod/c", "prod/d", "prod/e")


def keys(plan: Any) -> list[list[str]]:
    return [[m.key for m in wave.members] for wave in plan.waves]


def test_canary_count_rest_puts_every_cluster_in_exactly_one_wave_in_spec_order() -> None:
    policy = RolloutPolicy(parse_waves("research/train;3;rest"))
    plan = assign_waves(policy, SEVEN)
    assert keys(plan) == [
        ["research/train"],
        ["research/eval", "prod/a", "prod/b"],
        ["prod/c", "prod/d", "prod/e"],
    ]
    taken = [m.stack for w in plan.waves for m in w.members]
    assert sorted(taken) == sorted(m.stack for m in SEVEN) and len(set(taken)) == len(taken)


def test_the_assignment_is_deterministic_and_independent_of_selector_order() -> None:
    policy = RolloutPolicy(parse_waves("prod/c,research/*;rest"))
    first, second = assign_waves(policy, SEVEN), assign_waves(policy, SEVEN)
    assert first == second
    assert keys(first)[0] == ["research/train", "research/eval", "prod/c"]  # spec order, not selector order


def test_percent_rounds_up_over_the_whole_selection_and_takes_at_least_one() -> None:
    plan = assign_waves(RolloutPolicy(parse_waves("25%;1%")), SEVEN)
    assert [len(w.members) for w in plan.waves] == [2, 1, 4]  # ceil(7*.25)=2, max(1, ceil(.07))=1, rest
    assert plan.waves[-1].rule.implicit and plan.waves[-1].rule.describe() == "rest (implicit)"


def test_a_cluster_falls_in_the_first_wave_that_takes_it() -> None:
    plan = assign_waves(RolloutPolicy(parse_waves("prod/*;prod/a;rest")), SEVEN)
    assert keys(plan)[1] == [] and "prod/a" in keys(plan)[0]


def test_an_empty_selection_has_empty_waves() -> None:
    plan = assign_waves(RolloutPolicy(parse_waves("3;rest")), [])
    assert keys(plan) == [[], []]


def test_per_reservation_limits_are_one_group_per_capacity_block_group() -> None:
    labels = reservation_labels(["cbg-a", "", "cbg-b", "cbg-a"])
    assert labels == ["reservation-1", "", "reservation-2", "reservation-1"]
    group = members("p/a", "p/b", "p/c", reservations={"p/a": "reservation-1", "p/c": "reservation-1"})
    plan = assign_waves(RolloutPolicy((), max_in_flight_per_reservation=2), group)
    assert plan.limits() == {"reservation-1": 2}
    assert assign_waves(RolloutPolicy(()), group).limits() == {}
    assert "cbg" not in json.dumps(plan.to_json())  # labels only, never the id


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("3;;rest", "wave 2 ('') is empty"),
        ("rest;3", "must be last"),
        ("0", "at least 1"),
        ("150%", "between 1% and 100%"),
        ("train", "not project-key/cluster-name"),
    ],
)
def test_bad_waves_flags_name_the_wave(text: str, fragment: str) -> None:
    with pytest.raises(UserInputError, match="--waves") as caught:
        parse_waves(text)
    assert fragment in str(caught.value)


def test_the_waves_flag_syntax() -> None:
    assert parse_waves("a/b, c/*;3;25%;rest") == (
        WaveRule(WaveKind.CLUSTERS, selectors=("a/b", "c/*")),
        WaveRule(WaveKind.COUNT, number=3),
        WaveRule(WaveKind.PERCENT, number=25),
        WaveRule(WaveKind.REST),
    )


def test_flags_replace_the_specs_values() -> None:
    base = RolloutPolicy(parse_waves("1;rest"), max_in_flight=4, halt_on=HaltOn.POLICY_VIOLATION)
    mixed = with_overrides(base, waves="2;rest", max_in_flight_per_reservation=2)
    assert mixed is not None
    assert mixed.waves == parse_waves("2;rest") and mixed.max_in_flight == 4
    assert mixed.max_in_flight_per_reservation == 2 and mixed.halt_on is HaltOn.POLICY_VIOLATION
    assert with_overrides(None) is None


def _wave() -> Any:
    return assign_waves(RolloutPolicy(parse_waves("2;rest")), SEVEN).waves[0]


def test_a_failed_gate_halts_by_default_and_names_the_cluster() -> None:
    policy = RolloutPolicy(parse_waves("2;rest"))
    ok = [
        MemberOutcome("research/train", False, "deployed"),
        MemberOutcome("research/eval", False, "unchanged"),
    ]
    assert halt_reason(policy, _wave(), ok, 0) is None
    bad = [ok[0], MemberOutcome("research/eval", True, "deployed-validation-failed")]
    reason = halt_reason(policy, _wave(), bad, 0)
    assert reason is not None and "research/eval (deployed-validation-failed)" in reason


def test_failures_k_tolerates_fewer_across_the_rollout() -> None:
    policy = RolloutPolicy(parse_waves("2;rest"), halt_on=HaltOn.FAILURES, halt_failures=2)
    one = [MemberOutcome("research/train", True, "failed"), MemberOutcome("research/eval", False)]
    assert halt_reason(policy, _wave(), one, 0) is None
    assert halt_reason(policy, _wave(), one, 1) is not None


def test_policy_violation_halts_on_a_reported_violation() -> None:
    policy = RolloutPolicy(parse_waves("2;rest"), halt_on=HaltOn.POLICY_VIOLATION)
    warned = [MemberOutcome("research/train", False, "deployed", violations=1)]
    assert "policy violation" in (halt_reason(policy, _wave(), warned, 0) or "")
    assert halt_reason(RolloutPolicy(policy.waves), _wave(), warned, 0) is None


def test_a_held_cluster_halts_only_with_halt_on_maintenance() -> None:
    held = [
        MemberOutcome("research/train", False, "deployed"),
        MemberOutcome("research/eval", False, "held", held="maintenance HW_GPU_XID_79 on node n1 (ev-1)"),
    ]
    assert halt_reason(RolloutPolicy(parse_waves("2;rest")), _wave(), held, 0) is None
    policy = RolloutPolicy(parse_waves("2;rest"), halt_on_maintenance=True)
    reason = halt_reason(policy, _wave(), held, 0)
    assert reason == (
        "wave 1: research/eval held: maintenance HW_GPU_XID_79 on node n1 (ev-1) (halt_on maintenance)"
    )
    counted = RolloutPolicy(policy.waves, halt_on=HaltOn.FAILURES, halt_failures=3, halt_on_maintenance=True)
    assert "halt_on maintenance" in (halt_reason(counted, _wave(), held, 0) or "")
    assert policy.halt_description() == "gate-failure, maintenance"
    assert counted.halt_description() == "failures: 3, maintenance"


# --------------------------------------------------------------------------------------------- the spec


def spec_doc(rollout: Any) -> str:
    return json.dumps(
        {
            "apiVersion": "npa.fleet/v0.0.1",
            "name": "f",
            "region": "eu-north1",
            "defaults": {"cpu_nodes": CPU},
            "projects": [{"name": "research", "clusters": [{"name": "train"}, {"name": "eval"}]}],
            "rollout": rollout,
        },
        indent=2,
    )


def test_the_spec_block_parses_into_a_policy() -> None:
    spec = parse_spec(
        spec_doc(
            {
                "waves": [{"clusters": ["research/train"]}, {"percent": 50}, {"rest": True}],
                "max_in_flight": 4,
                "max_in_flight_per_reservation": 2,
                "halt_on": {"failures": 2},
            }
        )
    )
    assert spec.rollout is not None
    policy = RolloutPolicy.from_spec(spec.rollout)
    assert policy.halt_on is HaltOn.FAILURES and policy.halt_failures == 2
    assert [w.kind for w in policy.waves] == [WaveKind.CLUSTERS, WaveKind.PERCENT, WaveKind.REST]
    assert (policy.max_in_flight, policy.max_in_flight_per_reservation) == (4, 2)


@pytest.mark.parametrize(
    ("halt_on", "expected"),
    [
        ("maintenance", (HaltOn.GATE_FAILURE, True)),
        (["policy-violation", "maintenance"], (HaltOn.POLICY_VIOLATION, True)),
        (["gate-failure"], (HaltOn.GATE_FAILURE, False)),
        ({"failures": 2, "maintenance": True}, (HaltOn.FAILURES, True)),
    ],
)
def test_halt_on_can_name_maintenance(halt_on: Any, expected: tuple[HaltOn, bool]) -> None:
    spec = parse_spec(spec_doc({"waves": [{"count": 1}, {"rest": True}], "halt_on": halt_on}))
    assert spec.rollout is not None
    policy = RolloutPolicy.from_spec(spec.rollout)
    assert (policy.halt_on, policy.halt_on_maintenance) == expected


def test_a_wave_soak_is_a_duration_shown_with_its_wave() -> None:
    from npa_pulumi.plan import plan_document, resolve_targets

    spec = parse_spec(spec_doc({"waves": [{"count": 1, "soak": "10m"}, {"rest": True}]}))
    assert spec.rollout is not None
    policy = RolloutPolicy.from_spec(spec.rollout)
    assert [w.soak_s for w in policy.waves] == [600.0, 0.0]
    plan = assign_waves(policy, members("research/train", "research/eval"))
    assert plan.lines()[0] == "wave 1 (count 1, then soak 10m): research/train"
    waves = plan_document(spec, resolve_targets(spec))["rollout"]["waves"]
    assert waves[0]["soak_s"] == 600.0 and "soak_s" not in waves[1]
    numeric = parse_spec(spec_doc({"waves": [{"count": 1, "soak": 90}, {"rest": True}]}))
    assert numeric.rollout is not None and RolloutPolicy.from_spec(numeric.rollout).waves[0].soak_s == 90


@pytest.mark.parametrize(
    ("rollout", "path", "fragment"),
    [
        ({"waves": [{"count": 1, "soak": "soon"}]}, "rollout.waves[0].soak", "not a duration"),
        ({"waves": [{"count": 1, "soak": "-5m"}]}, "rollout.waves[0].soak", "not a duration"),
        ({"waves": [{"rest": True, "soak": "5m"}]}, "rollout.waves[0].soak", "no wave waits"),
        ({"waves": [{"count": 1}], "halt_on": ["maintenance", "sometimes"]}, "rollout.halt_on[1]", "unknown"),
        ({"waves": [{"count": 1}], "halt_on": []}, "rollout.halt_on", "at least one"),
        ({"waves": []}, "rollout.waves", "non-empty"),
        ({"waves": [{"count": 1, "rest": True}]}, "rollout.waves[0]", "exactly one of"),
        ({"waves": [{"clusters": ["research/nope"]}]}, "rollout.waves[0].clusters[0]", "matches no cluster"),
        ({"waves": [{"clusters": ["train"]}]}, "rollout.waves[0].clusters[0]", "not project-key"),
        ({"waves": [{"rest": True}, {"count": 1}]}, "rollout.waves[0].rest", "last wave"),
        ({"waves": [{"percent": 0}]}, "rollout.waves[0].percent", "between 1 and 100"),
        ({"waves": [{"count": 1}], "halt_on": "always"}, "rollout.halt_on", "unknown halt_on"),
        ({"waves": [{"count": 1}], "halt_on": {"failures": 0}}, "rollout.halt_on.failures", "at least 1"),
        ({"waves": [{"count": 1}], "max_in_flight": -1}, "rollout.max_in_flight", "0 (no limit"),
        ({"waves": [{"count": "many"}]}, "rollout.waves[0].count", ""),
        ({"waves": [{"size": 3}]}, "rollout.waves[0]", ""),
    ],
)
def test_a_bad_rollout_block_is_a_located_error(rollout: Any, path: str, fragment: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(spec_doc(rollout), "fleet.yaml")
    found = [(p.path, p.message) for p in caught.value.problems]
    assert any(p.path.startswith(path) and fragment in p.message for p in caught.value.problems), found
    assert all(p.line is not None for p in caught.value.problems), found


# ------------------------------------------------------------------------------------ where it is shown


def test_the_plan_document_and_the_pr_comment_list_the_waves() -> None:
    from npa_pulumi.output.markdown import render_preview_markdown
    from npa_pulumi.output.results import FleetResult, StackResult
    from npa_pulumi.plan import plan_document, resolve_targets

    spec = parse_spec(spec_doc({"waves": [{"clusters": ["research/eval"]}, {"rest": True}]}))
    document = plan_document(spec, resolve_targets(spec))
    waves = document["rollout"]["waves"]
    assert [w["clusters"] for w in waves] == [["research/eval"], ["research/train"]]
    assert [w["rule"] for w in waves] == ["research/eval", "rest"]

    result = FleetResult(command="preview", fleet="f", cloud="local", backend="file:///tmp/x")
    result.stacks = [
        StackResult(
            stack=f"f.research.{n}", kind="cluster", project_key="research", cluster_name=n, status="changes"
        )
        for n in ("train", "eval")
    ]
    result.rollout = document["rollout"]
    comment = render_preview_markdown(
        FleetResult.from_json(result.to_json())
    )  # also what preview-merge reads
    assert "#### Rollout" in comment
    assert "| 1 | research/eval | `research/eval` |" in comment
    assert "| 2 | rest | `research/train` |" in comment


def test_the_pr_comment_and_the_text_name_the_held_clusters_and_the_soak() -> None:
    import io

    from rich.console import Console

    from npa_pulumi.output.rollout_markdown import rollout_section
    from npa_pulumi.output.text import print_rollout

    rollout = {
        "halt_on": "gate-failure",
        "waves": [
            {"wave": 1, "rule": "research/train", "clusters": ["research/train"], "soak_s": 600},
            {
                "wave": 2,
                "rule": "rest",
                "clusters": ["research/eval", "prod/a"],
                "held": {"prod/a": "maintenance HW_GPU_XID_79 on node n1 (ev-1)"},
            },
        ],
    }
    comment = rollout_section(rollout)
    assert "| 1 | research/train, then soak 10m | `research/train` |" in comment
    assert "| 2 | rest | `research/eval`, `prod/a` **held** |" in comment
    assert "- `prod/a`: maintenance HW_GPU_XID_79 on node n1 (ev-1)" in comment
    assert "--ignore-maintenance" in comment
    stream = io.StringIO()
    print_rollout(rollout, Console(file=stream, width=200))
    text = stream.getvalue()
    assert "wave 1 (research/train, then soak 10m)" in text
    assert "held prod/a: maintenance HW_GPU_XID_79 on node n1 (ev-1)" in text
