"""A registered cluster record is checked, not trusted: `verify-storage` (like every verifier and
`kubeconfig`) refuses a registration whose cluster id, project, stack, cloud or profile no longer matches
the cluster stack's outputs and the live cloud, naming the mismatch, and probes nothing.

The cluster is deployed without a Kubernetes API (cheap); its registration is written as `up` writes it on
a machine with one, then made stale the ways the world makes it stale."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import by_stack, npa, write_spec

from npa_pulumi.plan.naming import kube_context_name

pytestmark = pytest.mark.integration

STACK = "ident.p.train"
SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: ident
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: true
  filestore_disk_size_gibibytes: 64
projects:
  - name: p
    clusters:
      - name: train
"""


def _register(home: Path, **fields: Any) -> Path:
    """The cluster's registration (engine/registrations/kubeconfigs.py's Registration), its kubeconfig
    pointing at an API server that is not there: a check that gets past the identity fails on the connection
    instead."""
    context = kube_context_name("ident", "p", "train")
    kubeconfig = home / ".npa-pulumi" / "kubeconfigs" / f"{context}.yaml"
    kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9', insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    record = {
        "context": context,
        "fleet": "ident",
        "project_key": "p",
        "cluster_name": "train",
        "stack": STACK,
        "cloud": "local",
        "profile": "",
        "server": "https://127.0.0.1:9",
        "kubeconfig": str(kubeconfig),
        "updated_at": "2026-01-01T00:00:00Z",
        **fields,
    }
    path = home / ".npa-pulumi" / "clusters" / f"{context}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return path


def _verify(spec: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    result = npa(
        "verify-storage", "--spec", str(spec), "--timeout-minutes", "0.2", *extra, "--output", "json"
    )
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    [entry] = result.json()["clusters"]
    return result.code, entry


def test_a_stale_registration_makes_verify_storage_fail_closed_naming_the_mismatch(
    isolated_home: Path, tmp_path: Path
) -> None:
    npa("local-cloud", "init", check=True)
    spec = write_spec(tmp_path / "fleet.yaml", SPEC)
    up = npa("up", "--spec", str(spec), "--yes", "--output", "json")
    assert up.code == 0, up.stderr[-3000:]
    deployed = by_stack(up.json())[STACK]
    cluster_id, project_id = deployed["cluster_id"], deployed["project_id"]
    assert cluster_id and project_id

    # ---- the record matches: the identity passes, and the check goes on to the (absent) API server
    _register(isolated_home, cluster_id=cluster_id, project_id=project_id)
    code, entry = _verify(spec)
    assert code == 1 and "registered cluster record" not in (entry["error"] or ""), entry

    # ---- a cluster re-created under the same name: the record's id is no longer the stack's nor live
    _register(isolated_home, cluster_id="mk8scluster-e00oldgone", project_id=project_id)
    code, entry = _verify(spec)
    assert (code, entry["status"]) == (1, "failed"), entry
    error = entry["error"]
    assert "registered cluster record does not match" in error and "nothing was probed" in error
    assert (
        f"registered for cluster id mk8scluster-e00oldgone, but stack {STACK} now holds cluster {cluster_id}"
        in error
    )
    assert "mk8scluster-e00oldgone no longer exists in the cloud" in error

    # ---- another project
    _register(isolated_home, cluster_id=cluster_id, project_id="project-e00elsewhere")
    code, entry = _verify(spec)
    assert code == 1 and f"is in project {project_id}" in entry["error"], entry

    # ---- registered with another profile or cloud than this run's: --profile and --cloud are honoured
    _register(isolated_home, cluster_id=cluster_id, project_id=project_id)
    code, entry = _verify(spec, "--profile", "other")
    assert code == 1 and "registered with profile '(default)'" in entry["error"], entry
    assert "'other' (--profile)" in entry["error"]
    _register(isolated_home, cluster_id=cluster_id, project_id=project_id, cloud="nebius")
    code, entry = _verify(spec)
    assert code == 1 and "registered on cloud 'nebius', this run uses --cloud local" in entry["error"], entry

    # ---- `kubeconfig` refuses the same stale record (and prints no kubeconfig)
    _register(isolated_home, cluster_id="mk8scluster-e00oldgone", project_id=project_id)
    shown = npa("kubeconfig", "--spec", str(spec), "--output", "json")
    assert shown.code == 1 and "Traceback" not in shown.stderr
    assert "mk8scluster-e00oldgone no longer exists" in shown.stdout + shown.stderr
    assert "apiVersion" not in shown.stdout

    # ---- the stack destroyed elsewhere: the record names a stack with no cluster
    destroyed = npa("destroy", "--spec", str(spec), "--yes", "--output", "json")
    assert destroyed.code == 0, destroyed.stderr[-3000:]
    _register(isolated_home, cluster_id=cluster_id, project_id=project_id)
    code, entry = _verify(spec)
    assert code == 1 and f"stack {STACK} has no deployed cluster" in entry["error"], entry
