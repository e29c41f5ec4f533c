"""Every KubeRay setting is strictly typed (issue 60): `null` and a value of another type are refused with
the setting's spec path, its YAML line and what is valid; `bool` is not an `int`, as elsewhere in the spec.
Written as YAML text, so the line each problem carries is the setting's own."""

from __future__ import annotations

from typing import Any

import pytest

from npa_pulumi.spec import SpecError, parse_spec

PATH = "projects[0].clusters[0].kuberay"
INTEGERS = ("worker_replicas", "worker_cpus", "worker_memory_gib")
FIELDS = ("enabled", *INTEGERS)
VALID: dict[str, str] = {
    "enabled": "true",
    "worker_replicas": "2",
    "worker_cpus": "2",
    "worker_memory_gib": "4",
}
# Wrong types for an integer setting, written as YAML: a boolean, a digit string, a float, a list, a map.
WRONG_FOR_INTEGER = ("true", '"2"', "2.0", "[2]", "{n: 2}")
WRONG_FOR_BOOLEAN = ("1", '"true"', "yes-please", "[true]", "{on: 1}")

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: f
region: eu-north1
projects:
  - name: p
    clusters:
      - name: c
        cpu_nodes: {{count: 1, platform: cpu-d3, preset: 16vcpu-64gb}}
        kuberay:
{settings}
"""
FIRST_SETTING_LINE = SPEC.splitlines().index("        kuberay:") + 2


def _spec(field: str, value: str) -> tuple[str, int]:
    """The spec with every setting valid but `field`, and `field`'s line."""
    names = list(FIELDS)
    settings = "\n".join(f"          {name}: {value if name == field else VALID[name]}" for name in names)
    return SPEC.format(settings=settings), FIRST_SETTING_LINE + names.index(field)


def _refused(field: str, value: str) -> Any:
    text, line = _spec(field, value)
    with pytest.raises(SpecError) as caught:
        parse_spec(text, "spec.yaml")
    about = [p for p in caught.value.problems if p.path == f"{PATH}.{field}"]
    assert about, [(p.path, p.message) for p in caught.value.problems]
    assert about[0].line == line
    return about[0]


def test_the_valid_settings_parse() -> None:
    text, _ = _spec("enabled", "true")
    policy = parse_spec(text, "spec.yaml").projects[0].clusters[0].kuberay
    assert (
        policy is not None
        and policy.enabled
        and policy.policy()
        == {
            "worker_replicas": 2,
            "worker_cpus": 2,
            "worker_memory_gib": 4,
        }
    )


@pytest.mark.parametrize("field", FIELDS)
def test_a_null_setting_is_refused_with_its_path(field: str) -> None:
    problem = _refused(field, "null")
    assert "null" in problem.message
    assert "leave it out" in (problem.hint or problem.message)


@pytest.mark.parametrize("value", WRONG_FOR_INTEGER)
@pytest.mark.parametrize("field", INTEGERS)
def test_an_integer_setting_refuses_another_type(field: str, value: str) -> None:
    assert "must be an integer" in _refused(field, value).message


@pytest.mark.parametrize("value", WRONG_FOR_BOOLEAN)
def test_enabled_refuses_another_type(value: str) -> None:
    assert "must be a boolean" in _refused("enabled", value).message
