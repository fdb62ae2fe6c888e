# queuelog: `make run` serves a development instance on SQLite, `make test` runs every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install run test bench lint fmt

$(STAMP): pyproject.toml client/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/pip install --quiet -e ./client
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/flask --app app setup
	$(BIN)/flask --app app run --host 127.0.0.1 --port 5000

test: install
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python -m bench

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

fmt: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .
