# Two entry points for a fresh machine with Python 3.11 and pip:
#   make run   - set up a local virtual environment and start the daemon on ./data
#   make test  - set up the environment (with test extras), then ruff, mypy, the layer contracts and the test suite
#                (without the slow crash loops: make test-slow runs those; CI runs both)
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
DATA_DIR ?= ./data
# The default run leaves out the suites marked slow (crash loops of many rounds); `make test-slow`
# runs just those, and CI runs both.
PYTEST_ARGS ?= -m "not slow"

.PHONY: run test test-slow lint typecheck layers bench clean venv jsdeps

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH (set PYTHON=...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

venv: $(VENV)/.installed

run: venv
	$(BIN)/chunkstore serve --data-dir $(DATA_DIR) --demo

lint: venv
	$(BIN)/ruff check .

# Strict typing of every package (settings in pyproject.toml).
typecheck: venv
	$(BIN)/mypy

# The layering: api > chunkstore.testing > sampler > chunkstore.transfer > chunkstore.reserve
# > chunkstore.store > chunkstore.swarm, nothing importing upward (contracts in pyproject.toml).
layers: venv
	$(BIN)/lint-imports

# The bee-js compatibility test drives the daemon with the real JavaScript
# client; it needs node and npm (skipped with a reason when node is absent).
jsdeps:
	@if command -v npm >/dev/null 2>&1; then npm ci --prefix tests/js --no-audit --no-fund --loglevel=error; \
	else echo "node/npm not found: the bee-js test will be skipped"; fi

test: lint typecheck layers jsdeps
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-slow: venv jsdeps
	$(BIN)/python -m pytest -m slow

bench: venv
	$(BIN)/python bench/bench_bmt.py

clean:
	rm -rf $(VENV) build *.egg-info
