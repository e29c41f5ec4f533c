# npa-pulumi — every target sets up what it needs (idempotently) before running.
SHELL := /bin/bash
PY := .venv/bin/python
export GOTOOLCHAIN := local
export PATH := $(CURDIR)/.tools/bin:$(PATH)

.PHONY: help tools venv test test-unit test-integration lint fmt demo demo-destroy bench bench-quick chaos chaos-quick clean

help:
	@echo "make demo        deploy the example fleet to the embedded local cloud (sets everything up)"
	@echo "make test        run all tests (sets everything up)"
	@echo "make lint        ruff + mypy"
	@echo "make tools       only provide the toolchain (.venv, pulumi, terraform/tofu)"

tools:
	@python3 tools/toolchain.py ensure all

venv:
	@python3 tools/toolchain.py ensure venv

test: tools
	@$(PY) -m pytest tests -q $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure" >&2; exit 1; fi; exit $$rc

test-unit: venv
	@$(PY) -m pytest tests/unit -q $(PYTEST_ARGS)

test-integration: tools
	@$(PY) -m pytest tests/integration -q $(PYTEST_ARGS)

lint: venv
	@$(PY) -m ruff check npa_pulumi components policies tests tools
	@$(PY) -m ruff format --check npa_pulumi components policies tests tools
	@$(PY) -m mypy

fmt: venv
	@$(PY) -m ruff format npa_pulumi components policies tests tools
	@$(PY) -m ruff check --fix npa_pulumi components policies tests tools

demo: tools
	@bash examples/demo.sh

clean:
	rm -rf .venv .tools build dist *.egg-info benchmarks/out
