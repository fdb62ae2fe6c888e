# queuelog: `make run` serves a development instance on SQLite, `make test` runs every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# Where `make run` serves: `make run PORT=5733` for another port.
HOST ?= 127.0.0.1
PORT ?= 5000

.PHONY: install run serve test bench lint fmt

$(STAMP): pyproject.toml client/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/pip install --quiet -e ./client
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/flask --app app setup --url http://$(HOST):$(PORT)
	$(BIN)/flask --app app run --host $(HOST) --port $(PORT)

# Production: migrate, then granian (serve.py: settings and why) on QUEUELOG_BIND.
# Plain gunicorn still works: gunicorn -c gunicorn.conf.py wsgi:app.
serve: install
	@test -n "$$FLASK_SECRET_KEY" || { echo "make serve needs FLASK_SECRET_KEY (32+ characters), e.g." \
		"export FLASK_SECRET_KEY=\$$(python3 -c 'import secrets; print(secrets.token_urlsafe(48))')" >&2; exit 2; }
	$(BIN)/flask --app app db upgrade
	$(BIN)/python serve.py

test: install
	$(BIN)/python -m pytest -n 2 --durations=15

bench: install
	$(BIN)/python -m bench $(SECTION)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

fmt: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .
