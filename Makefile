# Every target sets itself up: a fresh clone needs only Python 3.11+ (and Node 20 for the CDK CLI).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export AWS_DEFAULT_REGION ?= us-east-1
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: dev test lint format mypy unit demo clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

dev: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

mypy: $(STAMP)
	$(BIN)/mypy layers/shepherd/python/shepherd functions tools infra

unit: $(STAMP)
	$(BIN)/pytest

test: lint mypy unit

demo: $(STAMP)
	$(BIN)/python -m shepherd_cli.demo

clean:
	rm -rf $(VENV) cdk.out .pytest_cache .mypy_cache .ruff_cache
