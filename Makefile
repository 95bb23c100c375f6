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
	$(BIN)/scarce vision --preset quick --run-dir runs/vision-quick

test: $(STAMP)
	$(BIN)/python -m pytest -q

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
