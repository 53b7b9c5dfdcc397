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

.PHONY: demo test test-drills lint lock tools image host-packages test-packages clean

$(STAMP): pyproject.toml uv.lock
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(UV) sync --quiet --frozen --extra dev --extra torch
	touch $(STAMP)

## Re-resolve uv.lock after changing dependencies in pyproject.toml (then commit both).
lock: $(STAMP)
	$(UV) lock $(LOCK_ARGS)
	$(UV) sync --quiet --frozen --extra dev --extra torch
	touch $(STAMP)

# Upstream source archives (with SHA256SUMS) for the tool families whose module the Go module
# proxy refuses (multus, kube-router, jobset): `trainmaster tools build` falls back to them, after
# checking each archive's pinned sha256. Exported, so builds started by tests find them too.
SOURCES ?= $(wildcard ../shared/sources)
export TRAINMASTER_SOURCES ?= $(if $(SOURCES),$(abspath $(SOURCES)))

tools: $(STAMP)
	$(BIN)/trainmaster tools build

## The trainmaster image as an OCI archive (no Docker; cached by the digest of its inputs).
image: $(STAMP)
	$(BIN)/trainmaster image build

# Install Debian packages $(2) when one of the binaries $(1) is missing (sbin included in the
# search); needs apt-get and root, else says what $(3) needs. Shared by the two targets below.
define debian_packages
	@missing=0; for b in $(1); do \
	  PATH="$$PATH:/usr/sbin:/sbin" command -v $$b >/dev/null || missing=1; done; \
	if [ $$missing = 1 ]; then \
	  if ! command -v apt-get >/dev/null || [ "$$(id -u)" != 0 ]; then \
	    echo "$(3) need the Debian packages $(2): install them as root" >&2; \
	    exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2); \
	fi
endef

## Debian packages real nodes need (runc, iptables, busybox-static, and ipset for kube-router's
## NetworkPolicy controller), installed only if missing.
REAL_NODE_BINARIES := runc iptables busybox ipset
REAL_NODE_PACKAGES := runc iptables busybox-static ipset
host-packages:
	$(call debian_packages,$(REAL_NODE_BINARIES),$(REAL_NODE_PACKAGES),real nodes)

## Debian packages the browser tests of `trainmaster ui` drive (chromium + chromium-driver).
TEST_BINARIES := chromium chromedriver
TEST_PACKAGES := chromium chromium-driver
test-packages:
	$(call debian_packages,$(TEST_BINARIES),$(TEST_PACKAGES),the UI's browser tests)

## The main job: the committed Pulumi stack `demo` (stacks/dev placed on the real nodes),
## deployed by `trainmaster pulumi up` on a local cluster with 2 real nodes (trainmaster's
## controllers as pods, a real training job killed and resumed from its checkpoint). Needs root.
demo: $(STAMP) host-packages
	$(BIN)/trainmaster demo --stack demo

## Lint, type-check and the whole test suite (integration tests start their own cluster),
## less the long PyTorch fault drills on real nodes (`make test-drills`; one at a time: each
## cluster's nodes hold the torch image, about 9 GB a node). The 30 slowest tests are listed last.
## TEST_WORKERS pytest-xdist workers share the tests a file at a time; the real-node and image
## test files all go to one of them, one after the other (tests/conftest.py, its scheduler).
## Most tests wait on processes, so three workers fit two cores.
TEST_WORKERS ?= 3
test: $(STAMP) tools host-packages test-packages lint
	$(BIN)/python -m pytest -q --durations=30 -n $(TEST_WORKERS)

test-drills: $(STAMP) tools host-packages
	$(BIN)/python -m pytest -q -m drill

lint: $(STAMP)
	$(UV) lock --check
	$(BIN)/ruff check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV)
