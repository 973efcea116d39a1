# Two entry points for a fresh machine: `make demo` (prme's main job) and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CI and `make test` install the locked versions; `make test-latest` the newest that
# pyproject.toml allows, so drift is seen rather than suffered; `make lock` refreshes the lock.
CONSTRAINTS ?= constraints.txt

$(BIN)/prme: pyproject.toml $(CONSTRAINTS)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c $(CONSTRAINTS) -e '.[dev]'
	touch $(BIN)/prme

install: $(BIN)/prme

demo: install
	$(BIN)/prme demo --path ./demo-pack

lint: install
	$(BIN)/ruff check src tests bench .ci
	$(BIN)/mypy src

# The whole suite on SQLite, then every test the storage backend reaches (marker `backends`,
# derived in tests/conftest.py) again on a PostgreSQL started in a new data directory.
pytest: install
	$(BIN)/pytest -q
	$(BIN)/pytest -q --backend postgres -m backends

# Build sdist + wheel, install the wheel alone into a new virtualenv, use it from elsewhere.
package-test: install
	.ci/wheel-smoke $(BIN)/python

test: lint pytest package-test

test-latest:
	rm -rf .venv-latest
	$(MAKE) test VENV=.venv-latest CONSTRAINTS=/dev/null

lock:
	rm -rf .venv-lock
	$(PY) -m venv .venv-lock
	.venv-lock/bin/pip install -q --upgrade pip
	.venv-lock/bin/pip install -q '.[dev]'
	{ echo "# Locked versions for CI and make test (Python 3.11, Linux x86_64); refresh: make lock"; \
	  .venv-lock/bin/pip freeze --exclude prme; } > constraints.txt
	rm -rf .venv-lock

.PHONY: install demo lint pytest package-test test test-latest lock
