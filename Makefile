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

.PHONY: install demo test
