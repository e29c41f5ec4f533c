"""Parsing HCL from many threads at once (the shared plugin host prepares several stacks' recipes
together): every thread gets what a parse on its own gets."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from upstream_library import upstream_library

from npa_pulumi.runtime import hcl


def _upstream_texts() -> list[str]:
    library = upstream_library()
    paths = sorted((library / "k8s-training").glob("*.tf")) + sorted((library / "modules").glob("*/*.tf"))
    return [path.read_text(encoding="utf-8") for path in paths if path.stat().st_size < 40_000]


def test_parses_from_many_threads_equal_parses_one_at_a_time() -> None:
    texts = _upstream_texts()
    assert len(texts) > 10
    alone = [hcl.loads(text) for text in texts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(3):
            together = list(pool.map(hcl.loads, texts))
            mismatched = [index for index, (a, b) in enumerate(zip(alone, together, strict=True)) if a != b]
            assert mismatched == [], f"{len(mismatched)} of {len(texts)} files parsed differently in threads"


def test_an_upstream_provider_block_reads_as_an_object() -> None:
    # The override check reads `provider "helm" { kubernetes = {...} }` as an object; the race made it a
    # `${...}` string ("is an expression, not a object").
    text = (upstream_library() / "k8s-training" / "provider.tf").read_text(encoding="utf-8")
    providers = hcl.loads(text)["provider"]
    helm = next(entry['"helm"'] for entry in providers if '"helm"' in entry)
    assert isinstance(helm["kubernetes"], dict)
