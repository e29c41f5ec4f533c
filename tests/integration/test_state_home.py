"""One state directory, whoever expands `~`: with $HOME pointing somewhere other than the account's home
(a CI container, `sudo -E`, a test harness) and no NPA_PULUMI_HOME, `preview`, `up` and `destroy` use
$HOME/.npa-pulumi/state — the engine too — and the plain `pulumi stack ls` in the repository lists the same
stacks once PULUMI_BACKEND_URL points it there (docs/how-it-works.md, State)."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
from pathlib import Path

import pytest
from fleet_helpers import REPO, inventory, npa, write_spec

from npa_pulumi.runtime.toolchain import find_pulumi

pytestmark = pytest.mark.integration

FLEET = "statehome-8c1f"
SPEC = f"""\
apiVersion: npa.fleet/v0.0.1
name: {FLEET}
region: us-central1
defaults:
  cpu_nodes: {{count: 1, platform: cpu-d3, preset: 4vcpu-16gb}}
projects:
  - project_id: project-existing1
"""


def test_default_state_follows_home(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NPA_PULUMI_HOME")  # the default backend, as a user without overrides has it
    account_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    assert account_home != isolated_home
    state = isolated_home / ".npa-pulumi" / "state"
    checkpoints = state / ".pulumi" / "stacks" / "npa-fleet"
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)

    preview = npa("preview", "--spec", str(spec), "--output", "json")
    assert preview.code == 0, preview.stderr[-3000:]
    assert preview.json()["backend"] == f"file://{state}"
    assert (checkpoints / f"{FLEET}.project-existing1.json").is_file()

    up = npa("up", "--spec", str(spec), "--yes", "--output", "json")
    assert up.code == 0, up.stderr[-3000:]
    assert {c["status"] for c in up.json()["clusters"]} == {"deployed"}
    assert (checkpoints / f"{FLEET}.project-existing1.cluster.json").is_file()
    # Nothing of this fleet went to the account's home, where the engine expands `~`.
    assert not list((account_home / ".npa-pulumi").rglob(f"{FLEET}.*"))

    listing = subprocess.run(
        [str(find_pulumi()), "stack", "ls", "--json", "--project", "npa-fleet"],
        cwd=REPO,
        env={**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true", "PULUMI_BACKEND_URL": f"file://{state}"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert listing.returncode == 0, listing.stderr
    assert {s["name"] for s in json.loads(listing.stdout)} == {
        f"{FLEET}.project-existing1",
        f"{FLEET}.project-existing1.cluster",
    }

    destroy = npa("destroy", "--spec", str(spec), "--yes", "--output", "json")
    assert destroy.code == 0, destroy.stderr[-3000:]
    assert inventory()["mk8s_clusters"] == []
