# The two set-up commands of the README, and the checks CI runs.
# Everything lands in .venv (Python) and ~/.cache/trainmaster (Go-built binaries).

PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# uv installs .venv from uv.lock (every package pinned, with hashes). It is bootstrapped
# into the venv with pip at this exact version; update both together (README, Development).
UV_VERSION := 0.13.8
UV := $(BIN)/uv
# Use the Python that made .venv; never fetch an interpreter.
export UV_PYTHON_DOWNLOADS := never

.PHONY: demo test lint lock tools image clean

$(STAMP): pyproject.toml uv.lock
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(UV) sync --quiet --frozen --extra dev
	touch $(STAMP)

## Re-resolve uv.lock after changing dependencies in pyproject.toml (then commit both).
lock: $(STAMP)
	$(UV) lock $(LOCK_ARGS)
	$(UV) sync --quiet --frozen --extra dev
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
	$(UV) lock --check
	$(BIN)/ruff check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV)
