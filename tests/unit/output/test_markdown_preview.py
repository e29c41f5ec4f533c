"""The fleet-wide markdown preview: golden documents, the comment size cap, scrubbing and escaping.

FleetResult objects are built directly; no engine runs here. Rewrite the golden files after an intended
change with `UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/output/test_markdown_preview.py` and review
the diff like code.
"""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from npa_pulumi.cloud.redaction import scrub
from npa_pulumi.output.markdown import (
    COMMENT_LIMIT,
    backend_label,
    code,
    marker,
    render_preview_markdown,
    size,
)
from npa_pulumi.output.results import FleetResult, PolicyViolation, StackResult

GOLDEN = Path(__file__).parents[1] / "golden"
GIB = 1024**3
FULL_BLOCK_ID = "capacityblockgroup-e00abcdef1234a1b2"
LEAKED_TOKEN = "ne1supersecretvalue"

# ------------------------------------------------------------------------------------------ fixtures


def urn(stack: str, type_token: str, name: str) -> str:
    return f"urn:pulumi:{stack}::npa-fleet::{type_token}::{name}"


def change(stack: str, op: str, type_token: str, name: str, props: list[str] | None = None) -> dict[str, Any]:
    return {
        "urn": urn(stack, type_token, name),
        "type": type_token.rsplit("$", 1)[-1],
        "op": op,
        "diffs": props or [],
    }


def requirement(
    name: str, region: str, required: int, available: int | None, limit: int | None, unit: str
) -> dict[str, Any]:
    shortfall = max(required - (available if available is not None else required), 0)
    return {
        "name": name,
        "region": region,
        "required": required,
        "available": available,
        "limit": limit,
        "shortfall": shortfall,
        "unit": unit,
        "status": "shortfall" if shortfall else "ok",
        "evidence": "exact",
        "scope": "tenant",
        "detail": "",
    }


def mixed_preflight() -> dict[str, Any]:
    """A byte quota and a GPU quota short, one GPU quota that fits (listed first, to check the ordering),
    and a rejected capacity block."""
    return {
        "ok": False,
        "requirements": [
            requirement("compute.instance.gpu.h200", "eu-north1", 64, 64, 128, "gpu"),
            requirement(
                "compute.disk.network-ssd.size", "eu-north1", 2048 * GIB, 1536 * GIB, 4096 * GIB, "byte"
            ),
            requirement("compute.instance.gpu.b200", "us-central1", 128, 96, 96, "gpu"),
        ],
        "capacity_blocks": [
            {
                "id": "capacityblockgroup-…a1b2",
                "region": "us-central1",
                "platform": "gpu-b200-sxm",
                "fabric": "fabric-5",
                "required_gpus": 128,
                "free_gpus": 96,
                "limit": 128,
                "status": "rejected",
                "reason": "needs 128 GPUs, 96 free",
            }
        ],
        "errors": [],
        "notes": [],
    }


def mixed_result() -> FleetResult:
    """Two projects: creates and updates, no changes, a replacement and a deletion with a mandatory
    violation, an advisory violation, and a failed stack whose error leaks a token."""
    tf = "npa:fleet:K8sTrainingCluster$npa:bridge:TerraformModule"
    stacks = [
        StackResult(
            stack="demo.research",
            kind="project",
            project_key="research",
            project_id="project-e00research01",
            status="changes",
            changes={"create": 5, "same": 0},
            diff=[
                change("demo.research", "create", "npa:fleet:FleetProject", "research"),
                change(
                    "demo.research",
                    "create",
                    "npa:fleet:FleetProject$npa:fleet:ProjectNetwork",
                    "research-net",
                ),
                change("demo.research", "create", "npa:fleet:ObjectStorage", "research-bucket"),
                # What the engine reports for a new stack's dynamic resources: the provider instance (left
                # out of the table) and `pulumi-python:dynamic/...` types (shown by their own name).
                change("demo.research", "create", "pulumi:providers:pulumi-python", "default"),
                change("demo.research", "create", "pulumi-python:dynamic/npa:Bucket", "research-bucket-b"),
            ],
        ),
        StackResult(
            stack="demo.research.train-a",
            kind="cluster",
            project_key="research",
            project_id="project-e00research01",
            cluster_name="train-a",
            status="changes",
            changes={"create": 1, "update": 1, "same": 4},
            diff=[
                change(
                    "demo.research.train-a",
                    "update",
                    tf,
                    "train-a-tf",
                    ["tfvars.gpu_nodes_count", "tfvars.k8s"],
                ),
                change("demo.research.train-a", "create", "npa:fleet:HealthGate", "train-a-health"),
            ],
            policy=[
                PolicyViolation(
                    policy="gpu-driver-pinned",
                    pack="fleet-guardrails",
                    level="advisory",
                    message="the GPU driver preset is not pinned",
                    resource=urn("demo.research.train-a", tf, "train-a-tf"),
                )
            ],
        ),
        StackResult(
            stack="demo.research.train-b",
            kind="cluster",
            project_key="research",
            project_id="project-e00research01",
            cluster_name="train-b",
            status="no-changes",
            changes={"same": 6},
        ),
        StackResult(
            stack="demo.prod",
            kind="project",
            project_key="prod",
            project_id="project-e00prod0001",
            status="no-changes",
            changes={"same": 3},
        ),
        StackResult(
            stack="demo.prod.big",
            kind="cluster",
            project_key="prod",
            project_id="project-e00prod0001",
            cluster_name="big",
            status="changes",
            changes={"replace": 1, "delete": 1, "same": 2},
            diff=[
                change("demo.prod.big", "create-replacement", tf, "big-tf"),
                change("demo.prod.big", "replace", tf, "big-tf", ["tfvars.gpu_nodes_platform"]),
                change("demo.prod.big", "delete-replaced", tf, "big-tf"),
                change("demo.prod.big", "delete", "npa:fleet:Filestore", "big-shared-fs"),
            ],
            policy=[
                PolicyViolation(
                    policy="strict-capacity-reservation",
                    pack="fleet-guardrails",
                    level="mandatory",
                    message=f"capacity block {FULL_BLOCK_ID} is not a STRICT reservation",
                    resource=urn("demo.prod.big", tf, "big-tf"),
                )
            ],
        ),
        StackResult(
            stack="demo.prod.eval",
            kind="cluster",
            project_key="prod",
            project_id="project-e00prod0001",
            cluster_name="eval",
            status="failed",
            error=(
                "terraform plan failed:\n"
                f"Error: invalid token NEBIUS_IAM_TOKEN={LEAKED_TOKEN}\n"
                "  on main.tf line 12"
            ),
            retry_command="npa-pulumi preview --spec fleet.yaml --only-clusters eval",
        ),
    ]
    return FleetResult(
        command="preview",
        fleet="demo",
        cloud="nebius",
        backend="s3://team-state?region=eu-north1&endpoint=storage.eu-north1.nebius.cloud",
        stacks=stacks,
        preflight=mixed_preflight(),
    )


def quiet_result() -> FleetResult:
    """Nothing changes and preflight fits."""
    stacks = [
        StackResult(
            stack="small.lab", kind="project", project_key="lab", status="no-changes", changes={"same": 3}
        ),
        StackResult(
            stack="small.lab.dev",
            kind="cluster",
            project_key="lab",
            cluster_name="dev",
            status="no-changes",
            changes={"same": 5},
        ),
    ]
    preflight = {
        "ok": True,
        "requirements": [requirement("compute.instance.gpu.h100", "eu-north1", 8, 16, 16, "gpu")],
        "capacity_blocks": [],
        "errors": [],
        "notes": [],
    }
    return FleetResult(
        command="preview",
        fleet="small",
        cloud="local",
        backend="file://~/.npa-pulumi/state",
        stacks=stacks,
        preflight=preflight,
    )


def big_fleet(projects: int, clusters_per_project: int, diff_rows: int = 300) -> FleetResult:
    """Large diffs everywhere; every 17th cluster fails and every 11th breaks a mandatory policy."""
    stacks: list[StackResult] = []
    tf = "npa:fleet:K8sTrainingCluster$npa:bridge:TerraformModule"
    for p in range(projects):
        key = f"team-{p:03d}"
        stacks.append(
            StackResult(
                stack=f"big.{key}", kind="project", project_key=key, status="no-changes", changes={"same": 3}
            )
        )
        for c in range(clusters_per_project):
            n = p * clusters_per_project + c
            name = f"{key}.cluster-{c:03d}"
            diff = [
                change(
                    name,
                    "update",
                    tf,
                    f"resource-with-a-rather-long-name-{i:04d}",
                    [f"tfvars.node_groups[{j}].very_long_property_name_{i}" for j in range(12)],
                )
                for i in range(diff_rows)
            ]
            policy = []
            if n % 11 == 0:
                policy.append(
                    PolicyViolation(
                        policy="mig-version-pinned",
                        pack="fleet-guardrails",
                        level="mandatory",
                        message="MIG strategy needs a pinned driver version " * 3,
                        resource=urn(name, tf, "tf"),
                    )
                )
            failed = n % 17 == 0
            stacks.append(
                StackResult(
                    stack=f"big.{name}",
                    kind="cluster",
                    project_key=key,
                    cluster_name=f"cluster-{c:03d}",
                    status="failed" if failed else "changes",
                    changes={} if failed else {"update": diff_rows, "same": 2},
                    diff=diff,
                    policy=policy,
                    error=("terraform apply failed\n" + "x" * 5000) if failed else None,
                )
            )
    return FleetResult(
        command="preview",
        fleet="big",
        cloud="nebius",
        backend="s3://state",
        stacks=stacks,
        preflight=mixed_preflight(),
    )


# ------------------------------------------------------------------------------------------ checks

ALLOWED_TAGS = {
    "h3", "h4", "p", "strong", "em", "code", "pre", "table", "thead", "tbody", "tr", "th", "td",
    "details", "summary", "ul", "li", "blockquote",
}  # fmt: skip


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.open: list[str] = []
        self.table_cells: list[list[int]] = []  # per table: the cell count of each row

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.open.append(tag)
        if tag == "table":
            self.table_cells.append([])
        elif tag == "tr":
            self.table_cells[-1].append(0)
        elif tag in ("td", "th"):
            self.table_cells[-1][-1] += 1

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1] == tag, f"</{tag}> closes <{self.open[-1] if self.open else None}>"
        self.open.pop()


def rendered(document: str) -> _Tags:
    """Render like GitHub (CommonMark + tables, raw HTML allowed) and check the HTML is well formed."""
    html = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(document)
    parser = _Tags()
    parser.feed(html)
    parser.close()
    assert not parser.open, f"unclosed tags: {parser.open}"
    assert set(parser.tags) <= ALLOWED_TAGS, set(parser.tags) - ALLOWED_TAGS
    for rows in parser.table_cells:
        assert len(set(rows)) == 1, f"a table row has a different number of cells: {rows}"
    return parser


def assert_valid_comment(document: str) -> _Tags:
    assert size(document) < COMMENT_LIMIT
    assert len(document) < COMMENT_LIMIT
    assert document.startswith("<!-- npa-pulumi:fleet-preview:")
    return rendered(document)


def summary_line(document: str) -> str:
    return next(line for line in document.splitlines() if " · policy: " in line)


def check_golden(name: str, document: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(document)
    assert path.is_file(), f"golden file {path} is missing; run with UPDATE_GOLDEN=1"
    assert document == path.read_text(), f"{name} differs from its golden file; review, then UPDATE_GOLDEN=1"


# ------------------------------------------------------------------------------------------ golden


def test_mixed_preview_matches_golden() -> None:
    document = render_preview_markdown(mixed_result())
    assert_valid_comment(document)
    check_golden("preview_mixed.md", document)


def test_quiet_preview_matches_golden() -> None:
    document = render_preview_markdown(quiet_result())
    assert_valid_comment(document)
    check_golden("preview_quiet.md", document)


# ------------------------------------------------------------------------------------------ content


def test_summary_line_counts_stacks_violations_and_preflight_fit() -> None:
    document = render_preview_markdown(mixed_result())
    summary = summary_line(document)
    assert "**3 stacks changed**, 2 unchanged, **1 failed**" in summary
    assert "policy: **1 mandatory**, 1 advisory" in summary
    assert "preflight: ❌ **does not fit** (2 quota shortfalls, 1 capacity block rejected)" in summary


def test_one_table_per_project_with_counts_and_policy_result() -> None:
    document = render_preview_markdown(mixed_result())
    assert document.count("#### Project <code>") == 2
    big = (
        "| <code>big</code> | <code>demo.prod.big</code> | 🟡 changes | · | · | **1** | **1** | "
        + "❌ 1 mandatory |"
    )
    assert big in document
    assert "| <code>eval</code> | <code>demo.prod.eval</code> | 🔴 failed | · | · | · | · | — |" in document
    assert (
        "| _project resources_ | <code>demo.research</code> | 🟡 changes | 5 | · | · | · | ✅ pass |"
        in document
    )


def test_preflight_lists_shortfalls_first_in_gib() -> None:
    document = render_preview_markdown(mixed_result())
    rows = [line for line in document.splitlines() if line.startswith("| <code>compute.")]
    assert [r.split("|")[8].strip() for r in rows] == ["❌ **shortfall**", "❌ **shortfall**", "✅ ok"]
    assert "| 2,048 | 1,536 | 4,096 | **512** | GiB |" in rows[0]


def test_preflight_not_run_is_said() -> None:
    result = quiet_result().model_copy(update={"preflight": None})
    document = render_preview_markdown(result)
    assert "preflight: not run" in summary_line(document)
    assert "_Preflight did not run" in document


def test_fleet_error_without_stacks_is_shown() -> None:
    result = FleetResult(
        command="preview", fleet="demo", cloud="nebius", backend="s3://b", error="spec invalid:\n  line 3 <x>"
    )
    document = render_preview_markdown(result)
    assert_valid_comment(document)
    assert document.splitlines()[1].startswith("### ❌ ")
    assert "**Fleet error**\n\n<pre>spec invalid:\n  line 3 &lt;x&gt;</pre>" in document
    assert "#### Project" not in document and "#### Stack details" not in document


def test_stacks_that_could_not_be_previewed_are_other_not_green() -> None:
    stack = StackResult(
        stack="d.p.c", kind="cluster", project_key="p", cluster_name="c", status="not-supported"
    )
    result = FleetResult(command="preview", fleet="d", cloud="local", backend="file:///s", stacks=[stack])
    document = render_preview_markdown(result)
    assert summary_line(document).startswith(
        "0 stacks changed, 0 unchanged, 0 failed, 1 other (not-supported)"
    )
    assert document.splitlines()[1].startswith("### 🟡 ")
    assert "| <code>c</code> | <code>d.p.c</code> | ⚫ not supported | · | · | · | · | — |" in document


def test_details_put_failures_and_mandatory_violations_first() -> None:
    document = render_preview_markdown(mixed_result())
    order = re.findall(r"<summary><code>([^<]+)</code>", document)
    assert order == ["demo.prod.eval", "demo.prod.big", "demo.research.train-a", "demo.research"]


def test_provider_plumbing_is_left_out_and_dynamic_types_shortened() -> None:
    document = render_preview_markdown(mixed_result())
    research = document.split("<code>demo.research</code> — ")[1].split("</details>")[0]
    assert "**Resource changes** (4)" in research
    assert "pulumi:providers" not in research and "<code>default</code>" not in research
    assert "| <code>research-bucket-b</code> | <code>npa:Bucket</code> |" in research


def test_replacement_steps_collapse_into_one_replace_row() -> None:
    document = render_preview_markdown(mixed_result())
    big = document.split("<code>demo.prod.big</code> — ")[1].split("</details>")[0]
    assert "**Resource changes** (2)" in big
    assert big.count("<code>big-tf</code>") == 2  # the violation's resource and one replace row
    assert "create-replacement" not in big and "delete-replaced" not in big


# ------------------------------------------------------------------------------------------ size cap


def test_200_cluster_fleet_fits_one_comment_and_says_what_was_trimmed() -> None:
    result = big_fleet(projects=10, clusters_per_project=20)
    document = render_preview_markdown(result)
    tags = assert_valid_comment(document)
    match = re.search(r"details of (\d+) of (\d+) stacks omitted", document)
    assert match, "no trimming notice"
    omitted, total = int(match.group(1)), int(match.group(2))
    assert total == 200
    shown = tags.tags.count("details")
    diffs_trimmed = re.search(r"resource-level diffs of (\d+) more stacks omitted", document)
    assert shown + omitted == total
    assert shown >= 1 and (shown - (int(diffs_trimmed.group(1)) if diffs_trimmed else 0)) >= 0
    assert "full preview is in the JSON" in document
    # The tables are complete: every stack has its row, and the notice sits above them.
    assert all(f"<code>{s.stack}</code> |" in document for s in result.stacks)
    assert document.index("Trimmed to fit") < document.index("#### Project")
    # Failures were kept before anything else.
    failed = [s.stack for s in result.stacks if s.failed]
    kept = re.findall(r"<summary><code>([^<]+)</code>", document)
    assert kept[: len(failed)] == failed


def test_unchanged_rows_go_before_the_tables_collapse() -> None:
    # 1,000 quiet clusters and 3 changed ones: listing every row cannot fit, listing the changed ones can.
    def quiet(i: int) -> StackResult:
        project = f"p{i // 50}"
        return StackResult(
            stack=f"q.{project}.c{i}",
            kind="cluster",
            project_key=project,
            cluster_name=f"c{i}",
            status="no-changes",
        )

    stacks = [quiet(i) for i in range(1000)]
    for i in (3, 420, 999):
        stacks[i] = stacks[i].model_copy(update={"status": "changes", "changes": {"update": 1}})
    result = FleetResult(command="preview", fleet="q", cloud="local", backend="file:///s", stacks=stacks)
    document = render_preview_markdown(result)
    assert_valid_comment(document)
    assert "997 unchanged stacks left out of the project tables." in document
    assert "Details are kept" not in document  # no details were trimmed, so the notice does not say so
    p0 = document.split("#### Project <code>p0</code>")[1].split("####")[0]
    assert "_49 unchanged stacks not listed._" in p0
    assert "| <code>c3</code> | <code>q.p0.c3</code> | 🟡 changes | · | 1 |" in document
    assert "<code>q.p0.c4</code>" not in document


def test_tables_collapse_when_even_they_do_not_fit() -> None:
    result = big_fleet(projects=100, clusters_per_project=30, diff_rows=2)
    document = render_preview_markdown(result)
    tags = assert_valid_comment(document)
    assert "project tables collapsed to one row per project" in document
    assert "#### Projects" in document and "#### Project <code>" not in document
    # Whatever room the collapsed table leaves goes to details again, and the notice counts them exactly.
    match = re.search(r"details of (\d+) of 3000 stacks omitted", document)
    assert match
    assert tags.tags.count("details") + int(match.group(1)) == 3000
    assert "<code>team-099</code>" in document  # every project still has its row
    assert "#### Preflight" in document


def test_thousands_of_projects_still_fit_and_count_what_is_missing() -> None:
    result = big_fleet(projects=2000, clusters_per_project=1, diff_rows=1)
    document = render_preview_markdown(result)
    assert_valid_comment(document)
    match = re.search(r"(\d+) projects left out of that table", document)
    assert match
    listed = len(re.findall(r"^\| <code>team-\d+</code> \|", document, flags=re.MULTILINE))
    assert listed + int(match.group(1)) == 2000
    assert f"_{match.group(1)} more projects not listed._" in document


def test_small_budget_keeps_the_most_important_details() -> None:
    full = render_preview_markdown(mixed_result())
    budget = size(full) - 500  # too small for everything: the lowest-priority blocks must go
    document = render_preview_markdown(mixed_result(), budget=budget)
    assert size(document) <= budget
    kept = re.findall(r"<summary><code>([^<]+)</code>", document)
    assert kept[0] == "demo.prod.eval"
    assert len(kept) < 4
    assert f"details of {4 - len(kept)} of 4 stacks omitted" in document
    rendered(document)


# ------------------------------------------------------------------------------------------ scrubbing


def test_capacity_block_ids_and_secrets_never_appear() -> None:
    document = render_preview_markdown(mixed_result())
    assert FULL_BLOCK_ID not in document
    assert "e00abcdef1234" not in document
    assert "capacityblockgroup-…a1b2" in document  # masked, so two blocks can still be told apart
    assert LEAKED_TOKEN not in document
    assert "NEBIUS_IAM_TOKEN=[secret]" in document
    assert "region=eu-north1" not in document  # backend query strings stay out


@pytest.mark.parametrize(
    ("raw", "leak"),
    [
        (f"block {FULL_BLOCK_ID} busy", "e00abcdef1234a1b2"),
        ("capacityblockgroup-e00zz_yy-xx9 reserved", "e00zz_yy-xx9"),
        ('{"password": "hunter2-long"}', "hunter2"),
        ('{"iam_token":"abc\\"def"}', "abc"),
        ("TF_VAR_iam_token=v1.abcdefgh12345 terraform plan", "v1.abcdefgh12345"),
        ("https://x/?secret_key=AbCdEf123456&region=eu", "AbCdEf123456"),
        ("Authorization: Bearer abc.def-ghi_jkl", "abc.def-ghi_jkl"),
        ("jwt eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl end", "eyJzdWIiOiJ4In0"),
        ("key AKIAABCDEFGHIJKLMNOP used", "AKIAABCDEFGHIJKLMNOP"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "MIIEow"),
        ("-----BEGIN PRIVATE KEY-----\nMIIEvQ truncated", "MIIEvQ"),
        (
            '{"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", '
            '"plaintext": "\\"s3cr3t\\""}',
            "s3cr3t",
        ),
    ],
)
def test_scrub_removes_ids_and_credentials(raw: str, leak: str) -> None:
    assert leak not in scrub(raw)


def test_scrub_leaves_ordinary_text_alone() -> None:
    text = "the bridge token must be a Pulumi secret; gpu_nodes_count=4 on project-e00abc"
    assert scrub(text) == text


def test_backend_label_drops_credentials_and_query() -> None:
    assert backend_label("s3://bucket/prefix?region=eu&endpoint=x") == "s3://bucket/prefix"
    assert backend_label("https://user:token@api.example.com/state") == "https://api.example.com/state"
    assert backend_label("file://~/.npa-pulumi/state") == "file://~/.npa-pulumi/state"


# ------------------------------------------------------------------------------------------ escaping

CRAFTED = "evil|name`<img src=x onerror=alert(1)>`**bold**</details><script>x</script>"


def crafted_result() -> FleetResult:
    stack = f"demo.p.{CRAFTED}"
    return FleetResult(
        command="preview",
        fleet="demo --> <b>x</b>",
        cloud="local",
        backend="file:///tmp/state",
        stacks=[
            StackResult(
                stack=stack,
                kind="cluster",
                project_key=f"p|{CRAFTED}",
                cluster_name=CRAFTED,
                status="failed",
                changes={"update": 1},
                diff=[change(stack, "update", "npa:x:Y", CRAFTED, [CRAFTED, "a\\|b"])],
                policy=[
                    PolicyViolation(
                        policy=CRAFTED,
                        pack=CRAFTED,
                        level="advisory",
                        message=f"line1\n\n{CRAFTED}",
                        resource=CRAFTED,
                    )
                ],
                error=f"boom </pre> {CRAFTED}\n\n```\n# heading",
                retry_command=CRAFTED,
            )
        ],
        preflight={
            "ok": False,
            "requirements": [{**requirement(CRAFTED, CRAFTED, 2, 1, 1, "gpu"), "detail": CRAFTED}],
            "capacity_blocks": [
                {
                    "id": CRAFTED,
                    "region": "r",
                    "platform": CRAFTED,
                    "fabric": "",
                    "required_gpus": 1,
                    "free_gpus": None,
                    "status": "rejected",
                    "reason": CRAFTED,
                }
            ],
            "errors": [CRAFTED],
            "notes": [],
        },
        error=f"fleet {CRAFTED}",
    )


def test_crafted_names_cannot_break_tables_or_inject_html() -> None:
    document = render_preview_markdown(crafted_result())
    tags = assert_valid_comment(document)  # only our tags, balanced; every table row has its cells
    assert "<img" not in document and "<script" not in document and "<b>" not in document
    assert tags.tags.count("details") == 1 and tags.tags.count("summary") == 1
    assert tags.tags.count("pre") == 2  # the fleet error and the stack error, each still one block


def test_marker_cannot_close_early() -> None:
    line = marker("demo --> <b>x</b>")
    assert line.startswith("<!-- npa-pulumi:fleet-preview:demo") and line.endswith(" -->")
    assert line.count("-->") == 1 and "<b>" not in line
    document = render_preview_markdown(crafted_result())
    assert document.splitlines()[0] == line


def test_crafted_text_keeps_its_characters_when_rendered() -> None:
    # Escaping must not lose what the name says: a reviewer sees the literal characters.
    html = MarkdownIt("commonmark").enable("table").render(render_preview_markdown(crafted_result()))
    assert "evil|name`&lt;img src=x onerror=alert(1)&gt;`**bold**&lt;/details&gt;" in html


def _terraform_plan(n: int, resources: int) -> dict[str, Any]:
    """A cluster's Terraform plan: its GPU node group replaced (a destructive change) when n is even."""
    rows: list[dict[str, Any]] = [
        {
            "address": f"module.k8s.nebius_mk8s_v1_node_group.extra[{i}]",
            "action": "update",
            "kind": "node_group",
            "destructive": False,
            "attributes": [
                {"name": f"labels.team-{j}", "before": "a" * 40, "after": "b" * 40} for j in range(9)
            ],
        }
        for i in range(resources)
    ]
    if n % 2 == 0:
        rows.insert(
            0,
            {
                "address": "terraform_data.gpu_node_group[0]",
                "action": "replace",
                "kind": "node_group",
                "destructive": True,
                "attributes": [{"name": "triggers_replace.preset", "before": "1gpu", "after": "8gpu"}],
            },
        )
    return {"add": 0, "change": resources, "destroy": 0, "replace": int(n % 2 == 0), "resources": rows}


def test_terraform_plans_are_shown_per_cluster_counted_fleet_wide_and_fit_the_limit() -> None:
    result = big_fleet(20, 10, diff_rows=2)
    clusters = result.clusters()
    for n, stack in enumerate(clusters):
        stack.terraform = _terraform_plan(n, 60)
    replaced = sum(1 for n in range(len(clusters)) if n % 2 == 0)
    document = render_preview_markdown(result)
    assert_valid_comment(document)
    assert f"{replaced} node groups will be replaced" in document
    assert "Trimmed to fit" in document
    # Trimmed sections keep the destructive replacement in their compact form.
    assert "Terraform plan tables of" in document
    assert "- ⚠️ destructive replace " + code("terraform_data.gpu_node_group[0]") in document

    small = big_fleet(1, 1, diff_rows=1)
    small.clusters()[0].terraform = _terraform_plan(0, 2)
    document = render_preview_markdown(small)
    assert_valid_comment(document)
    assert "1 node group will be replaced" in document
    assert "**Terraform plan**: 0 to add, 2 to change, 0 to destroy, 1 to replace" in document
    assert "| replace ⚠️ **destructive** | " + code("terraform_data.gpu_node_group[0]") + " |" in document
    many = big_fleet(1, 1, diff_rows=1)
    many.clusters()[0].terraform = _terraform_plan(1, 25)
    assert "… and 5 more Terraform resources (see the JSON)" in render_preview_markdown(many)


def test_terraform_attribute_values_are_written_as_terraform_would() -> None:
    result = big_fleet(1, 1, diff_rows=1)
    result.clusters()[0].terraform = {
        "add": 1,
        "change": 0,
        "destroy": 0,
        "replace": 0,
        "resources": [
            {
                "address": "terraform_data.extra",
                "action": "create",
                "kind": "other",
                "destructive": False,
                "attributes": [{"name": "input", "before": None, "after": ["a", 1]}],
            }
        ],
    }
    document = render_preview_markdown(result)
    assert '<code>input</code>: <code>null</code> → <code>\\["a", 1\\]</code>' in document
    assert "None" not in document


def test_disruption_classes_are_counted_and_explained() -> None:
    from npa_pulumi.bridge.plan_summary import stack_disruption, summarize

    # A Terraform plan in `terraform show -json`'s documented shape: the GPU node group's version moves.
    group = {"name": "c-ng-gpu-0", "version": "1.31", "fixed_node_count": 2, "template": {}}
    plan = summarize(
        {
            "resource_changes": [
                {
                    "address": "nebius_mk8s_v1_node_group.gpu[0]",
                    "mode": "managed",
                    "type": "nebius_mk8s_v1_node_group",
                    "name": "gpu",
                    "index": 0,
                    "change": {"actions": ["update"], "before": group, "after": {**group, "version": "1.32"}},
                }
            ]
        }
    )
    result = big_fleet(1, 2, diff_rows=1)
    first, second = result.clusters()
    first.terraform = plan
    diff = [
        {"urn": "urn:x::c-terraform", "type": "pulumi-python:dynamic/npa:TerraformModule", "op": "update"}
    ]
    first.disruption = stack_disruption(diff, plan)
    second.disruption = stack_disruption(
        [{"urn": "urn:x::gate", "type": "npa:GpuHealthGate", "op": "update"}], None
    )
    document = render_preview_markdown(result)
    assert_valid_comment(document)
    assert (
        "changes: **1 stack disruptive** (drains or replaces nodes, or loses data), 1 in-place only"
        in document
    )
    assert "**Disruption**: ⚠️ **disruptive**" in document
    assert (
        "- disruptive: "
        + code("nebius_mk8s_v1_node_group.gpu[0]")
        + ": Kubernetes version change: every node "
        "rolled (drained, re-provisioned)"
    ) in document
    assert "| disruptive |" in document  # the Class column of the Terraform table
