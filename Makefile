# Two promises of the README: `make demo` runs the main job, `make test` runs every test.
# Both set up the virtualenv at .venv/ first; nothing else needs to be installed by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test bench proto clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip==26.3
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/rocketstore demo

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m bench.store_bench
	$(BIN)/python -m bench.store2_bench

proto: $(STAMP)
	$(BIN)/python proto/generate.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
