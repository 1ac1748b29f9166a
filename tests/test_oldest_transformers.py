"""The cache and loop tests again, on the oldest transformers the package declares (5.0.0).

`make test` installs that release into its own folder (the Makefile's OLDEST) and names it in
SPECNB_OLDEST_TRANSFORMERS; this test runs the files below in a fresh interpreter with that
folder first on the path, as one item of the main run (its workers share the cores; a run of
its own after the main one would start them all again). Outside `make test` it is skipped.
"""

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OLDEST = "5.0.0"
FILES = ["tests/test_kv.py", "tests/test_methods_greedy.py", "tests/test_batch_kv.py",
         "tests/test_feature_head.py", "tests/test_dynamic_tree.py", "tests/test_attention.py",
         "tests/test_head_data.py"]


@pytest.mark.slow
def test_cache_and_loop_tests_pass_on_the_oldest_transformers():
    folder = os.environ.get("SPECNB_OLDEST_TRANSFORMERS")
    if not folder:
        pytest.skip("run by `make test`, which installs transformers "
                    f"{OLDEST} and names its folder in SPECNB_OLDEST_TRANSFORMERS")
    folder = Path(folder).resolve()
    assert (folder / "transformers").is_dir(), f"no transformers in {folder}: `make setup`"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(folder)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    # What the folder holds, read from its metadata (importing it would cost a process): first
    # on PYTHONPATH, it is what the run below imports.
    versions = [d.version for d in importlib.metadata.distributions(path=[str(folder)])
                if d.metadata["Name"].lower() == "transformers"]
    assert versions == [OLDEST], f"{folder} holds transformers {versions}, not {OLDEST}"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "-o", "addopts=", *FILES], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in done.stdout.splitlines()[-1]
