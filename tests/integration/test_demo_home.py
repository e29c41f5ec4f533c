"""`make demo` under a $HOME that is not the account's home (issue 32, item 6): the demo's `pulumi stack ls`
step (examples/demo-env.sh, which examples/demo.sh sources) lists the stacks npa-pulumi keeps under
$HOME/.npa-pulumi/state, although the repository's Pulumi.yaml names `file://~/.npa-pulumi/state` and the
engine expands that `~` from the user database."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest
from fleet_helpers import REPO

from npa_pulumi.runtime.toolchain import find_pulumi

pytestmark = pytest.mark.integration

STACKS = ("demohome-5e2a.a", "demohome-5e2a.a.cluster")


def _seed_stacks(home: Path, tmp_path: Path) -> Path:
    """Stacks in $HOME/.npa-pulumi/state, created by the plain engine from a copy of the project file (so
    nothing is written into the repository)."""
    state = home / ".npa-pulumi" / "state"
    state.mkdir(parents=True)
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(REPO / "Pulumi.yaml", project / "Pulumi.yaml")
    (project / "stacks").mkdir()
    env = {
        **os.environ,
        "PULUMI_BACKEND_URL": f"file://{state}",
        "PULUMI_CONFIG_PASSPHRASE": "demo-home-test",
        "PULUMI_SKIP_UPDATE_CHECK": "true",
    }
    for stack in STACKS:
        subprocess.run(
            [str(find_pulumi()), "stack", "init", stack, "--secrets-provider", "passphrase"],
            cwd=project,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
    return state


def _demo_step(home: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """The demo's step as `make demo` runs it: examples/demo-env.sh sourced, then `demo_stack_ls`, with no
    NPA_PULUMI_HOME or PULUMI_BACKEND_URL but those in `extra`."""
    pulumi_dir = str(find_pulumi().parent)
    env = {k: v for k, v in os.environ.items() if k not in ("NPA_PULUMI_HOME", "PULUMI_BACKEND_URL")}
    env.update({"HOME": str(home), "PATH": f"{pulumi_dir}:{os.environ['PATH']}", **extra})
    return subprocess.run(
        ["bash", "-c", "set -euo pipefail; source examples/demo-env.sh; demo_stack_ls"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_demo_stack_ls_under_a_foreign_home(isolated_home: Path, tmp_path: Path) -> None:
    account_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    assert account_home != isolated_home
    _seed_stacks(isolated_home, tmp_path)

    listing = _demo_step(isolated_home)
    assert listing.returncode == 0, listing.stderr
    for stack in STACKS:
        assert stack in listing.stdout, listing.stdout

    # Without the export (the demo before issue 32) the engine reads the account's home instead.
    plain = subprocess.run(
        [str(find_pulumi()), "stack", "ls", "--project", "npa-fleet"],
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if k not in ("NPA_PULUMI_HOME", "PULUMI_BACKEND_URL")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plain.returncode != 0 or STACKS[0] not in plain.stdout
    assert f"file://{account_home}/.npa-pulumi/state" in plain.stderr or plain.returncode == 0


def test_demo_keeps_an_explicit_backend(isolated_home: Path, tmp_path: Path) -> None:
    """A backend the user exported is the demo's, not replaced by the default."""
    elsewhere = tmp_path / "elsewhere"
    listing = _demo_step(isolated_home, PULUMI_BACKEND_URL=f"file://{elsewhere}")
    assert listing.returncode == 0, listing.stderr
    assert elsewhere.is_dir()
    assert not any(stack in listing.stdout for stack in STACKS)
