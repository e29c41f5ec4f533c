# npa-pulumi — every target sets up what it needs (idempotently) before running.
# `make help` lists the targets: each rule's line ends with `## what it does` (a unit test checks).
SHELL := /bin/bash
PY := .venv/bin/python
export GOTOOLCHAIN := local
export PATH := $(CURDIR)/.tools/bin:$(PATH)
# The default recipe's source where GitHub is out of reach: the upstream library that ../shared holds
# beside this checkout (a dependency, never copied into the repository; docs/default-recipe.md).
UPSTREAM_MIRROR := $(abspath $(CURDIR)/../shared/upstream/nebius-solutions-library)
ifneq ($(wildcard $(UPSTREAM_MIRROR)/k8s-training/main.tf),)
export NPA_K8S_TRAINING_MIRROR ?= $(UPSTREAM_MIRROR)
endif

.PHONY: help check tools browser venv test test-long test-unit test-integration lint lint-fast types fmt demo bench bench-quick chaos chaos-quick clean

help: ## this list
	@awk -F ':.*## ' '/^[a-z][a-z-]*:.*## / { printf "make %-17s %s\n", $$1, $$2 }' Makefile

# The inner loop (docs/development.md): the checks that take seconds first (ruff, the layers), then the
# types and the unit tests side by side, each shown when it ends. It needs only the virtualenv: no
# toolchain build, no engine run. `make test` stays the whole gate.
check: lint-fast ## the inner loop (~1 min warm): ruff, the layers, then mypy beside the unit tests
	@$(MAKE) --no-print-directory -j2 --output-sync=target types test-unit

tools: ## provide the toolchain only (.venv, pulumi, terraform, Kubernetes, kwok, KubeRay, SeaweedFS)
	@python3 tools/toolchain.py ensure all

venv: ## provide the virtualenv only (.venv; enough for make check and make lint)
	@python3 tools/toolchain.py ensure venv

# Headless Chromium for the report page's browser test: Debian's package, installed as root (CI).
browser: ## provide headless Chromium for the report's browser test (apt-get, as root)
	@python3 tools/toolchain.py ensure chromium

# Lint first: a ruff finding, a mypy error or an import against the layers (tools/check_layers.py) fails
# `make test` before any engine starts.
# Two pytest workers (pytest-xdist; a test file stays on one worker): a test drives about one core, mostly
# in the engine, terraform and the API servers it starts. PYTEST_WORKERS=0 runs them in this process.
# Modules are handed out longest first (tests/conftest.py orders them), so no long one starts last. The ten
# slowest tests and the total are printed at the end: what to look at when the budget is passed
# (docs/development.md).
PYTEST_WORKERS ?= 2
PYTEST_PARALLEL := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder)

# The long journeys (`@pytest.mark.long`) are left to `make test-long`, so that `make test` keeps its budget
# (docs/development.md, "The test budget"); each has a faster test of the same path in `make test`.
test: tools browser lint ## the whole gate CI runs: lint, the tests within the budget, the quick fault campaign
	@$(PY) -m pytest tests -q --ignore=tests/chaos -m "not long" --durations=10 $(PYTEST_PARALLEL) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure" >&2; exit 1; fi; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi
	@$(MAKE) --no-print-directory chaos-quick

test-long: tools browser ## the long journeys make test leaves out (@pytest.mark.long)
	@$(PY) -m pytest tests -q --ignore=tests/chaos -m long $(PYTEST_PARALLEL) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure" >&2; exit 1; fi; exit $$rc

# The inner loop's tests: no toolchain, no engine, spread test by test over the workers. The few unit tests
# that drive the built toolchain (@pytest.mark.integration: the engine reports the pin, ...) run in
# `make test`.
test-unit: venv ## the unit tests that need no toolchain, on two workers (part of make check)
	@$(PY) -m pytest tests/unit -q -m "not integration" $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist load) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure" >&2; exit 1; fi; exit $$rc

test-integration: tools ## the integration tests alone (tests/integration), in one process
	@$(PY) -m pytest tests/integration -q $(PYTEST_ARGS)

LINT_PATHS := npa_pulumi components policies tests tools benchmarks

lint: lint-fast types ## ruff, the layering contract, strict mypy (the first step of make test)

lint-fast: venv ## ruff check, ruff format --check and the layering contract (seconds)
	@$(PY) -m ruff check $(LINT_PATHS)
	@$(PY) -m ruff format --check $(LINT_PATHS)
	@$(PY) tools/check_layers.py

# mypy runs three times (see [tool.mypy] in pyproject.toml): the package with components/ and policies/,
# tools, benchmarks and the unit tests; then the integration and chaos tests, whose helpers import by bare
# name from their own directory. Its cache (.mypy_cache) makes a warm run take seconds.
types: venv ## strict mypy over the package, tools, benchmarks and every test
	@$(PY) -m mypy
	@MYPYPATH=tests/integration $(PY) -m mypy tests/integration
	@MYPYPATH=tests/chaos $(PY) -m mypy tests/chaos

fmt: venv ## format and fix what ruff can (ruff format, ruff check --fix)
	@$(PY) -m ruff format $(LINT_PATHS)
	@$(PY) -m ruff check --fix $(LINT_PATHS)

demo: tools ## deploy the example fleet to the embedded local cloud (sets everything up)
	@bash examples/demo.sh

# The fault campaign (tests/chaos): fuzzed specs, SIGKILLed runs, injected cloud faults, concurrent runs,
# secrets. chaos-quick is part of `make test`; NPA_CHAOS_SEED=N replays a campaign, CHAOS_ARGS narrows it.
# Its tests are independent (each its own home, cloud and processes), so they are spread one by one over
# the same workers as the tests (the campaign's seed is shared: tests/chaos/conftest.py).
CHAOS_PARALLEL := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist load)
chaos-quick: tools ## the fault campaign, quick (part of make test)
	@NPA_CHAOS=quick $(PY) -m pytest tests/chaos -q --durations=10 $(CHAOS_PARALLEL) $(CHAOS_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "chaos: pytest collected no tests: that is a failure" >&2; exit 1; fi; exit $$rc

chaos: tools ## the fault campaign, long
	@NPA_CHAOS=long $(PY) -m pytest tests/chaos -q --durations=10 $(CHAOS_PARALLEL) $(CHAOS_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "chaos: pytest collected no tests: that is a failure" >&2; exit 1; fi; exit $$rc

# Benchmarks (benchmarks/): a markdown table on stdout, the full report in benchmarks/out/report.json.
bench-quick: tools ## benchmarks in a few minutes (a table, and benchmarks/out/report.json)
	@$(PY) -m benchmarks --quick $(BENCH_ARGS)

bench: tools ## the full benchmarks
	@$(PY) -m benchmarks $(BENCH_ARGS)

clean: ## remove .venv, .tools, build outputs and benchmarks/out
	rm -rf .venv .tools build dist *.egg-info benchmarks/out
