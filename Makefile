# Top-level entry points.  A new user needs exactly two commands:
#   make demo   set everything up and predict an example training script's step on an H100
#   make test   set everything up and run every check (what CI runs)
# make test-quick runs the unit tests alone, in seconds (CONTRIBUTING.md).
# Set-up steps leave stamp files in .venv, so repeating them is cheap.

PYTHON ?= python3.11
VENV := .venv
VPY := $(CURDIR)/$(VENV)/bin/python
LIB := emulation-image/build/libmaya.so
DEMO_ARGS ?= --steps 4

.PHONY: all setup venv lib demo test test-quick lint typecheck ctest pytest clean

all: setup

setup: $(VENV)/.installed lib

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --upgrade pip
	touch $@

# torch==2.11.0 (with its nvidia-* wheels, whose headers the interposer builds
# against) comes from PyPI through the project's dependencies.
$(VENV)/.installed: $(VENV)/.created pyproject.toml
	$(VPY) -m pip install -e '.[dev]'
	touch $@

# The interposer's own Makefile is incremental.
lib: $(VENV)/.installed
	$(MAKE) -C emulation-image PYTHON=$(VPY)

demo: setup
	$(VENV)/bin/maya predict --gpu H100-SXM-80GB --out out/demo --timeline out/demo/timeline.json -- $(VPY) examples/gpt.py $(DEMO_ARGS)

test: setup lint typecheck ctest pytest

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check maya predictor operator tests benchmarks

# mypy cannot follow the package-dir mapping (maya.predictor -> predictor/),
# so it checks a tree of links that has the installed layout.
typecheck: $(VENV)/.installed
	rm -rf build/typecheck && mkdir -p build/typecheck
	cp -rs $(CURDIR)/maya build/typecheck/maya
	cp -rs $(CURDIR)/predictor build/typecheck/maya/predictor
	cp -rs $(CURDIR)/operator build/typecheck/maya/operator
	cd build/typecheck && $(VPY) -m mypy --config-file $(CURDIR)/pyproject.toml --cache-dir $(CURDIR)/.mypy_cache

ctest: lib
	$(MAKE) -C emulation-image test PYTHON=$(VPY)

pytest: lib
	$(VPY) -m pytest -q

# Neither emulations nor slow tests (pyproject.toml's markers): the development loop.
test-quick: $(VENV)/.installed
	$(VPY) -m pytest -q -m "not emulation and not slow"

clean:
	$(MAKE) -C emulation-image clean PYTHON=$(VPY) || true
	rm -rf build out
