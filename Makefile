# The README's two commands: `make demo` and `make test`.
VENV ?= .venv
PYTEST_ARGS ?=
# pytest-xdist workers, each with its own session Ray and warm engines; whole files go to each, the
# longest first (tests/file_order.py).  WORKERS=0 runs the suite in one process.
WORKERS ?= 2
XDIST = $(if $(filter 0,$(WORKERS)),,-n $(WORKERS) --dist loadfile --no-loadscope-reorder)

.PHONY: setup test test-fast demo bench lint format

setup:
	bash .ci/setup

test: setup
	VLLM_ENABLE_V1_MULTIPROCESSING=0 $(VENV)/bin/python -m pytest -q $(XDIST) --durations=30 $(PYTEST_ARGS)

test-fast: setup
	VLLM_ENABLE_V1_MULTIPROCESSING=0 $(VENV)/bin/python -m pytest -q $(XDIST) -m "not slow" $(PYTEST_ARGS)

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
