"""Where the campaign's seed comes from: NPA_CHAOS_SEED replays; CI derives it from the commit under test
(so a CI failure replays from the commit alone); elsewhere a new campaign each run."""

from __future__ import annotations

from conftest import SEED, campaign_seed

SHA = "3f2a9c1d0b7e6a5f4c3d2e1f0a9b8c7d6e5f4a3b"


def _no_head() -> str | None:
    raise AssertionError("git must not be asked")


def test_an_explicit_seed_wins_everywhere() -> None:
    assert campaign_seed({"NPA_CHAOS_SEED": "42", "CI": "true", "GITHUB_SHA": SHA}, _no_head) == (
        42,
        "NPA_CHAOS_SEED",
    )


def test_ci_derives_the_seed_from_the_commit() -> None:
    seed, source = campaign_seed({"CI": "true", "GITHUB_SHA": SHA}, _no_head)
    assert seed == int(SHA[:8], 16) % (2**31 - 1) + 1 and source == f"commit {SHA[:12]}"
    assert (
        campaign_seed({"CI": "1", "GITHUB_SHA": SHA}, _no_head)[0] == seed
    )  # the same commit, the same seed
    assert campaign_seed({"CI": "true"}, lambda: SHA) == (seed, source)  # CI without GITHUB_SHA asks git
    other, _ = campaign_seed({"CI": "true", "GITHUB_SHA": "0" * 40}, _no_head)
    assert other != seed and 1 <= other < 2**31


def test_outside_ci_each_run_explores_a_new_campaign() -> None:
    seeds = {campaign_seed({"CI": "false"}, _no_head) for _ in range(5)}
    assert all(source == "random" for _, source in seeds)
    assert len({seed for seed, _ in seeds}) > 1


def test_this_run_has_a_usable_seed() -> None:
    assert 1 <= SEED < 2**31
