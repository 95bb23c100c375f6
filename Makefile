# Two commands for a fresh machine: `make demo` and `make test`.
# Both create .venv and install what they need (torch pinned by constraints.txt).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
STAMP  := $(VENV)/.installed

.PHONY: demo test bench install clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/scarce estimate --problem linear --dim 100 --pf 1e-6 --n-samples 2000 --seed 0
	$(BIN)/scarce estimate --problem two_regions --dim 10 --pf 1e-5 --n-samples 2000 --seed 0

test: $(STAMP)
	$(BIN)/python -m pytest -q

# Needs the optional `bench` extra (OpenTURNS, UQpy); prints the tables of the README.
bench: $(STAMP)
	$(PIP) install --quiet -c constraints.txt -e '.[dev,bench]'
	$(BIN)/python benchmarks/reliability.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache
