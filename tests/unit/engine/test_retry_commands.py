"""Every retry command a run prints is the exact command to paste: the same spec, cloud, profile, backend
and passphrase file, each value shell-quoted (an s3:// backend URL carries `&`), for up/destroy and for
the cloud sweep alike."""

from __future__ import annotations

import shlex
from pathlib import Path

from npa_pulumi.engine.context import FleetContext
from npa_pulumi.engine.requests import FleetRequest, Where
from npa_pulumi.engine.teardown.cleanup import Cleanup
from npa_pulumi.engine.teardown.model import TeardownOptions
from npa_pulumi.plan import resolve_targets
from npa_pulumi.spec import load_spec

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: retry
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
projects:
  - project_id: project-existing1
    clusters: [{name: train}]
"""
BACKEND = "s3://state?endpoint=http://127.0.0.1:9&region=eu-north1&s3ForcePathStyle=true"


def _context(isolated_home: Path, tmp_path: Path) -> FleetContext:
    path = tmp_path / "my fleet.yaml"
    path.write_text(SPEC)
    passphrase = tmp_path / "pass phrase"
    passphrase.write_text("s3cret\n")
    passphrase.chmod(0o600)
    spec = load_spec(path)
    request = FleetRequest(
        where=Where(cloud="nebius", profile="team a", backend=BACKEND, passphrase_file=str(passphrase))
    )
    return FleetContext(spec, resolve_targets(spec, [], [], None), request, spec_path=str(path))


def _flags(command: str) -> dict[str, str]:
    words = shlex.split(command)
    return {w: words[i + 1] for i, w in enumerate(words) if w.startswith("--") and i + 1 < len(words)}


def test_a_retry_command_names_everything_the_run_used(isolated_home: Path, tmp_path: Path) -> None:
    context = _context(isolated_home, tmp_path)
    command = context.retry_command("up", "project-existing1", "train")
    flags = _flags(command)
    assert shlex.split(command)[:2] == ["npa-pulumi", "up"] and command.endswith(" --yes")
    assert flags["--spec"] == str(tmp_path / "my fleet.yaml")
    assert flags["--backend"] == BACKEND  # quoted: the shell keeps the `&`s
    assert flags["--profile"] == "team a"
    assert flags["--passphrase-file"] == str(tmp_path / "pass phrase")
    assert flags["--cloud"] == "nebius"
    assert (flags["--only-projects"], flags["--only-clusters"]) == ("project-existing1", "train")


def test_the_cloud_sweeps_retry_command_is_as_exact(isolated_home: Path, tmp_path: Path) -> None:
    context = _context(isolated_home, tmp_path)
    command = Cleanup(context, TeardownOptions(delete_buckets=True)).retry_command()
    flags = _flags(command)
    assert shlex.split(command)[:2] == ["npa-pulumi", "cleanup"]
    assert flags["--backend"] == BACKEND
    assert flags["--profile"] == "team a"
    assert flags["--passphrase-file"] == str(tmp_path / "pass phrase")
    assert "--delete-buckets" in shlex.split(command) and command.endswith(" --yes")


def test_a_keyless_run_s_retry_command_repeats_auth_and_its_providers_see_it(
    isolated_home: Path, tmp_path: Path
) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(SPEC)
    spec = load_spec(path)
    request = FleetRequest(where=Where(cloud="nebius", auth="federated"))
    context = FleetContext(spec, resolve_targets(spec, [], [], None), request, spec_path=str(path))
    assert _flags(context.retry_command("up", "project-existing1", "train"))["--auth"] == "federated"
    # The dynamic providers make their own adapter: the engine's environment carries the choice.
    assert context.settings.extra_env["NPA_NEBIUS_AUTH"] == "federated"
    plain = _context(isolated_home, tmp_path)
    assert "--auth" not in plain.retry_command("up", "project-existing1", "train")
    assert "NPA_NEBIUS_AUTH" not in plain.settings.extra_env
