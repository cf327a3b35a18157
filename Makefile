# The README's two commands: `make demo` and `make test`.
VENV ?= .venv
PYTEST_ARGS ?=

.PHONY: setup test test-fast demo bench lint format

setup:
	bash .ci/setup

test: setup
	VLLM_ENABLE_V1_MULTIPROCESSING=0 $(VENV)/bin/python -m pytest -q --durations=30 $(PYTEST_ARGS)

test-fast: setup
	$(VENV)/bin/python -m pytest -q -m "not slow" $(PYTEST_ARGS)

demo: setup
	$(VENV)/bin/rldata demo

LINTED = rldata schemas jobs trainer tests benchmarks sample_data

lint: setup
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/ruff check $(LINTED)
	VENV=$(VENV) .ci/lint-imports

format:
	$(VENV)/bin/ruff format $(LINTED)
	$(VENV)/bin/ruff check --fix $(LINTED)
