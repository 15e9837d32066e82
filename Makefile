# `make demo`: set up .venv and run the main job; `make test`: set up .venv and run the tests.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test test-slow lint

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -e '.[dev]'
	@sh scripts/ensure_libusb.sh $(PY)
	@touch $@

demo: setup
	$(VENV)/bin/rff-demo

test: setup
	$(PY) -m pytest

test-slow: setup
	$(PY) -m pytest -m slow

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
