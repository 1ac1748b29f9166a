"""Bad flags and output paths end each command with an argparse message and exit code 2,
before any model is loaded or any work is done (issue #15, class 7).

The table: one row per bad command line, with the fragment of the message. Rows run `main`
in this process with every loader and worker replaced by a tripwire, which proves "before any
model or work"; one row per command also runs it as `__main__` (exit code 2 for real), all of
them in one subprocess, and `python -m specnb` once in a process of its own (each process costs
the few seconds of importing torch and transformers).
"""

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from specnb import __main__ as run
from specnb.bench import compare as bench
from specnb.bench import overhead
from specnb.course import assignments, execute
from specnb.training import head_data, head_ranks, train_draft, train_head

HERE = Path(__file__)  # an existing file: a bad output folder, and a path under it
FOLDER = HERE.parent  # an existing folder holding no notebooks and no saved model
UNDER_A_FILE = str(HERE / "x" / "out.json")
SUBMISSION = Path(assignments.SOURCE_DIR) / "03_ngram_lookup.ipynb"
MODULES = {"bench": bench, "train_draft": train_draft, "train_head": train_head,
           "head_data": head_data, "head_ranks": head_ranks, "overhead": overhead,
           "assignments": assignments, "run": run, "execute": execute}

ROWS = [
    # python -m specnb (make run)
    ("run", ["--gamma", "0"], "--gamma must be >= 1"),
    ("run", ["--repeats", "-1"], "--repeats must be >= 0"),
    # bench
    ("bench", ["--repeats", "0"], "--repeats must be >= 1"),
    ("bench", ["--warmup", "-1"], "--warmup must be >= 0"),
    ("bench", ["--max-new-tokens", "0"], "--max-new-tokens must be >= 1"),
    ("bench", ["--num-pred", "-1"], "--num-pred must be >= 0"),
    ("bench", ["--ngram-max", "0"], "--ngram-max must be >= 1"),
    ("bench", ["--block", "0"], "--block must be >= 1"),
    ("bench", ["--lookahead", "5,1,5"], "lookahead takes W,N,G"),
    ("bench", ["--lookahead", "5,3"], "lookahead takes W,N,G"),
    ("bench", ["--prompts", "-1"], "--prompts must be >= 0"),
    ("bench", ["--temperature", "-1"], "--temperature"),
    ("bench", ["--temperature", "nan"], "--temperature"),
    ("bench", ["--stop-below", "1.5"], "--stop-below must be a probability in [0, 1]"),
    # overhead
    ("overhead", ["--gammas", "0"], "--gammas must be >= 1"),
    ("overhead", ["--prompts", "0"], "--prompts must be >= 1"),
    ("overhead", ["--max-new-tokens", "0"], "--max-new-tokens must be >= 1"),
    ("overhead", ["--out", UNDER_A_FILE], "cannot write there"),
    ("bench", ["--temperature", "inf"], "--temperature"),
    ("bench", ["--gammas", "0", "2"], "--gammas takes integers >= 1"),
    ("bench", ["--gammas"], "expected at least one argument"),
    ("bench", ["--head-gammas", "-1"], "--head-gammas takes integers >= 0"),
    ("bench", ["--head-trees", "4,0"], "a tree is widths per depth"),
    ("bench", ["--head-trees", "4;2"], "a tree is widths per depth"),
    ("bench", ["--head-int8-trees", "0"], "a tree is widths per depth"),
    ("bench", ["--trim", "--head-gammas", "1"], "--trim trims the head's static trees"),
    ("bench", ["--head-int8-gammas", "0"], "--head-int8-gammas takes integers >= 1"),
    ("bench", ["--head-dynamic", "6,3"], "a dynamic tree is N,D,K"),
    ("bench", ["--head-dynamic", "a,b,c"], "a dynamic tree is N,D,K"),
    ("bench", ["--head-dynamic", "40,2,2"], "grows only 6"),
    ("bench", ["--mixed", "0"], "a tree is widths per depth"),
    ("bench", ["--latency-counts", "0"], "--latency-counts takes integers >= 1"),
    ("bench", ["--methods", "speculative"], "match no method"),
    ("bench", ["--methods", "ours specultive"], "match no method"),
    ("bench", ["--device", "foo"], "--device"),
    ("bench", ["--device", "cuda:99"], "cuda:99"),
    ("bench", ["--dtype", "float64"], "invalid choice"),
    ("bench", ["--group", "poems"], "invalid choice"),
    ("bench", ["--repeats", "2.5"], "invalid int value"),
    ("bench", ["--ids", "no-such-prompt"], "--ids"),
    ("bench", ["--out", UNDER_A_FILE], "cannot write there"),
    ("bench", ["--out", "/dev/null/x/bench.json"], "cannot write there"),
    ("bench", ["--out", str(FOLDER)], "is a folder"),
    ("bench", ["--no-such-flag"], "unrecognized arguments"),
    # train_draft
    ("train_draft", ["--epochs", "0"], "--epochs must be >= 1"),
    ("train_draft", ["--batch-size", "0"], "--batch-size must be >= 1"),
    ("train_draft", ["--limit", "0"], "--limit must be >= 1"),
    ("train_draft", ["--hidden", "0"], "--hidden must be >= 1"),
    ("train_draft", ["--layers", "0"], "--layers must be >= 1"),
    ("train_draft", ["--heads", "0"], "--heads must be >= 1"),
    ("train_draft", ["--hidden", "161"], "--heads (5) times an even head size"),
    ("train_draft", ["--hidden", "25"], "--heads (5) times an even head size"),
    ("train_draft", ["--max-new-tokens", "0"], "--max-new-tokens must be >= 1"),
    ("train_draft", ["--top-k", "0"], "--top-k must be >= 1"),
    ("train_draft", ["--samples", "-1"], "--samples must be >= 0"),
    ("train_draft", ["--lr", "0"], "--lr must be a finite number > 0"),
    ("train_draft", ["--lr", "inf"], "--lr must be a finite number > 0"),
    ("train_draft", ["--kd-weight", "-1"], "--kd-weight must be a finite number >= 0"),
    ("train_draft", ["--prompt-weight", "nan"], "--prompt-weight must be a finite number >= 0"),
    ("train_draft", ["--temperature", "0"], "--temperature must be a finite number > 0"),
    ("train_draft", ["--temperature", "nan"], "--temperature must be a finite number > 0"),
    ("train_draft", ["--epochs", "1.5"], "invalid int value"),
    ("train_draft", ["--evaluate", "/nonexistent/draft"], "no saved draft there"),
    ("train_draft", ["--evaluate", str(FOLDER)], "no saved draft there"),
    ("train_draft", ["--out", str(HERE)], "exists and is not a folder"),
    ("train_draft", ["--out", UNDER_A_FILE], "cannot write there"),
    # train_head
    ("train_head", ["--rounds", "0"], "--rounds must be >= 1"),
    ("train_head", ["--device", "tpu"], "--device: device must be"),
    ("train_head", ["--dtype", "int8"], "invalid choice"),
    ("head_data", ["--device", "cuda:7" if torch.cuda.is_available() else "cuda"],
     "--device: device cuda"),
    ("head_data", ["--dtype", "float64"], "invalid choice"),
    ("train_head", ["--max-new-tokens", "0"], "--max-new-tokens must be >= 1"),
    ("train_head", ["--draft-vocab", "0"], "--draft-vocab must be >= 1"),
    ("train_head", ["--steps", "0"], "--steps must be >= 1"),
    ("train_head", ["--epochs", "0"], "--epochs must be >= 1"),
    ("train_head", ["--batch-size", "0"], "--batch-size must be >= 1"),
    ("train_head", ["--limit", "0"], "--limit must be >= 1"),
    ("train_head", ["--lr", "0"], "--lr must be a finite number > 0"),
    ("train_head", ["--lr", "inf"], "--lr must be a finite number > 0"),
    ("train_head", ["--step-decay", "0"], "--step-decay in (0, 1]"),
    ("train_head", ["--step-decay", "1.5"], "--step-decay in (0, 1]"),
    ("train_head", ["--regression-weight", "-1"], "--regression-weight must be"),
    ("train_head", ["--regression-weight", "nan"], "--regression-weight must be"),
    ("train_head", ["--evaluate", "/nonexistent/head"], "no saved head there"),
    ("train_head", ["--init", "/nonexistent/head"], "no saved head there"),
    ("train_head", ["--split", "test"], "give --evaluate HEAD too"),
    ("train_head", ["--evaluate", "data/head", "--split", "train"], "invalid choice"),
    ("train_head", ["--out", str(HERE)], "exists and is not a folder"),
    ("train_head", ["--out", UNDER_A_FILE], "cannot write there"),
    ("train_head", ["--data-tokens", "0"], "--data-tokens must be >= 1"),
    ("train_head", ["--self-prompts", "-1"], "--self-prompts must be >= 0"),
    ("train_head", ["--data-batch-size", "0"], "--data-batch-size must be >= 1"),
    # head_data
    ("head_data", ["--tokens", "0"], "--tokens must be >= 1"),
    ("head_data", ["--batch-size", "0"], "--batch-size must be >= 1"),
    ("head_data", ["--max-new-tokens", "0"], "--max-new-tokens must be >= 1"),
    ("head_data", ["--rounds", "0"], "--rounds must be >= 1"),
    ("head_data", ["--self-prompts", "-5"], "--self-prompts must be >= 0"),
    # head_ranks
    ("head_ranks", ["--max-new-tokens", "0"], "--max-new-tokens must be >= 1"),
    ("head_ranks", ["--out", str(FOLDER)], "is a folder"),
    ("head_ranks", ["--out", UNDER_A_FILE], "cannot write there"),
    # assignments
    ("assignments", [], "required"),
    ("assignments", ["grade"], "the following arguments are required"),
    ("assignments", ["grade", "/nonexistent/nb.ipynb"], "no such file or folder"),
    ("assignments", ["grade", str(HERE)], "no source notebook of that name"),
    ("assignments", ["grade", str(SUBMISSION), "--timeout", "0"], "--timeout must be >= 1"),
    ("assignments", ["grade", str(SUBMISSION), "--executed", str(HERE)],
     "exists and is not a folder"),
    ("assignments", ["--source", "/nonexistent", "release"], "no folder of source notebooks"),
    ("assignments", ["--source", str(FOLDER), "release"], "no folder of source notebooks"),
    ("assignments", ["release", "--out", str(HERE)], "exists and is not a folder"),
    ("assignments", ["release", "--out", UNDER_A_FILE], "cannot write there"),
    # execute (make notebooks)
    ("execute", [str(HERE)], "not a notebook"),
    ("execute", ["/nonexistent/nb.ipynb"], "not a notebook"),
    ("execute", ["--budget", "0"], "--budget must be > 0"),
]


@pytest.fixture
def tripwires(monkeypatch):
    """Loading a model, running a benchmark or grading fails the test: nothing may start."""
    def tripwire(*args, **kwargs):
        raise AssertionError("work started before the command line was checked")
    for module, names in ((bench, ["load_pair", "run"]), (overhead, ["load_pair", "profile"]),
                          (train_draft, ["load_model"]),
                          (train_head, ["load_model"]), (head_data, ["load_model"]),
                          (head_ranks, ["load_pair", "measure_ranks"]),
                          (assignments, ["release", "grade", "grade_notebook"]),
                          (run, ["load_pair"]), (execute, ["execute"])):
        for name in names:
            monkeypatch.setattr(module, name, tripwire)


@pytest.mark.parametrize("command,argv,fragment", [
    pytest.param(c, a, f, id=f"{c} {' '.join(a)}") for c, a, f in ROWS])
def test_bad_command_line_exits_2_before_any_work(tripwires, capsys, command, argv, fragment):
    with pytest.raises(SystemExit) as exited:
        MODULES[command].main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and fragment in err, err


def test_train_draft_top_k_past_the_vocabulary_stops_before_any_answer(monkeypatch, capsys):
    """The vocabulary is known once the target is loaded: checked there, before generating."""
    target = SimpleNamespace(config=SimpleNamespace(vocab_size=100))
    monkeypatch.setattr(train_draft, "load_model", lambda: (target, None))
    monkeypatch.setattr(train_draft, "generate_answers", lambda *a, **k: pytest.fail("worked"))
    with pytest.raises(SystemExit) as exited:
        train_draft.main(["--top-k", "101"])
    assert exited.value.code == 2 and "--top-k must be <= the vocabulary" in capsys.readouterr().err


def test_bench_flags_checked_as_a_notebook_calls_them():
    """Notebooks call parse_args([...]) and select_prompts: good flags pass, --ids is checked
    by select_prompts (a ValueError), the command checks it up front (a row above)."""
    args = bench.parse_args(["--ids", "sky-blue", "--methods", "ours feature", "HF assisted"])
    assert [p["id"] for p in bench.select_prompts(args)] == ["sky-blue"]
    with pytest.raises(ValueError, match="--ids"):
        bench.select_prompts(bench.parse_args(["--ids", "no-such-prompt"]))


SUBPROCESS_ROWS = [
    ("specnb", ["--repeats", "-1"], "--repeats must be >= 0"),
    ("specnb.bench", ["--repeats", "0"], "--repeats must be >= 1"),
    ("specnb.training.train_draft", ["--epochs", "0"], "--epochs must be >= 1"),
    ("specnb.training.train_head", ["--out", str(HERE)], "exists and is not a folder"),
    ("specnb.training.head_data", ["--tokens", "0"], "--tokens must be >= 1"),
    ("specnb.training.head_ranks", ["--max-new-tokens", "0"], "--max-new-tokens must be >= 1"),
    ("specnb.course.assignments", ["grade", "/nonexistent/nb.ipynb"], "no such file or folder"),
]
# Each module run as `python -m` does (runpy's run_module as __main__, sys.argv as the command
# line gives it), one after the other in one interpreter, which imports torch and transformers
# once instead of once per command; prints {module: [exit code, stderr]} as JSON.
AS_MAIN = """
import contextlib, io, json, runpy, sys
codes = {}
for module, argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    sys.argv = [module] + argv
    with contextlib.redirect_stderr(err):
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exit:
            code = exit.code
    codes[module] = [code, err.getvalue()]
print(json.dumps(codes))
"""


def run_python(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_the_real_command_exits_2():
    """`python -m specnb` (make run's command) itself, in a process of its own."""
    module, argv, fragment = SUBPROCESS_ROWS[0]
    done = run_python("-m", module, *argv)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"python -m {module}: error:" in done.stderr and fragment in done.stderr


@pytest.fixture(scope="module")
def as_main():
    done = run_python("-c", AS_MAIN, json.dumps([[m, a] for m, a, _ in SUBPROCESS_ROWS]))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("module,argv,fragment", [
    pytest.param(m, a, f, id=f"python -m {m} {' '.join(a)}") for m, a, f in SUBPROCESS_ROWS])
def test_every_command_run_as_main_exits_2(as_main, module, argv, fragment):
    code, err = as_main[module]
    assert code == 2, err[-2000:]
    assert f"python -m {module}: error:" in err and fragment in err
