# Two commands set everything up on first use: `make run` and `make test`. `make lab` opens
# the notebooks. The virtual environment lives in .venv/ (ignored by git).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The CPU build of torch; on a GPU machine pass e.g. TORCH_SPEC=torch to get a CUDA build.
TORCH_SPEC ?= torch==2.13.0
READY := $(VENV)/.specnb-ready

.PHONY: run test lab setup clean

setup: $(READY)

$(READY): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -c constraints.txt -e .
	$(PY) -m specnb --prepare
	touch $(READY)

run: $(READY)
	$(PY) -m specnb

test: $(READY)
	$(PY) -m pytest

lab: $(READY)
	$(VENV)/bin/jupyter lab notebooks/

clean:
	rm -rf $(VENV)
