# Two commands for a fresh machine: `make demo` and `make test`.
# Both create .venv and install what they need (torch pinned by constraints.txt).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
# One stamp per set of extras: the demo installs only what it needs, the tests the development set.
STAMP_VISION := $(VENV)/.installed-vision
STAMP_DEV    := $(VENV)/.installed-dev

.PHONY: demo test docs bench install clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(STAMP_VISION): pyproject.toml constraints.txt | $(VENV)/bin/python
	$(PIP) install --quiet -c constraints.txt -e '.[vision]'
	touch $@

$(STAMP_DEV): pyproject.toml constraints.txt | $(VENV)/bin/python
	$(PIP) install --quiet -c constraints.txt -e '.[dev]'
	touch $@

install: $(STAMP_DEV)

demo: $(STAMP_VISION)
	$(BIN)/scarce vision --preset quick --run-dir runs/vision-quick

# The suite runs on every core (pytest-xdist), one BLAS/torch thread per worker: the tests are
# small, and a worker's threads would otherwise compete with the other workers for the cores.
# Bytecode is written even where the environment sets PYTHONDONTWRITEBYTECODE: the workers, the
# process pools and the CLI subprocesses the tests start would otherwise each compile scarce and
# rewrite the test modules anew (__pycache__ is ignored by git).
test: $(STAMP_DEV)
	PYTHONDONTWRITEBYTECODE= OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n auto

# The documentation site, built strictly: a broken reference, a page missing from the navigation or
# a docstring the API reference cannot parse fails the build. Output in site/.
docs: $(STAMP_DEV)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The competitors live in their own venv: UQpy 4.2.1 pins numpy<2, scikit-learn 1.4 and
# torch 2.2, which cannot share .venv with torch 2.13 (about 5.5 GB; not needed for tests).
BENCH_VENV := .venv-bench
$(BENCH_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -e '.[bench]'
	touch $@

bench: $(BENCH_VENV)/.installed
	$(BENCH_VENV)/bin/python benchmarks/reliability.py

clean:
	rm -rf $(VENV) $(BENCH_VENV) build *.egg-info src/*.egg-info .pytest_cache
