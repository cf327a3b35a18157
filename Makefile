# The README's two commands: `make demo` and `make test`.
VENV ?= .venv
PYTEST_ARGS ?=
# pytest-xdist workers (0: one process), each with its own session Ray and warm engines; whole files go
# to each, the longest first (tests/file_order.py).  On this 24 GB machine two workers' engines once
# ran Ray out of memory: each worker now closes idle warm engines before a test while the machine has
# less than FREE_GIB available (tests/ray_helpers.py; benchmarks/RESULTS.md, issue 40 §3).
WORKERS ?= 2
FAST_WORKERS ?= 2
xdist = $(if $(filter 0,$(1)),,-n $(1) --dist loadfile --no-loadscope-reorder)

.PHONY: setup test test-fast demo bench lint format

# `.ci/setup` runs once per .venv and again when what it installs changes (the install is editable:
# source edits need none); `make lint test` then sets up once.  `make setup` always runs it.
STAMP = $(VENV)/.rldata-setup

setup:
	VENV=$(VENV) bash .ci/setup
	touch $(STAMP)

$(STAMP): pyproject.toml .ci/setup
	VENV=$(VENV) bash .ci/setup
	touch $@

test: $(STAMP)
	VLLM_ENABLE_V1_MULTIPROCESSING=0 $(VENV)/bin/python -m pytest -q $(call xdist,$(WORKERS)) --durations=30 $(PYTEST_ARGS)

test-fast: $(STAMP)
	VLLM_ENABLE_V1_MULTIPROCESSING=0 $(VENV)/bin/python -m pytest -q $(call xdist,$(FAST_WORKERS)) -m "not slow" $(PYTEST_ARGS)

demo: $(STAMP)
	$(VENV)/bin/rldata demo

LINTED = rldata schemas jobs trainer tests benchmarks sample_data

lint: $(STAMP)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/ruff check $(LINTED)
	VENV=$(VENV) .ci/lint-imports

format:
	$(VENV)/bin/ruff format $(LINTED)
	$(VENV)/bin/ruff check --fix $(LINTED)
