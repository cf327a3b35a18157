# The README's two commands: `make demo` and `make test`.
VENV ?= .venv
PYTEST_ARGS ?=

.PHONY: setup test test-fast demo bench lint

setup:
	bash .ci/setup

test: setup
	VLLM_ENABLE_V1_MULTIPROCESSING=0 $(VENV)/bin/python -m pytest -q $(PYTEST_ARGS)

test-fast: setup
	$(VENV)/bin/python -m pytest -q -m "not slow" $(PYTEST_ARGS)

demo: setup
	$(VENV)/bin/rldata demo

lint:
	$(VENV)/bin/ruff check rldata schemas jobs trainer tests benchmarks sample_data
