# Two commands set everything up on a fresh machine with Python 3.11 and pip:
#   make demo   - venv, install, ingest data/sample/ through the Prefect flow, print the summary
#   make test   - venv, install, the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_LAKE ?= data/lake

.PHONY: demo test lint bench clean install

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade "pip>=24,<27"
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[dev,notebooks,dask]"
	touch $(STAMP)

demo: $(STAMP)
	PREFECT_HOME=$(CURDIR)/.prefect $(BIN)/ckptwatch demo --raw data/sample --lake $(DEMO_LAKE)

test: $(STAMP)
	PREFECT_HOME=$(CURDIR)/.prefect $(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests pipelines bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) .prefect data/lake .pytest_cache
