"""The two GitHub workflows: valid against GitHub's workflow schema (offline), and saying what they promise;
and the Makefile they run lists every target in `make help`.

Schema validation uses check-jsonschema's vendored copy of the schema, in a process where every socket
call fails, so a version that starts fetching schemas fails this test instead of needing the network.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from npa_pulumi.output.markdown import MARKER_PREFIX

REPO = Path(__file__).resolve().parents[3]
CI = REPO / ".github" / "workflows" / "ci.yml"
FLEET_PREVIEW = REPO / "examples" / "ci" / "github" / "fleet-preview.yml"
DOCS = REPO / "docs" / "ci-previews.md"

OFFLINE_CHECK = """
import socket, sys

def refuse(*args, **kwargs):
    raise OSError("network access attempted during offline workflow validation")

socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse

from check_jsonschema import main

sys.argv = ["check-jsonschema", "--builtin-schema", "vendor.github-workflows", *sys.argv[1:]]
main()
"""


def validate_offline(*files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", OFFLINE_CHECK, *map(str, files)], capture_output=True, text=True, timeout=120
    )


def load(path: Path) -> dict[str, Any]:
    data = YAML(typ="safe").load(path.read_text())
    assert isinstance(data, dict)
    return data


def steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list(job["steps"])


def run_scripts(workflow: dict[str, Any]) -> list[str]:
    return [step["run"] for job in workflow["jobs"].values() for step in steps(job) if "run" in step]


# ------------------------------------------------------------------------------------------ schema


@pytest.mark.parametrize("path", [CI, FLEET_PREVIEW], ids=["ci.yml", "fleet-preview.yml"])
def test_workflow_is_valid_against_the_github_schema_offline(path: Path) -> None:
    result = validate_offline(path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok -- validation done" in result.stdout


def test_offline_validation_rejects_a_broken_workflow(tmp_path: Path) -> None:
    # The same check must be able to fail: a job without runs-on and with an unknown permission level.
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\njobs:\n  x:\n    permissions:\n      contents: admin\n    steps:\n      - run: echo\n"
    )
    result = validate_offline(broken)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "network access attempted" not in result.stdout + result.stderr


def test_offline_guard_really_blocks_the_network() -> None:
    probe = (
        OFFLINE_CHECK.split("from check_jsonschema")[0] + "socket.create_connection(('example.com', 443))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "network access attempted" in result.stderr


def test_run_scripts_parse_as_bash() -> None:
    for workflow in (load(CI), load(FLEET_PREVIEW)):
        for script in run_scripts(workflow):
            result = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
            assert result.returncode == 0, f"{result.stderr}\n{script}"


# ------------------------------------------------------------------------------------------ ci.yml


def test_ci_runs_make_test_with_python_311_go_and_caches() -> None:
    workflow = load(CI)
    assert workflow["permissions"] == {"contents": "read"}
    (job,) = workflow["jobs"].values()
    uses = {step.get("uses", "").split("@")[0]: step for step in steps(job)}
    assert uses["actions/setup-python"]["with"]["python-version"] == "3.11"
    assert uses["actions/setup-go"]["with"]["go-version-file"] == "tools/pulumi/go.mod"
    cached = uses["actions/cache"]["with"]["path"].split()
    assert "~/.cache/npa-pulumi" in cached and "~/go/pkg/mod" in cached
    assert "tools/pins.toml" in uses["actions/cache"]["with"]["key"]
    assert run_scripts(workflow)[-1].strip() == "make test"


# ------------------------------------------------------------------------------------------ fleet-preview.yml


def test_fleet_preview_triggers_on_spec_changes_and_main() -> None:
    workflow = load(FLEET_PREVIEW)
    spec_dir = workflow["env"]["FLEET_SPEC"].split("/")[0]
    assert f"{spec_dir}/**" in workflow["on"]["pull_request"]["paths"]
    assert workflow["on"]["push"]["branches"] == ["main"]


def test_fleet_preview_asks_for_least_privilege() -> None:
    workflow = load(FLEET_PREVIEW)
    assert workflow["permissions"] == {}
    preview, up = workflow["jobs"]["preview"], workflow["jobs"]["up"]
    assert preview["permissions"] == {"contents": "read", "id-token": "write", "pull-requests": "write"}
    assert up["permissions"] == {"contents": "read", "id-token": "write"}
    assert up["environment"] == "fleet-production"
    assert "refs/heads/main" in up["if"] and "push" in up["if"]
    assert up["concurrency"]["cancel-in-progress"] is False
    # Pull requests from forks get no secrets; the job does not try.
    assert "head.repo.full_name == github.repository" in preview["if"]


def test_fleet_preview_uses_only_official_actions() -> None:
    workflow = load(FLEET_PREVIEW)
    used = {step["uses"] for job in workflow["jobs"].values() for step in steps(job) if "uses" in step}
    assert used and all(re.fullmatch(r"actions/[a-z-]+@v\d+", u) for u in used), used


def test_fleet_preview_installs_a_cached_toolchain() -> None:
    workflow = load(FLEET_PREVIEW)
    for job in workflow["jobs"].values():
        cache = next(s for s in steps(job) if s.get("uses", "").startswith("actions/cache@"))
        assert {"~/.cache/pip", "~/.cache/npa-pulumi/toolchain"} <= set(cache["with"]["path"].split())
        assert "env.NPA_PULUMI_VERSION" in cache["with"]["key"]
        scripts = "\n".join(s.get("run", "") for s in steps(job))
        assert 'pip install "npa-pulumi==${NPA_PULUMI_VERSION}"' in scripts
        assert "sha256sum -c" in scripts  # downloaded engines are verified against published checksums
        assert "NPA_PULUMI_BIN=" in scripts and "NPA_TERRAFORM_BIN=" in scripts


def test_fleet_preview_runs_the_preview_and_uploads_the_json() -> None:
    preview = load(FLEET_PREVIEW)["jobs"]["preview"]
    step = next(s for s in steps(preview) if s.get("id") == "preview")
    command = " ".join(step["run"].replace("\\\n", " ").split())
    assert "npa-pulumi preview --spec" in command and "--cloud nebius" in command
    assert "--output markdown --out preview.md --json-out preview.json" in command
    assert step["env"]["PULUMI_BACKEND_URL"] == "${{ vars.PULUMI_BACKEND_URL }}"
    assert step["env"]["PULUMI_CONFIG_PASSPHRASE"] == "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}"
    upload = next(s for s in steps(preview) if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["path"] == "preview.json"


EXAMPLES = sorted((REPO / "examples" / "ci" / "github").glob("*.yml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_workflows_hold_no_nebius_secret_and_authenticate_keylessly(path: Path) -> None:
    text = path.read_text()
    secrets = set(re.findall(r"\$\{\{\s*secrets\.([A-Za-z0-9_]+)\s*\}\}", text))
    # The one secret left is the state's passphrase (Pulumi's, not a Nebius credential): no Nebius key, no
    # token, and no key to the state bucket in Object Storage either (each run mints its own).
    assert secrets == {"PULUMI_CONFIG_PASSPHRASE"}, secrets
    assert "credentials.json" not in text and "private-key" not in text and "NEBIUS_IAM_TOKEN" not in text
    for storage_key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        assert storage_key not in text, storage_key
    workflow = load(path)
    nebius_jobs = {name: job for name, job in workflow["jobs"].items() if "--cloud nebius" in str(job)}
    assert nebius_jobs
    for name, job in nebius_jobs.items():
        assert job["permissions"]["id-token"] == "write", name
        identity = next(s for s in steps(job) if "NPA_NEBIUS_AUTH=federated" in s.get("run", ""))
        account = identity["env"]["SERVICE_ACCOUNT_ID"]
        deploys = job.get("environment") == "fleet-production"
        expected = "NEBIUS_DEPLOY_SERVICE_ACCOUNT_ID" if deploys else "NEBIUS_PREVIEW_SERVICE_ACCOUNT_ID"
        assert account == f"${{{{ vars.{expected} }}}}", name  # an id, not a secret
        commands = [" ".join(s["run"].split()) for s in steps(job) if "npa-pulumi" in s.get("run", "")]
        nebius = [c for c in commands if "--cloud nebius" in c]
        assert nebius and all("--auth federated" in c and "--profile" not in c for c in nebius), name
        # The identity step comes before any step that reaches Nebius.
        order = [i for i, s in enumerate(steps(job)) if "--cloud nebius" in s.get("run", "")]
        assert steps(job).index(identity) < min(order), name
        # Every step that reads the state bucket mints its key, living a little past the job's timeout.
        for step in steps(job):
            if "PULUMI_BACKEND_URL" in step.get("env", {}):
                life = int(step["env"]["NPA_STATE_KEY_LIFETIME_S"])
                assert job["timeout-minutes"] * 60 < life <= job["timeout-minutes"] * 60 + 1800, name


def test_every_secret_and_variable_is_explained() -> None:
    text = FLEET_PREVIEW.read_text()
    header = text.split("\nname:", 1)[0]
    docs = DOCS.read_text()
    names = set(re.findall(r"\$\{\{ (?:secrets|vars)\.([A-Z0-9_]+) \}\}", text))
    assert names >= {"PULUMI_CONFIG_PASSPHRASE", "NEBIUS_PREVIEW_SERVICE_ACCOUNT_ID", "PULUMI_BACKEND_URL"}
    names.add("NPA_STATE_KEY_LIFETIME_S")  # set in the workflow itself, explained in both places too
    for name in names:
        assert name in header, f"{name} is not explained in the workflow's header comment"
        assert name in docs, f"{name} is not explained in docs/ci-previews.md"


def _comment_script() -> str:
    preview = load(FLEET_PREVIEW)["jobs"]["preview"]
    step = next(s for s in steps(preview) if s.get("uses", "").startswith("actions/github-script@"))
    return str(step["with"]["script"])


def test_sticky_comment_finds_the_documents_marker() -> None:
    assert f"<!-- {MARKER_PREFIX}" in _comment_script()


# The github-script body run under node with a fake GitHub API: create once, then update that comment.
NODE_HARNESS = """
const fs = require('fs');
const [scriptFile, commentsJson] = process.argv.slice(1); // node -e: no script path in argv
const body = fs.readFileSync(scriptFile, 'utf8');
const calls = [];
const github = {
  paginate: async () => JSON.parse(commentsJson),
  rest: { issues: {
    listComments: () => {},
    updateComment: async (a) => { calls.push({ op: 'update', id: a.comment_id, body: a.body }); },
    createComment: async (a) => { calls.push({ op: 'create', pr: a.issue_number, body: a.body });
                                   return { data: { html_url: 'u' } }; },
  } },
};
const context = { repo: { owner: 'o', repo: 'r' }, serverUrl: 'https://github.com', runId: 42,
                  payload: { pull_request: { number: 7, head: { sha: 'abcdef1234567' } } } };
const core = { info: () => {} };
const run = new Function('require', 'github', 'context', 'core', `return (async () => {${body}})();`);
run(require, github, context, core).then(() => console.log(JSON.stringify(calls)));
"""


def run_comment_script(
    tmp_path: Path, comments: list[dict[str, Any]], document: str | None
) -> list[dict[str, Any]]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the github-script body cannot be executed here")
    script = tmp_path / "script.js"
    script.write_text(_comment_script())
    if document is not None:
        (tmp_path / "preview.md").write_text(document)
    result = subprocess.run(
        [node, "-e", NODE_HARNESS, str(script), json.dumps(comments)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "FLEET_SPEC": "fleet/fleet.yaml", "PREVIEW_EXIT_CODE": "2"},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return list(json.loads(result.stdout))


DOCUMENT = f"<!-- {MARKER_PREFIX}demo -->\n### preview\n"
BOT = {"login": "github-actions[bot]"}


def test_sticky_comment_is_created_then_updated(tmp_path: Path) -> None:
    (created,) = run_comment_script(tmp_path, [], DOCUMENT)
    assert created["op"] == "create" and created["pr"] == 7
    assert DOCUMENT in created["body"] and "fleet-preview-7" in created["body"]
    existing = [{"id": 11, "user": BOT, "body": created["body"], "html_url": "x"}]
    (updated,) = run_comment_script(tmp_path, existing, DOCUMENT)
    assert updated == {"op": "update", "id": 11, "body": created["body"]}


def test_sticky_comment_ignores_other_authors_and_survives_a_missing_document(tmp_path: Path) -> None:
    impostor = [{"id": 12, "user": {"login": "mallory"}, "body": DOCUMENT, "html_url": "x"}]
    (call,) = run_comment_script(tmp_path, impostor, None)
    assert call["op"] == "create"
    assert "failed before producing a document" in call["body"] and "exited 2" in call["body"]


def test_make_help_lists_every_target_with_one_line_each() -> None:
    makefile = (REPO / "Makefile").read_text()
    rules = re.findall(r"^([a-z][a-z-]*):", makefile, re.M)
    phony = re.search(r"^\.PHONY: (.*)$", makefile, re.M)
    assert phony is not None and sorted(phony.group(1).split()) == sorted(rules)
    shown = subprocess.run(
        ["make", "--no-print-directory", "help"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert [line.split()[:2] for line in shown] == [["make", rule] for rule in rules]
    assert all(len(line.split(None, 2)) == 3 for line in shown), "each target says what it does"
    assert "check" in rules and "test" in rules
