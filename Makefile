# captcha_tasks: `make run` starts the product, `make test` proves it.
# Both bootstrap the virtualenv in $(VENV) on first use (and after pyproject.toml changes).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help venv run test lint types unit integration bench format sandbox clean

help:  ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)  ## Create the virtualenv and install the package with its dev tools

run: $(STAMP)  ## Redis (if none is reachable), the sandbox, a worker and Flower; Ctrl-C stops all
	$(BIN)/captcha-tasks dev

test: lint types unit integration  ## Lint, types and the whole test suite

lint: $(STAMP)  ## ruff
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: $(STAMP)  ## mypy (strict for the package)
	$(BIN)/mypy

unit: $(STAMP)  ## Unit tests (no processes but in-process servers)
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

integration: $(STAMP)  ## Tests with real redis-server, celery worker and sandbox processes
	$(BIN)/pytest tests/integration $(PYTEST_ARGS)

bench: $(STAMP)  ## Benchmarks: solve throughput vs the seeds' design; pages shared vs isolated
	$(BIN)/captcha-tasks bench solve
	$(BIN)/captcha-tasks bench pages

format: $(STAMP)  ## Reformat and fix what ruff can
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

sandbox: $(STAMP)  ## Only the solver sandbox, on port 8765
	$(BIN)/captcha-tasks sandbox --port 8765

clean:  ## Remove the virtualenv, caches and .run/
	rm -rf $(VENV) .run .mypy_cache .ruff_cache .pytest_cache .hypothesis *.egg-info
