# Two commands a newcomer needs: `make run` (the daemon on params.py) and `make test`.
# Both create the virtualenv in .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ARGS ?=
PYTEST_ARGS ?=
# Test processes side by side (pytest-xdist). Most tests wait on a daemon subprocess or the loopback
# network, not the CPU, so more workers than cores pays; `make test WORKERS=0` runs in one process.
# loadscope: the tests sharing one module-scoped daemon run stay on one worker (tests/conftest.py).
# tests/suite.py runs two phases: the suite on the workers without the one_worker files (the listener
# attacks), then those alone in one process; its exit code is pytest's, its last line both phases'.
WORKERS ?= 4
# Tests that need PostgreSQL use this URL, and skip with the reason when it is unreachable.
export PARSER_TEST_PG_URL ?= postgresql://postgres@127.0.0.1:5432/test

.PHONY: run once test lint bench clean-venv

$(VENV)/.ready: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

run: $(VENV)/.ready
	$(BIN)/python run_daemon.py $(ARGS)

once: $(VENV)/.ready
	$(BIN)/python run_daemon.py --once $(ARGS)

test: $(VENV)/.ready
	$(BIN)/python -m tests.suite --workers $(WORKERS) $(PYTEST_ARGS)

# ruff, then mypy over parser/, linkgen/ and db/ ([tool.mypy] in pyproject.toml): CI fails on either.
lint: $(VENV)/.ready
	$(BIN)/ruff check . && $(BIN)/mypy

bench: $(VENV)/.ready
	$(BIN)/python -m bench.run_all $(ARGS)

clean-venv:
	rm -rf $(VENV)
