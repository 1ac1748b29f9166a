# Two commands set everything up on first use: `make run` and `make test`. `make lab` opens
# the notebooks. The virtual environment lives in .venv/ (ignored by git). Each target installs
# what it needs: the package for `run`, its extras (pyproject.toml) for the others.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The CPU build of torch; on a GPU machine pass e.g. TORCH_SPEC=torch to get a CUDA build.
TORCH_SPEC ?= torch==2.13.0
READY := $(VENV)/.specnb-ready
# One stamp per extra of pyproject.toml: `test` (which includes `notebooks` and `instructor`),
# `notebooks` (JupyterLab, ipywidgets), `instructor` (nbformat, nbclient for the assignments).
EXTRA := $(VENV)/.specnb-extra-
# Options for JupyterLab, e.g. as root in a container: make lab LAB_ARGS="--allow-root --ip 0.0.0.0"
LAB_ARGS ?=
# The oldest transformers we declare (pyproject: >=5.0); the cache and loop tests run on it too.
OLDEST_TRANSFORMERS := 5.0.0
OLDEST := $(VENV)/transformers-$(OLDEST_TRANSFORMERS)

.PHONY: run test test-fast lab setup clean

# Everything: the package with all its extras, and the embedded model.
setup: $(READY) $(EXTRA)test

$(READY): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -c constraints.txt -e .
	$(PY) -m specnb --prepare
	touch $(READY)

$(EXTRA)%: $(READY)
	$(PY) -m pip install --quiet -c constraints.txt -e ".[$*]"
	touch $@ $(if $(filter test,$*),$(EXTRA)notebooks $(EXTRA)instructor)

run: $(READY)
	$(PY) -m specnb

test: $(EXTRA)test $(OLDEST)
	$(PY) -m pytest --durations=15
	PYTHONPATH=$(OLDEST) $(PY) -m pytest -q -o addopts="" -p no:cacheprovider \
		tests/test_kv.py tests/test_methods_greedy.py tests/test_batch_kv.py \
		tests/test_feature_head.py

# The quick tier: tiny in-memory models only. nbval is switched off (so no notebook is even
# collected) and with it the nbval options of pyproject's addopts.
test-fast: $(EXTRA)test
	$(PY) -m pytest -p no:nbval -o addopts="-ra" \
		-m "not embedded and not notebooks and not slow and not browser" tests

$(OLDEST): $(READY)
	$(PY) -m pip install --quiet --target $(OLDEST) transformers==$(OLDEST_TRANSFORMERS)

lab: $(EXTRA)notebooks
	$(VENV)/bin/jupyter lab $(LAB_ARGS) notebooks/

clean:
	rm -rf $(VENV)

# Student versions of assignments/source (see README, "For instructors").
.PHONY: assignments
assignments: $(EXTRA)instructor
	$(PY) -m specnb.course.assignments release --out assignments/release

# The GPU run as one command (scripts/gpu_transfer.md says how the weights get there). On the
# GPU machine, without .venv: `make gpu-check PY=python3`. `make gpu-check DEVICE=cpu
# BUDGET=small` is its quick dry run on a CPU (results in build/gpu-check/).
DEVICE ?= cuda
BUDGET ?= full
.PHONY: gpu-check
gpu-check: $(if $(filter $(VENV)/bin/python,$(PY)),$(EXTRA)test)
	$(PY) scripts/gpu_check.py --device $(DEVICE) --budget $(BUDGET)
