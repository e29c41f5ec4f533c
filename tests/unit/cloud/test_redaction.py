"""One redaction module (npa_pulumi/cloud/redaction.py) for every rendering: a run's known secrets in
terraform's text, and in a Terraform plan summary."""

from __future__ import annotations

from pathlib import Path

from npa_pulumi.bridge.terraform import TerraformWorkspace
from npa_pulumi.cloud.redaction import SENSITIVE, mask_secrets, replace_secrets, scrub

BLOCK = "capacityblockgroup-e00secret77a1b2"


def test_known_secrets_are_replaced_longest_first() -> None:
    text = f"token abc-123-456 and abc-123 and {BLOCK}"
    assert replace_secrets(text, ("abc-123", "abc-123-456", BLOCK, "")) == "token *** and *** and ***"
    assert TerraformWorkspace(root=Path("/nonexistent"), redact=(BLOCK,)).scrub(BLOCK) == "***"


def test_a_plan_summary_masks_every_string_holding_a_known_secret() -> None:
    summary = {"resources": [{"after": f"ids=[{BLOCK}]", "count": 2, "names": ["a", BLOCK]}]}
    masked = mask_secrets(summary, (BLOCK,))
    assert masked == {"resources": [{"after": SENSITIVE, "count": 2, "names": ["a", SENSITIVE]}]}
    assert BLOCK not in scrub(str(summary)) and "capacityblockgroup-…" in scrub(str(summary))
