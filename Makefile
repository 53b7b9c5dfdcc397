# The two set-up commands of the README, and the checks CI runs.
# Everything lands in .venv (Python) and ~/.cache/trainmaster (Go-built binaries).

PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint tools image clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

tools: $(STAMP)
	$(BIN)/trainmaster tools build

## The trainmaster image as an OCI archive (no Docker; cached by the digest of its inputs).
image: $(STAMP)
	$(BIN)/trainmaster image build

## The main job: a local cluster from the dev stack with the scheduler and operator on it.
demo: $(STAMP)
	$(BIN)/trainmaster demo --spec stacks/dev/cluster.yaml

## Lint, type-check and the whole test suite (integration tests start their own cluster).
test: $(STAMP) tools lint
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV)
