# Two commands set everything up on first use: `make run` and `make test`. `make lab` opens
# the notebooks. The virtual environment lives in .venv/ (ignored by git). Each target installs
# what it needs: the package for `run`, its extras (pyproject.toml) for the others.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The CPU build of torch; on a GPU machine pass e.g. TORCH_SPEC=torch to get a CUDA build.
TORCH_SPEC ?= torch==2.13.0
READY := $(VENV)/.specnb-ready
# The embedded model, fetched and dequantized once (`python -m specnb --prepare`).
PREPARED := $(VENV)/.specnb-prepared
# One stamp per extra of pyproject.toml: `test` (which includes the three others), `notebooks`
# (JupyterLab, ipywidgets), `instructor` (nbformat, nbclient, nbgrader for the assignments),
# `book` (Sphinx, MyST-NB for `make book`).
EXTRA := $(VENV)/.specnb-extra-
# Options for JupyterLab, e.g. as root in a container: make lab LAB_ARGS="--allow-root --ip 0.0.0.0"
LAB_ARGS ?=
# The oldest transformers we declare (pyproject: >=5.0); the cache and loop tests run on it too.
OLDEST_TRANSFORMERS := 5.0.0
OLDEST := $(VENV)/transformers-$(OLDEST_TRANSFORMERS)
# speculators, whose Eagle3 model class checks `specnb.export` (tests/test_export.py): its pins
# (transformers <= 5.19, torchaudio, datasets) clash with ours, so it goes into its own folder
# without its dependencies, beside loguru; the three it imports only for training are empty
# stand-ins there (tests/speculators_logits.py).
SPECULATORS_VERSION := 0.9.0
SPECULATORS := $(VENV)/speculators-$(SPECULATORS_VERSION)

.PHONY: run test test-fast test-portability lab book setup clean

# Everything: the package with all its extras, the embedded model, the oldest transformers
# that `make test` also runs the cache and loop tests on, and speculators for the export's
# checks. Once the package is in, the rest are independent: `make -j3 setup` (as .ci/run does)
# fetches them side by side.
setup: $(PREPARED) $(EXTRA)test $(OLDEST) $(SPECULATORS)

# pip byte-compiles every module it installs (torch and the extras: some 12 000 files), of which
# a run imports a few thousand; Python compiles those at their first import and keeps them. Where
# the environment stops Python from writing bytecode, pip compiles as usual, or every process
# would compile them again; so does `make setup NO_COMPILE=`, for an environment others will use
# read-only (a course server).
NO_COMPILE := $(if $(PYTHONDONTWRITEBYTECODE),,--no-compile)
PIP_INSTALL := $(PY) -m pip install --quiet $(NO_COMPILE)

$(READY): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PIP_INSTALL) "$(TORCH_SPEC)" -c constraints.txt -e .
	touch $(READY)

# Run from the repository root, `-m specnb` imports the source folder itself: an extras install
# beside it (make -j), which re-installs the editable package, cannot pull it from under it.
$(PREPARED): $(READY)
	$(PY) -m specnb --prepare
	touch $(PREPARED)

$(EXTRA)%: $(READY)
	$(PIP_INSTALL) -c constraints.txt -e ".[$*]"
	touch $@ $(if $(filter test,$*),$(EXTRA)notebooks $(EXTRA)instructor $(EXTRA)book)

run: $(PREPARED)
	$(PY) -m specnb

# Tests run in parallel (pytest-xdist): one worker per core, each test file or notebook whole on
# one worker (nbval runs a notebook's cells in order, in one kernel), one torch thread per worker
# so that they do not fight over the cores (TESTING.md); longest files first (conftest.py).
# `make test TEST_WORKERS=0` runs it in one process.
TEST_WORKERS ?= auto
PARALLEL := OMP_NUM_THREADS=1 $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# Each worker runs one torch thread: `--calibrate` first settles this CPU's choices for one
# thread while nothing else runs (the workers, busy side by side, never would: specnb/__main__.py).
# The cache and loop tests also run on the oldest transformers, as one test of the same run
# (tests/test_oldest_transformers.py).
test: $(PREPARED) $(EXTRA)test $(OLDEST) $(SPECULATORS)
	OMP_NUM_THREADS=1 $(PY) -m specnb --calibrate
	SPECNB_OLDEST_TRANSFORMERS=$(OLDEST) SPECNB_SPECULATORS=$(SPECULATORS) $(PARALLEL) --durations=15

# The quick tier: tiny in-memory models only. nbval is switched off (so no notebook is even
# collected) and with it the nbval options of pyproject's addopts.
test-fast: $(EXTRA)test
	$(PARALLEL) -p no:nbval -o addopts="-ra" \
		-m "not embedded and not notebooks and not slow and not browser" tests

# The same checked notebook outputs and exactness tests with the kernels another CPU would run
# (TESTING.md, "Keeping notebook outputs portable"). PyTorch's ATEN_CPU_CAPABILITY picks its own
# vector kernels (softmax, exp, reductions), MKL_ENABLE_INSTRUCTIONS the matrix products',
# ONEDNN_MAX_CPU_ISA oneDNN's; each setting changes the model's logits in the last bits, as an
# AVX2 laptop or an older CPU does. The exactness tests also run natively (the notebooks' native
# run is `make test`'s), and the χ² p-values closest to their level are listed at the end.
# Run it before committing re-executed notebooks.
PORTABILITY_SETTINGS := \
	"ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2" \
	"ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41"
EXACTNESS_TESTS := tests/test_speculative_exact.py tests/test_verify.py tests/test_sampler.py \
	tests/test_batched.py tests/test_methods_greedy.py tests/test_broken_samplers.py \
	tests/test_relaxed_and_adaptive.py tests/test_embedded.py tests/test_stats.py
test-portability: $(EXTRA)test
	@mkdir -p build; rm -f build/pvalues-*.jsonl; failed=""; n=0; \
	for setting in "" $(PORTABILITY_SETTINGS); do \
		n=$$((n + 1)); echo "== setting $$n: $${setting:-native}"; \
		case "$$setting" in "") nb="";; *) nb=notebooks;; esac; \
		env $$setting SPECNB_PVALUE_LOG=build/pvalues-$$n.jsonl $(PY) -m pytest -q \
			-p no:cacheprovider $$nb $(EXACTNESS_TESTS) || failed="$$failed $$n"; \
	done; \
	$(PY) scripts/pvalue_margins.py build/pvalues-*.jsonl; \
	if [ -n "$$failed" ]; then echo "test-portability failed under setting(s):$$failed"; exit 1; fi

$(OLDEST): $(READY)
	$(PIP_INSTALL) --target $(OLDEST) transformers==$(OLDEST_TRANSFORMERS)

$(SPECULATORS): $(READY)
	$(PIP_INSTALL) --no-deps --target $(SPECULATORS) \
		speculators==$(SPECULATORS_VERSION) loguru==0.7.3

# The course as a static HTML book from the notebooks' committed outputs (nothing is executed):
# open book/_build/html/index.html, or publish that folder (assignments/README.md).
book: $(EXTRA)book
	$(PY) -m specnb.course.book

lab: $(EXTRA)notebooks
	$(VENV)/bin/jupyter lab $(LAB_ARGS) notebooks/

clean:
	rm -rf $(VENV)

# Every notebook re-executed in place on this machine, in order, with one torch thread as the
# tests run them: the committed outputs come from one machine (each notebook's first cell prints
# it). About 15 minutes on a 2-core CPU; a notebook over its two minutes fails the command.
.PHONY: notebooks
notebooks: $(EXTRA)test
	OMP_NUM_THREADS=1 $(PY) -m specnb.course.execute

# Student versions of assignments/source (see assignments/README.md).
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
