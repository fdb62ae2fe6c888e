# queuelog: `make run` serves a development instance on SQLite, `make test` runs every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# One venv; each target installs what it needs into it once (a stamp per set): `make run` the app
# and the client only, `make test`, `make lint` and `make bench` their tools on top (the extras of
# the same names in pyproject.toml).
STAMP := $(VENV)/.installed
# Where `make run` serves: `make run PORT=5733` for another port.
HOST ?= 127.0.0.1
PORT ?= 5000

.PHONY: install run serve test bench lint fmt

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP)-run: pyproject.toml setup.py client/pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e . -e ./client
	touch $@

$(STAMP)-test $(STAMP)-lint $(STAMP)-bench: $(STAMP)-%: pyproject.toml $(STAMP)-run
	$(BIN)/pip install --quiet -e '.[$*]'
	touch $@

# Everything, for working on queuelog.
install: $(STAMP)-test $(STAMP)-lint $(STAMP)-bench

run: $(STAMP)-run
	$(BIN)/flask --app app setup --url http://$(HOST):$(PORT)
	$(BIN)/flask --app app run --host $(HOST) --port $(PORT)

# Production: migrate, then granian (serve.py: settings and why) on QUEUELOG_BIND.
# Plain gunicorn still works: gunicorn -c gunicorn.conf.py wsgi:app.
serve: $(STAMP)-run
	@test -n "$$FLASK_SECRET_KEY" || { echo "make serve needs FLASK_SECRET_KEY (32+ characters), e.g." \
		"export FLASK_SECRET_KEY=\$$(python3 -c 'import secrets; print(secrets.token_urlsafe(48))')" >&2; exit 2; }
	$(BIN)/flask --app app db upgrade
	$(BIN)/python serve.py

# The project's code compiled once: where the environment sets PYTHONDONTWRITEBYTECODE, every
# server, worker and command a test starts would otherwise compile it again (about 0.5 s each).
test: $(STAMP)-test
	$(BIN)/python -m compileall -q app client/queuelog_client devservers bench >/dev/null
	$(BIN)/python -m pytest -n 4 --dist worksteal --durations=15

bench: $(STAMP)-bench
	$(BIN)/python -m bench $(SECTION)

lint: $(STAMP)-lint
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

fmt: $(STAMP)-lint
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .
