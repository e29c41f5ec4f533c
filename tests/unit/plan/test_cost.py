"""What a fleet costs (issue 29): the shipped price catalog, --prices files, the cost in `plan`, the cost
delta of a preview and its sums across shards, the budget guardrail, and the comment's cost section."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from npa_pulumi.cli.main import cli
from npa_pulumi.output.cost_render import cost_markdown, cost_text
from npa_pulumi.output.merge import PreviewDocument, merge_previews
from npa_pulumi.output.results import FleetResult, StackResult
from npa_pulumi.plan.budget import BudgetConfig, budget_config, check_budget
from npa_pulumi.plan.cost import (
    Cost,
    CostBasis,
    PoolBasis,
    cluster_basis,
    money,
    price_basis,
)
from npa_pulumi.plan.cost_delta import Change, headline, stack_delta, summarize
from npa_pulumi.plan.document import plan_document
from npa_pulumi.plan.prices import (
    PricesFileError,
    Pricing,
    builtin_layer,
    load_catalog,
    parse_catalog_text,
)
from npa_pulumi.plan.targets import resolve_targets
from npa_pulumi.spec.parse import parse_spec

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: costs
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
projects:
  - name: a
    object_storage: {enabled: true, storage_class: standard, size_gibibytes: 100}
    clusters:
      - name: train
        gpu_nodes: {count: GPU_COUNT, platform: gpu-h200-sxm, preset: 8gpu-128vcpu-1600gb}
        infiniband_fabric: us-central1-a
        enable_filestore: true
        filestore_disk_size_gibibytes: 2048
      - name: spot
        gpu_nodes: {count: 1, platform: gpu-h100-sxm, preset: 8gpu-128vcpu-1600gb, preemptible: true}
        infiniband_fabric: us-central1-a
  - name: b
    clusters:
      - name: reserved
        gpu_nodes:
          count: 2
          platform: gpu-h200-sxm
          preset: 8gpu-128vcpu-1600gb
          capacity_block_group: capacityblockgroup-e00secretid
        infiniband_fabric: us-central1-a
      - name: rtx
        gpu_nodes: {count: 1, platform: gpu-rtx6000, preset: 1gpu-24vcpu-218gb}
"""
CPU_MONTHLY = 0.0992 * 730  # cpu-d3 4vcpu-16gb on demand


def plan(gpu_count: int = 2, prices: Path | None = None) -> dict[str, Any]:
    spec = parse_spec(SPEC.replace("GPU_COUNT", str(gpu_count)))
    return plan_document(spec, resolve_targets(spec), prices=load_catalog(prices))


def clusters(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for p in document["projects"] for c in p["clusters"]}


def line(cost: dict[str, Any], item: str) -> dict[str, Any]:
    return next(entry for entry in cost["lines"] if entry["item"] == item)


@pytest.fixture(autouse=True)
def _no_ambient_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NPA_PRICES", raising=False)


# ----------------------------------------------------------------------------------------- the catalog


def test_shipped_catalog_has_a_version_a_date_and_a_source_for_every_figure() -> None:
    layer = builtin_layer()
    assert layer.file.version and layer.file.date and layer.file.hours_per_month == 730
    sources = [entry.source for entry in layer.file.compute] + [entry.source for entry in layer.file.units]
    for source in sources:
        assert source in layer.file.sources and layer.file.sources[source].date, source
    figures = {(e.platform, e.preset): e for e in layer.file.compute}
    h200 = figures["gpu-h200-sxm", "8gpu-128vcpu-1600gb"]
    assert (h200.on_demand_hourly_usd, h200.preemptible_hourly_usd) == (Decimal("28.0"), Decimal("11.6"))
    # Unknown stays unknown: nothing in the shipped catalog prices storage at zero.
    assert all(entry.gib_month_usd is None and entry.reason for entry in layer.file.storage)


def test_the_shipped_catalog_from_the_cache_is_what_its_yaml_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped catalog's YAML is read once per content and kept in the disk cache; what comes back is
    the same catalog, in the same order, and a damaged entry is read past."""
    from importlib import resources

    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path / "home"))
    text = resources.files("npa_pulumi.plan").joinpath("price_catalog.yaml").read_text(encoding="utf-8")
    fresh = parse_catalog_text(text, "shipped")
    first = builtin_layer().file
    [entry] = (tmp_path / "home" / "cache" / "price-catalogs").glob("*.json")
    cached = builtin_layer().file
    assert cached == first == fresh
    assert list(cached.sources) == list(fresh.sources)
    assert [(e.platform, e.preset) for e in cached.compute] == [(e.platform, e.preset) for e in fresh.compute]
    entry.write_text('"{not json"')
    assert builtin_layer().file == fresh


def test_per_unit_prices_reproduce_the_published_presets() -> None:
    catalog = load_catalog()
    h200_1gpu = catalog.compute(
        "gpu-h200-sxm", "1gpu-16vcpu-200gb", "eu-north1", Pricing.ON_DEMAND, gpus=1, vcpus=16, memory=200
    )
    assert not isinstance(h200_1gpu, str) and h200_1gpu.hourly_usd == Decimal("3.50")
    # A preset without its own entry, from the per-unit rates (what billing itemizes since October 2025).
    h200_4gpu = catalog.compute(
        "gpu-h200-sxm", "4gpu-64vcpu-800gb", "eu-north1", Pricing.ON_DEMAND, gpus=4, vcpus=64, memory=800
    )
    assert not isinstance(h200_4gpu, str) and h200_4gpu.hourly_usd == Decimal("14.0000")
    assert h200_4gpu.basis == "units"
    cpu = catalog.compute("cpu-d3", "4vcpu-16gb", "x", Pricing.ON_DEMAND, gpus=0, vcpus=4, memory=16)
    units = catalog.compute("cpu-d3", "8vcpu-32gb", "x", Pricing.ON_DEMAND, gpus=0, vcpus=8, memory=32)
    assert not isinstance(cpu, str) and not isinstance(units, str)
    assert units.hourly_usd == 2 * cpu.hourly_usd


def test_regional_entries_apply_only_in_their_region() -> None:
    catalog = load_catalog()
    b200 = ("gpu-b200-sxm", "8gpu-160vcpu-1792gb")
    priced = catalog.compute(*b200, "us-central1", Pricing.ON_DEMAND, gpus=8, vcpus=160, memory=1792)
    assert not isinstance(priced, str) and priced.hourly_usd == Decimal("44.0")
    elsewhere = catalog.compute(*b200, "eu-north1", Pricing.ON_DEMAND, gpus=8, vcpus=160, memory=1792)
    assert isinstance(elsewhere, str)


# ----------------------------------------------------------------------------------------- plan


def test_plan_json_gives_each_cluster_and_the_fleet_a_monthly_cost() -> None:
    document = plan()
    found = clusters(document)
    train = found["train"]["cost"]
    assert line(train, "gpu_nodes")["monthly_usd"] == 2 * 28.0 * 730 == 40_880
    assert train["monthly_usd"] == pytest.approx(40_880 + CPU_MONTHLY)
    assert train["hourly_usd"] == pytest.approx(56 + 0.0992)
    for cluster in found.values():
        assert set(cluster["cost"]) == {"hourly_usd", "monthly_usd", "lines", "unknown", "reserved"}
    per_cluster = sum(c["cost"]["monthly_usd"] for c in found.values())
    assert document["cost"]["monthly_usd"] == pytest.approx(per_cluster)
    assert {entry["item"] for entry in document["cost"]["lines"]} == {"a", "b"}
    project_a = document["projects"][0]
    assert project_a["total_cost"]["monthly_usd"] == pytest.approx(
        found["train"]["cost"]["monthly_usd"] + found["spot"]["cost"]["monthly_usd"]
    )
    # The bucket (a project stack's) and the filesystem have no public price: unknown, never zero.
    assert [u["item"] for u in project_a["cost"]["unknown"]] == ["bucket"]
    assert "filesystem" in {u["item"] for u in train["unknown"]}
    assert document["prices"]["layers"][0]["origin"] == "built-in"
    assert "capacityblockgroup-e00secretid" not in json.dumps(document)


def test_doubling_a_gpu_pool_doubles_its_line_exactly() -> None:
    single = line(clusters(plan(gpu_count=1))["train"]["cost"], "gpu_nodes")
    double = line(clusters(plan(gpu_count=2))["train"]["cost"], "gpu_nodes")
    assert double["monthly_usd"] == 2 * single["monthly_usd"]
    assert double["hourly_usd"] == 2 * single["hourly_usd"]
    assert double["quantity"] == 2 and single["unit_price_usd"] == double["unit_price_usd"] == 28.0


def test_a_preemptible_pool_uses_the_preemptible_price() -> None:
    spot = line(clusters(plan())["spot"]["cost"], "gpu_nodes")
    assert spot["pricing"] == "preemptible"
    assert spot["unit_price_usd"] == 10.0 and spot["monthly_usd"] == 7_300
    # Without a preemptible figure the pool is unknown: never priced on demand.
    catalog = load_catalog()
    b200 = ("gpu-b200-sxm", "8gpu-160vcpu-1792gb", "us-central1")
    found = catalog.compute(*b200, Pricing.PREEMPTIBLE, gpus=8, vcpus=160, memory=1792)
    assert isinstance(found, str) and "preemptible" in found


def test_a_capacity_block_pool_is_reported_separately(tmp_path: Path) -> None:
    reserved = clusters(plan())["reserved"]["cost"]
    assert all(entry["item"] != "gpu_nodes" for entry in reserved["lines"])
    (item,) = reserved["reserved"]["not_priced"]
    assert item["item"] == "gpu_nodes" and item["reason"].startswith("reserved, not priced")
    assert reserved["monthly_usd"] == pytest.approx(CPU_MONTHLY)  # only the CPU pool is on demand

    contract = tmp_path / "prices.yaml"
    contract.write_text(
        "reserved:\n"
        "  - {platform: gpu-h200-sxm, preset: 8gpu-128vcpu-1600gb, hourly_usd: 20, source: contract}\n"
    )
    document = plan(prices=contract)
    priced = clusters(document)["reserved"]["cost"]
    (entry,) = priced["reserved"]["lines"]
    assert entry["pricing"] == "reserved" and entry["monthly_usd"] == 2 * 20 * 730
    assert priced["monthly_usd"] == pytest.approx(CPU_MONTHLY)  # never mixed into the on-demand total
    assert document["cost"]["reserved"]["monthly_usd"] == 29_200
    assert document["cost"]["monthly_usd"] == pytest.approx(plan()["cost"]["monthly_usd"])


def test_a_preset_without_a_public_price_is_listed_as_unknown() -> None:
    rtx = clusters(plan())["rtx"]["cost"]
    unknown = {u["item"]: u for u in rtx["unknown"]}
    assert "RTX PRO 6000" in unknown["gpu_nodes"]["reason"]
    assert [entry["item"] for entry in rtx["lines"]] == ["cpu_nodes"]
    assert any(u["item"] == "costs.b.rtx: gpu_nodes" for u in plan()["cost"]["unknown"])


def test_a_negotiated_gpu_price_changes_every_figure(tmp_path: Path) -> None:
    prices = tmp_path / "negotiated.yaml"
    prices.write_text(
        "version: acme-2026\nsources: {acme: {title: ACME contract, date: '2026-01-01'}}\nunits:\n"
        "  - {platform: gpu-h200-sxm, gpu_hourly_usd: 2.0, vcpu_hourly_usd: 0.012, "
        "memory_gib_hourly_usd: 0.0032, source: acme}\n"
    )
    before, after = plan(), plan(prices=prices)
    new_hourly = 8 * 2.0 + 128 * 0.012 + 1600 * 0.0032  # 22.656, against the list price of 28
    gpu = line(clusters(after)["train"]["cost"], "gpu_nodes")
    assert gpu["unit_price_usd"] == pytest.approx(new_hourly)
    assert gpu["monthly_usd"] == pytest.approx(2 * new_hourly * 730)
    assert gpu["source"] == "acme (2026-01-01)"
    saving = 2 * (28 - new_hourly) * 730
    assert clusters(after)["train"]["cost"]["monthly_usd"] == pytest.approx(
        clusters(before)["train"]["cost"]["monthly_usd"] - saving
    )
    assert after["projects"][0]["total_cost"]["monthly_usd"] == pytest.approx(
        before["projects"][0]["total_cost"]["monthly_usd"] - saving
    )
    assert after["cost"]["monthly_usd"] == pytest.approx(before["cost"]["monthly_usd"] - saving)
    assert [layer["origin"] for layer in after["prices"]["layers"]] == [str(prices), "built-in"]
    # H100 is not in the file: still the shipped figure.
    assert line(clusters(after)["spot"]["cost"], "gpu_nodes")["monthly_usd"] == 7_300


def test_replace_mode_uses_the_file_alone(tmp_path: Path) -> None:
    prices = tmp_path / "only.yaml"
    prices.write_text(
        "mode: replace\ncompute:\n  - {platform: cpu-d3, preset: 4vcpu-16gb, on_demand_hourly_usd: 1}\n"
    )
    document = plan(prices=prices)
    train = clusters(document)["train"]["cost"]
    assert line(train, "cpu_nodes")["monthly_usd"] == 730
    assert "gpu_nodes" in {u["item"] for u in train["unknown"]}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("units:\n  - platform: cpu-d3\n    vcpu_hourly_usd: abc\n", "units[0].vcpu_hourly_usd (line 3)"),
        (
            "compute:\n  - {platform: x, preset: y, on_demand_hourly_usd: -1}\n",
            "compute[0].on_demand_hourly_usd",
        ),
        ("prices: {}\n", "prices (line 1): Extra inputs are not permitted"),
        ("hours_per_month: 720\n", "730 hours"),
        ("- a\n- b\n", "a price catalog is a mapping"),
        ("compute: [\n", "line"),
    ],
)
def test_a_malformed_prices_file_is_a_located_error(text: str, fragment: str) -> None:
    with pytest.raises(PricesFileError) as caught:
        parse_catalog_text(text, "prices.yaml")
    assert fragment in str(caught.value) and str(caught.value).startswith("prices.yaml")


def test_plan_and_prices_commands(tmp_path: Path) -> None:
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC.replace("GPU_COUNT", "2"))
    runner = CliRunner()
    done = runner.invoke(cli, ["plan", "--spec", str(spec), "--output", "json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["cost"]["monthly_usd"] > 40_000
    text = runner.invoke(cli, ["plan", "--spec", str(spec)])
    assert "Fleet cost: $" in text.stdout and "not priced: costs.b.rtx: gpu_nodes" in text.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("units:\n  - platform: cpu-d3\n    vcpu_hourly_usd: abc\n")
    refused = runner.invoke(cli, ["plan", "--spec", str(spec), "--prices", str(bad), "--output", "json"])
    assert refused.exit_code == 2
    error = json.loads(refused.stdout)["error"]
    assert error["kind"] == "invalid-prices" and "line 3" in error["message"]
    env = runner.invoke(cli, ["prices", "--output", "json"], env={"NPA_PRICES": str(bad)})
    assert env.exit_code == 2
    listing = runner.invoke(cli, ["prices", "--output", "json"])
    assert listing.exit_code == 0
    files = json.loads(listing.stdout)["files"]
    assert files[0]["origin"] == "built-in" and files[0]["compute"][0]["on_demand_hourly_usd"] == 23.6
    assert "gpu-h200-sxm 8gpu-128vcpu-1600gb: on-demand $28/h" in runner.invoke(cli, ["prices"]).stdout


# ----------------------------------------------------------------------------------------- deltas


def pool_cost(count: int, preset: str = "8gpu-128vcpu-1600gb") -> Cost:
    basis = CostBasis(
        region="us-central1",
        pools=[
            PoolBasis(
                item="gpu_nodes", count=count, platform="gpu-h200-sxm", preset=preset,
                gpus_per_node=8, vcpus_per_node=128, memory_gib_per_node=1600,
            )
        ],
    )  # fmt: skip
    return price_basis(basis, load_catalog())


def test_a_recorded_basis_round_trips_through_stack_outputs() -> None:
    spec = parse_spec(SPEC.replace("GPU_COUNT", "2"))
    basis = cluster_basis(resolve_targets(spec)[0])
    recorded = json.loads(json.dumps(basis.to_output()))
    assert CostBasis.from_output(recorded) == basis
    assert CostBasis.from_output(None) is None and CostBasis.from_output({"format": 99}) is None


def test_stack_deltas_and_the_headline() -> None:
    grown = stack_delta("f.a.c", "cluster", "a", "c", pool_cost(1), pool_cost(2))
    assert grown.change is Change.CHANGED and grown.diff_monthly_usd == Decimal(28 * 730)
    (changed,) = grown.lines
    assert changed.item == "gpu_nodes" and changed.diff_monthly_usd == Decimal(28 * 730)
    assert stack_delta("s", "cluster", "a", "c", pool_cost(1), pool_cost(1)).change is Change.UNCHANGED
    assert stack_delta("s", "cluster", "a", "c", None, pool_cost(1)).change is Change.ADDED
    removed = stack_delta("s", "cluster", "a", "c", pool_cost(1), None)
    assert removed.change is Change.REMOVED and removed.diff_monthly_usd == -Decimal(20_440)
    unrecorded = stack_delta("s", "cluster", "a", "c", None, pool_cost(1), past_recorded=False)
    assert unrecorded.change is Change.CHANGED and not unrecorded.past_recorded
    assert headline(Decimal(19_276), Decimal(40_880)) == "monthly cost will increase by $40,880 (+212%)"
    assert headline(Decimal(100), Decimal(0)) == "monthly cost will not change"
    assert headline(Decimal(0), Decimal(5)) == "monthly cost will increase by $5.00"
    assert headline(Decimal(200), Decimal(-50)) == "monthly cost will decrease by $50.00 (-25%)"
    assert (
        money(1234.5) == "$1,234"
        and money(-3.5, signed=True) == "-$3.50"
        and money(2, signed=True) == "+$2.00"
    )


def deltas() -> list[Any]:
    return [
        stack_delta("f.a", "project", "a", None, Cost(), Cost()),
        stack_delta("f.a.one", "cluster", "a", "one", pool_cost(1), pool_cost(2)),
        stack_delta("f.b", "project", "b", None, Cost(), Cost()),
        stack_delta("f.b.two", "cluster", "b", "two", None, pool_cost(1)),
        stack_delta("f.b.old", "cluster", "b", "old", pool_cost(1), None),
    ]


def test_summarize_totals_per_project_and_fleet() -> None:
    cost = summarize(deltas(), {"layers": []})
    assert cost["past_monthly_usd"] == 2 * 20_440 and cost["monthly_usd"] == 3 * 20_440
    assert cost["diff_monthly_usd"] == 20_440 and cost["diff_percent"] == 50.0
    assert cost["headline"] == "monthly cost will increase by $20,440 (+50%)"
    projects = {p["project_key"]: p for p in cost["projects"]}
    assert projects["a"]["diff_monthly_usd"] == 20_440 and projects["b"]["diff_monthly_usd"] == 0
    assert [s["change"] for s in cost["stacks"]] == ["unchanged", "changed", "unchanged", "added", "removed"]


def preview_result(stacks: list[str], cost: dict[str, Any], shard: str | None) -> dict[str, Any]:
    result = FleetResult(command="preview", fleet="f", cloud="local", backend="file://x", shard=shard)
    result.stacks = [
        StackResult(stack=s, kind="cluster" if s.count(".") == 2 else "project", project_key=s.split(".")[1],
                    status="changes")
        for s in stacks
    ]  # fmt: skip
    result.cost = cost
    return result.to_json()


def test_preview_merge_gives_the_totals_of_an_unsharded_run() -> None:
    every = deltas()
    config = BudgetConfig(level="mandatory", monthly_increase_limit_usd=Decimal(1000))
    whole = summarize(every, {"layers": []}, config.to_json())
    # Shard 1 has a's cluster, shard 2 b's; each saw its project stacks, and both saw the removed stack.
    one = summarize([every[0], every[1], every[4]], {"layers": []}, config.to_json())
    two = summarize([every[2], every[3], every[4]], {"layers": []}, config.to_json())
    documents = [
        PreviewDocument("1.json", preview_result(["f.a", "f.a.one"], one, "1/2")),
        PreviewDocument("2.json", preview_result(["f.b", "f.b.two"], two, "2/2")),
    ]
    merged = merge_previews(documents, ["f.a", "f.a.one", "f.b", "f.b.two"])
    assert merged.cost is not None
    for key in ("past_monthly_usd", "monthly_usd", "diff_monthly_usd", "headline", "projects"):
        assert merged.cost[key] == whole[key], key
    assert sorted(s["stack"] for s in merged.cost["stacks"]) == sorted(s["stack"] for s in whole["stacks"])
    # The budget is judged on the merged totals: each shard alone would be over the limit too, once.
    assert [v.policy for v in merged.policy] == ["fleet-monthly-budget"]
    assert merged.failed_count == 1


# ----------------------------------------------------------------------------------------- budget


def test_the_budget_policy_fails_a_change_over_its_limit_when_mandatory() -> None:
    cost = summarize(deltas(), {"layers": []})
    assert check_budget(cost, BudgetConfig()) == []  # no limit set: nothing to judge
    config = budget_config(
        {"fleet-monthly-budget": {"enforcementLevel": "mandatory", "monthly_increase_limit_usd": 10_000}}, "p"
    )
    (violation,) = check_budget(cost, config)
    assert violation["level"] == "mandatory" and "$20,440 a month" in violation["message"]
    result = FleetResult(command="preview", fleet="f", cloud="local", backend="file://x")
    from npa_pulumi.output.results import PolicyViolation

    result.policy.append(PolicyViolation(**violation))
    assert result.failed_count == 1 and result.to_json()["ok"] is False
    total = budget_config({"fleet-monthly-budget": {"monthly_total_limit_usd": 50_000}}, "p")
    (advisory,) = check_budget(cost, total)
    assert advisory["level"] == "advisory" and "would cost $61,320 a month" in advisory["message"]
    disabled = {"all": "disabled", "fleet-monthly-budget": {"monthly_total_limit_usd": 1}}
    assert check_budget(cost, budget_config(disabled, "p")) == []
    roomy = {"fleet-monthly-budget": {"monthly_increase_limit_usd": 30_000}}
    assert check_budget(cost, budget_config(roomy, "p")) == []
    with pytest.raises(Exception, match="must be a number"):
        budget_config({"fleet-monthly-budget": {"monthly_increase_limit_usd": "lots"}}, "p")
    with pytest.raises(Exception, match="enforcementLevel"):
        budget_config({"fleet-monthly-budget": "strict"}, "p")


# ----------------------------------------------------------------------------------------- rendering


def test_the_comment_cost_section_has_the_headline_table_and_collapsed_lines() -> None:
    result = FleetResult(command="preview", fleet="f", cloud="local", backend="file://x")
    result.cost = summarize(deltas(), {"layers": [{"origin": "built-in", "version": "v1", "date": "d"}]})
    section = cost_markdown(result)
    assert "**monthly cost will increase by $20,440 (+50%)**" in section
    assert "| Project | Previous | New | Diff |" in section
    assert "| <code>a</code> | $20,440 | $40,880 | +$20,440 |" in section
    assert "| **All projects** | **$40,880** | **$61,320** | **+$20,440** |" in section
    assert "<details>" in section and section.count("<details>") == section.count("</details>")
    assert "- **-** <code>f.b.old</code> -$20,440/month" in section
    assert "Key: ~ changed, + added, - removed." in section
    assert any(line.startswith("cost: monthly cost will increase") for line in cost_text(result.cost))


def test_the_cost_section_escapes_what_comes_from_the_spec() -> None:
    hostile = "a|<img src=x>"
    result = FleetResult(command="preview", fleet="f", cloud="local", backend="file://x")
    result.cost = summarize(
        [stack_delta("f.x.c", "cluster", hostile, "c", None, pool_cost(1))], {"layers": []}
    )
    section = cost_markdown(result)
    assert "<img" not in section and "a\\|&lt;img" in section


def test_what_a_stack_recorded_decides_its_past() -> None:
    from npa_pulumi.engine.costs import _recorded

    basis = CostBasis(region="r", pools=[PoolBasis(item="cpu_nodes", count=1, platform="cpu-d3", preset="x")])
    assert _recorded(None) == (None, True)  # no stack: nothing before
    assert _recorded({}) == (None, True)  # created by a preview, never deployed
    assert _recorded({"npa_fingerprint": "f", "cluster_id": "c"}) == (None, False)  # deployed, not recorded
    assert _recorded({"npa_fingerprint": "f", "cost_basis": basis.to_output()}) == (basis, True)


def test_status_cost_text_lists_projects_and_clusters() -> None:
    cost = {
        **Cost().to_json(),
        "monthly_usd": 40_952.42,
        "hourly_usd": 56.1,
        "projects": [
            {
                "project_key": "a",
                "cost": {"monthly_usd": 40_952.42},
                "stacks": [
                    {"stack": "f.a", "cluster_name": None, "cost": {"monthly_usd": 0}},
                    {"stack": "f.a.train", "cluster_name": "train", "cost": {"monthly_usd": 40_952.42}},
                ],
            }
        ],
        "unknown": [{"item": "f.a.train: gpu_nodes.disk"}],
        "unrecorded": ["f.b.old"],
    }
    lines = cost_text(cost)
    assert lines[0] == "cost now: $40,952 a month ($56.10/h)"
    assert "    train: $40,952 a month" in lines and "  project a: $40,952 a month" in lines
    assert any("1 item not priced" in line for line in lines) and any("f.b.old" in line for line in lines)


def test_preview_refuses_bad_cost_inputs_before_any_engine_run(tmp_path: Path) -> None:
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC.replace("GPU_COUNT", "2"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("compute:\n  - {platform: cpu-d3, preset: 4vcpu-16gb, on_demand_hourly_usd: free}\n")
    runner = CliRunner()
    refused = runner.invoke(cli, ["preview", "--spec", str(spec), "--prices", str(bad), "--output", "json"])
    assert refused.exit_code == 2, refused.output
    error = json.loads(refused.stdout)["error"]
    assert (
        error["kind"] == "invalid-prices" and "compute[0].on_demand_hourly_usd (line 2)" in error["message"]
    )
    config = tmp_path / "policy.json"
    config.write_text(json.dumps({"fleet-monthly-budget": {"monthly_total_limit_usd": "a lot"}}))
    refused = runner.invoke(
        cli, ["up", "--spec", str(spec), "--policy-config", str(config), "--output", "json"]
    )
    assert refused.exit_code == 2, refused.output
    assert "monthly_total_limit_usd must be a number" in json.loads(refused.stdout)["error"]["message"]


def test_a_slurm_cluster_prices_its_workers_and_names_what_it_cannot() -> None:
    from npa_pulumi.spec.parse import load_spec

    repo = Path(__file__).resolve().parents[3]
    spec = load_spec(repo / "examples" / "mixed-backends.yaml")
    document = plan_document(spec, resolve_targets(spec), prices=load_catalog())
    slurm = next(c for c in clusters(document).values() if c["backend"] == "soperator")["cost"]
    assert {entry["item"] for entry in slurm["lines"]} == {"workers[cpu]", "workers[gpu]"}
    unknown = {u["item"] for u in slurm["unknown"]}
    assert {"slurm_control_plane", "filesystem"} <= unknown
