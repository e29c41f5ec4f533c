# npa-pulumi — every target sets up what it needs (idempotently) before running.
SHELL := /bin/bash
PY := .venv/bin/python
export GOTOOLCHAIN := local
export PATH := $(CURDIR)/.tools/bin:$(PATH)

.PHONY: help tools browser venv test test-long test-unit test-integration lint fmt demo demo-destroy bench bench-quick chaos chaos-quick clean

help:
	@echo "make demo        deploy the example fleet to the embedded local cloud (sets everything up)"
	@echo "make test        lint and the tests within the test budget (sets everything up)"
	@echo "make test-long   the long journeys make test leaves out (@pytest.mark.long)"
	@echo "make test-unit   the unit tests only, on two workers: the inner loop (about a minute)"
	@echo "make lint        ruff, the layering contract, mypy (part of make test)"
	@echo "make tools       only provide the toolchain (.venv, pulumi, terraform/tofu)"
	@echo "make chaos-quick the fault campaign, quick (part of make test); make chaos: the long one"
	@echo "make bench-quick benchmarks in a few minutes (table + benchmarks/out/report.json); make bench: full"

tools:
	@python3 tools/toolchain.py ensure all

venv:
	@python3 tools/toolchain.py ensure venv

# Headless Chromium for the report page's browser test: Debian's package, installed as root (CI).
browser:
	@python3 tools/toolchain.py ensure chromium

# Lint first: a ruff finding, a mypy error or an import against the layers (tools/check_layers.py) fails
# `make test` before any engine starts.
# Two pytest workers (pytest-xdist; a test file stays on one worker): a test drives about one core, mostly
# in the engine, terraform and the API servers it starts. PYTEST_WORKERS=0 runs them in this process.
# Modules are handed out longest first (tests/conftest.py orders them), so no long one starts last. The ten
# slowest tests and the total are printed at the end: what to look at when the budget (README) is passed.
PYTEST_WORKERS ?= 2
PYTEST_PARALLEL := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder)

# The long journeys (`@pytest.mark.long`) are left to `make test-long`, so that `make test` keeps its budget
# (README, "Test budget"); each has a faster test of the same path in `make test`.
test: tools browser lint
	@$(PY) -m pytest tests -q --ignore=tests/chaos -m "not long" --durations=10 $(PYTEST_PARALLEL) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure" >&2; exit 1; fi; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi
	@$(MAKE) --no-print-directory chaos-quick

test-long: tools browser
	@$(PY) -m pytest tests -q --ignore=tests/chaos -m long $(PYTEST_PARALLEL) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure" >&2; exit 1; fi; exit $$rc

# The inner loop: no toolchain, no engine, the unit tests spread test by test over the workers.
test-unit: venv
	@$(PY) -m pytest tests/unit -q $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist load) $(PYTEST_ARGS)

test-integration: tools
	@$(PY) -m pytest tests/integration -q $(PYTEST_ARGS)

LINT_PATHS := npa_pulumi components policies tests tools benchmarks

# mypy runs three times (see [tool.mypy] in pyproject.toml): the package with components/ and policies/,
# tools, benchmarks and the unit tests; then the integration and chaos tests, whose helpers import by bare
# name from their own directory.
lint: venv
	@$(PY) -m ruff check $(LINT_PATHS)
	@$(PY) -m ruff format --check $(LINT_PATHS)
	@$(PY) tools/check_layers.py
	@$(PY) -m mypy
	@MYPYPATH=tests/integration $(PY) -m mypy tests/integration
	@MYPYPATH=tests/chaos $(PY) -m mypy tests/chaos

fmt: venv
	@$(PY) -m ruff format $(LINT_PATHS)
	@$(PY) -m ruff check --fix $(LINT_PATHS)

demo: tools
	@bash examples/demo.sh

# The fault campaign (tests/chaos): fuzzed specs, SIGKILLed runs, injected cloud faults, concurrent runs,
# secrets. chaos-quick is part of `make test`; NPA_CHAOS_SEED=N replays a campaign, CHAOS_ARGS narrows it.
# Its tests are independent (each its own home, cloud and processes), so they are spread one by one over
# the same workers as the tests (the campaign's seed is shared: tests/chaos/conftest.py).
CHAOS_PARALLEL := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist load)
chaos-quick: tools
	@NPA_CHAOS=quick $(PY) -m pytest tests/chaos -q --durations=10 $(CHAOS_PARALLEL) $(CHAOS_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "chaos: pytest collected no tests: that is a failure" >&2; exit 1; fi; exit $$rc

chaos: tools
	@NPA_CHAOS=long $(PY) -m pytest tests/chaos -q --durations=10 $(CHAOS_PARALLEL) $(CHAOS_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "chaos: pytest collected no tests: that is a failure" >&2; exit 1; fi; exit $$rc

# Benchmarks (benchmarks/): a markdown table on stdout, the full report in benchmarks/out/report.json.
bench-quick: tools
	@$(PY) -m benchmarks --quick $(BENCH_ARGS)

bench: tools
	@$(PY) -m benchmarks $(BENCH_ARGS)

clean:
	rm -rf .venv .tools build dist *.egg-info benchmarks/out
