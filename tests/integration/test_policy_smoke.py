"""A minimal Python policy pack runs on the real engine: a mandatory violation fails the preview with the
policy's name; the compliant program passes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pulumi import automation as auto

from npa_pulumi.engine.automation.workspace import EngineSettings, select_or_create_stack

pytestmark = pytest.mark.integration

SUPPORT_DIR = Path(__file__).parent
PACK = SUPPORT_DIR / "support" / "smoke_pack"


def _program(message: str) -> Callable[[], None]:
    def program() -> None:
        from support.smoke_resources import Echo

        Echo("greeting", message)

    return program


@pytest.fixture
def settings(isolated_home: Path, tmp_path: Path) -> EngineSettings:
    return EngineSettings.resolve(
        backend=f"file://{tmp_path / 'backend'}", extra_env={"PYTHONPATH": str(SUPPORT_DIR)}
    )


def test_mandatory_policy_fails_violating_preview(settings: EngineSettings) -> None:
    stack = select_or_create_stack(settings, "policy.bad", _program("forbidden"), project_name="npa-smoke")
    with pytest.raises(auto.CommandError) as failure:
        stack.preview(policy_packs=[str(PACK)])
    assert "no-forbidden-message" in str(failure.value)
    assert "mandatory" in str(failure.value)


def test_compliant_program_passes_policy(settings: EngineSettings) -> None:
    stack = select_or_create_stack(settings, "policy.good", _program("fine"), project_name="npa-smoke")
    result = stack.preview(policy_packs=[str(PACK)])
    assert result.change_summary.get(auto.OpType.CREATE) == 2
    # The pack really ran: the engine reports it among the policies it applied.
    assert "smoke-pack" in result.stdout
