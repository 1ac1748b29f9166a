# Two commands set everything up on first use: `make run` and `make test`. `make lab` opens
# the notebooks. The virtual environment lives in .venv/ (ignored by git).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The CPU build of torch; on a GPU machine pass e.g. TORCH_SPEC=torch to get a CUDA build.
TORCH_SPEC ?= torch==2.13.0
READY := $(VENV)/.specnb-ready
# The oldest transformers we declare (pyproject: >=5.0); the cache and loop tests run on it too.
OLDEST_TRANSFORMERS := 5.0.0
OLDEST := $(VENV)/transformers-$(OLDEST_TRANSFORMERS)

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

test: $(READY) $(OLDEST)
	$(PY) -m pytest
	PYTHONPATH=$(OLDEST) $(PY) -m pytest -q -o addopts="" -p no:cacheprovider \
		tests/test_kv.py tests/test_methods_greedy.py tests/test_batch_kv.py \
		tests/test_batched.py

$(OLDEST): $(READY)
	$(PY) -m pip install --quiet --target $(OLDEST) transformers==$(OLDEST_TRANSFORMERS)

lab: $(READY)
	$(VENV)/bin/jupyter lab notebooks/

clean:
	rm -rf $(VENV)

# Student versions of assignments/source (see README, "For instructors").
.PHONY: assignments
assignments: $(READY)
	$(PY) -m specnb.assignments release --out assignments/release
