"""Static checks of soperator's local stand-in (`recipes/local-soperator`, the one stand-in recipe left: the
local cloud does not serve the soperator installation's providers): built-in Terraform features only, IDs
derived in HCL exactly as the simulator derives them from idempotency keys, and every provisioner calling
the simulator through `$NPA_PYTHON`."""

from __future__ import annotations

import re
from pathlib import Path

from npa_pulumi.simulator import ids

RECIPE = Path(__file__).resolve().parents[3] / "recipes" / "local-soperator"


def _tf_text() -> str:
    return "\n".join(path.read_text() for path in sorted(RECIPE.glob("*.tf")))


def test_only_built_in_terraform_features() -> None:
    text = _tf_text()
    assert not re.search(r'^\s*(provider|module|data)\s+"', text, re.MULTILINE)
    assert "required_providers" not in text
    resource_types = set(re.findall(r'^\s*resource\s+"([^"]+)"', text, re.MULTILINE))
    assert resource_types == {"terraform_data"}


def test_ids_are_derived_in_hcl_exactly_as_the_simulator_derives_them() -> None:
    derived = re.findall(r'"(\w+)-e00\$\{substr\(sha256\("(\w+)/\$\{[^}]+\}"\), 0, (\d+)\)\}"', _tf_text())
    prefixes = {prefix for prefix, _, _ in derived}
    assert prefixes == {ids.CLUSTER, ids.NODE_GROUP, ids.FILESYSTEM, ids.GPU_CLUSTER}
    for prefix, hashed_prefix, length in derived:
        assert hashed_prefix == prefix
        assert int(length) == ids.ID_BODY_LENGTH


def test_provisioners_call_the_simulator_through_npa_python() -> None:
    commands = re.findall(r'command\s*=\s*"(.*)"', _tf_text())
    assert commands
    for command in commands:
        assert command.startswith(
            r"\"$${NPA_PYTHON:-python3}\" -m npa_pulumi.simulator.api"
        ) or command.startswith("${local.npa_api}")
    assert r'"\"$${NPA_PYTHON:-python3}\" -m npa_pulumi.simulator.api"' in _tf_text()
