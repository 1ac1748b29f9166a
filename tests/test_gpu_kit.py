"""The GPU run kit (scripts/): GGUF parts that re-join exactly, a transfer plan that fits every
remote command, and the whole GPU check dry-run on the CPU (marked slow)."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import gpu_check  # noqa: E402
import gpu_transfer  # noqa: E402

GGUF_SIZE = 98_362_432  # the embedded Q4_1 GGUF
MB = 10**6


@pytest.fixture
def split_file(tmp_path):
    """A 10 000-byte file of seeded random bytes, split into 3000-byte parts."""
    source = tmp_path / "model.gguf"
    source.write_bytes(hashlib.shake_256(b"specnb").digest(10_000))
    manifest = gpu_transfer.split(source, tmp_path / "parts", part_size=3000)
    return source, tmp_path / "parts", manifest


def test_split_then_join_restores_the_file(split_file, tmp_path):
    source, parts, manifest = split_file
    assert [p["size"] for p in manifest["parts"]] == [3000, 3000, 3000, 1000]
    assert manifest["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert json.loads((parts / "manifest.json").read_text()) == manifest
    joined = gpu_transfer.join(parts, tmp_path / "cache" / "gguf" / "model.gguf")
    assert joined.read_bytes() == source.read_bytes()
    assert gpu_transfer.join(parts, joined) == joined  # joining again finds it done
    assert sorted(p.name for p in joined.parent.iterdir()) == ["model.gguf"]  # no .partial


def test_split_again_replaces_old_parts(split_file):
    source, parts, _ = split_file
    manifest = gpu_transfer.split(source, parts, part_size=6000)
    assert sorted(p.name for p in parts.iterdir()) == sorted(
        [p["name"] for p in manifest["parts"]] + ["manifest.json"])


def corrupt(path):
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, message", [
    (lambda parts: corrupt(parts / "model.gguf.part-01"), "model.gguf.part-01: SHA-256 differs"),
    (lambda parts: (parts / "model.gguf.part-02").unlink(), "model.gguf.part-02: missing"),
    (lambda parts: (parts / "model.gguf.part-03").write_bytes(b"short"), "part-03: size 5"),
    (lambda parts: (parts / "manifest.json").unlink(), "no manifest.json"),
])
def test_join_refuses_damaged_parts_and_writes_nothing(split_file, tmp_path, damage, message):
    _, parts, _ = split_file
    damage(parts)
    destination = tmp_path / "cache" / "model.gguf"
    with pytest.raises((RuntimeError, FileNotFoundError), match=message):
        gpu_transfer.join(parts, destination)
    assert not destination.parent.exists() or not any(destination.parent.iterdir())


def test_join_refuses_parts_that_do_not_make_the_whole(split_file, tmp_path):
    _, parts, manifest = split_file
    manifest["sha256"] = "0" * 64  # every part intact, but not the file the manifest names
    (parts / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RuntimeError, match="do not belong together"):
        gpu_transfer.join(parts, tmp_path / "cache" / "model.gguf")
    assert not list((tmp_path / "cache").iterdir())  # the partial file is gone too


def test_status_command_reports_arrived_and_damaged_parts(split_file, capsys):
    _, parts, _ = split_file
    (parts / "model.gguf.part-03").unlink()
    assert gpu_transfer.main(["status", "--parts", str(parts)]) == 0  # missing: not yet sent
    assert "3/4 parts here and intact" in capsys.readouterr().out
    corrupt(parts / "model.gguf.part-00")
    assert gpu_transfer.main(["status", "--parts", str(parts)]) == 1


@pytest.mark.parametrize("checkout_mb", [0, 20.6, 30, 46, 55, 60])
def test_plan_keeps_every_command_under_the_limit(checkout_mb):
    checkout, wheel = int(checkout_mb * MB), 118_475
    commands = gpu_transfer.plan(checkout, GGUF_SIZE, wheel_size=wheel)
    assert all(c["bytes"] <= gpu_transfer.COMMAND_LIMIT - gpu_transfer.MARGIN for c in commands)
    assert all(c["bytes"] <= 64 * 2**20 for c in commands)
    assert sum(c["bytes"] - checkout - 4096 for c in commands) == GGUF_SIZE + wheel
    parts = [c["carry"][1] for c in commands]
    assert parts == [f"{gpu_transfer.PARTS_DIR}/{gpu_transfer.part_name(gpu_transfer.GGUF_NAME, i)}"
                     for i in range(len(commands))]
    assert all(len(c["carry"]) <= 8 and len(c["run"]) <= 2000 for c in commands)
    assert "join" in commands[-1]["run"] and "gpu_check.py" in commands[-1]["run"]
    assert commands[-1]["carry"][-1].endswith(".whl")


def test_plan_refuses_what_cannot_fit():
    with pytest.raises(ValueError, match="less than 1 MiB"):
        gpu_transfer.plan(63 * 2**20, GGUF_SIZE)
    with pytest.raises(ValueError, match="split again"):  # parts split for a smaller checkout
        gpu_transfer.plan(40 * MB, GGUF_SIZE, part_sizes=[40 * MB, 40 * MB, 18_362_432])


def test_plan_of_this_checkout_fits():
    checkout = gpu_transfer.checkout_bytes()
    assert 1 * MB < checkout < gpu_transfer.COMMAND_LIMIT
    size = gpu_transfer.auto_part_size(checkout, 4096 + 200_000)
    commands = gpu_transfer.plan(checkout, GGUF_SIZE, wheel_size=200_000)
    assert len(commands) == -(-GGUF_SIZE // size)


@pytest.mark.parametrize("variables", [{}, {"XDG_CACHE_HOME": "/x/cache"},
                                       {"SPECNB_CACHE": "/y/specnb", "XDG_CACHE_HOME": "/x"}])
def test_cache_dir_matches_specnb(monkeypatch, variables):
    import specnb.models.loading
    for name in ("SPECNB_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert gpu_transfer.cache_dir() == specnb.models.loading.cache_dir()
    assert gpu_transfer.GGUF_NAME == specnb.models.loading.EMBEDDED_GGUF


def test_committed_config_matches_the_prepared_checkpoint():
    prepared = gpu_transfer.cache_dir() / "smollm2-135m-instruct" / "config.json"
    if not prepared.is_file():
        pytest.skip("the embedded model is not prepared here")
    shapes = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
              "num_attention_heads", "num_key_value_heads", "head_dim", "tie_word_embeddings")
    committed = json.loads((ROOT / "scripts" / "embedded-target-config.json").read_text())
    actual = json.loads(prepared.read_text())
    assert {k: committed[k] for k in shapes} == {k: actual[k] for k in shapes}


def test_transfer_folders_are_ignored_by_git():
    paths = [f"{gpu_transfer.PARTS_DIR}/x.part-00", f"{gpu_transfer.WHEELS_DIR}/g.whl",
             f"{gpu_transfer.SITE_DIR}/gguf/__init__.py", "build/gpu-check/x.json"]
    done = subprocess.run(["git", "check-ignore", *paths], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.stdout.split() == paths


@pytest.mark.parametrize("argv, flags, kept, dropped", [
    (["--a", "1", "--b", "x", "y", "--c"], {"--a", "--c"}, ["--a", "1", "--c"], ["--b"]),
    (["--ids", "p1", "p2", "--out", "f.json"], {"--ids", "--out"},
     ["--ids", "p1", "p2", "--out", "f.json"], []),
])
def test_only_known_flags_are_passed_on(argv, flags, kept, dropped):
    assert gpu_check.with_known_flags(argv, flags) == (kept, dropped)


@pytest.mark.parametrize("device, budget, tag", [("cuda", "full", "gpu"),
                                                 ("cuda:0", "small", "gpu-small"),
                                                 ("cpu", "small", "cpu-small"),
                                                 ("cpu", "full", "cpu")])
def test_result_names_never_collide_with_the_cpu_records(device, budget, tag):
    assert gpu_check.tag_of(device, budget) == tag


def test_make_target_needs_no_venv_when_python_is_given():
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    # Under `make test` the parent make's variables would make this one print "Entering directory".
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(["make", "--no-print-directory", "-n", "gpu-check", "PY=python3",
                           "DEVICE=cpu"], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "python3 scripts/gpu_check.py --device cpu --budget full"


@pytest.mark.slow
def test_gpu_check_dry_run_on_the_cpu(tmp_path):
    """Every step of the GPU run, with tiny settings, on the CPU; nothing lands in data/."""
    records = {p: p.read_bytes() for p in (ROOT / "data" / "results").iterdir() if p.is_file()}
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--device",
                           "cpu", "--budget", "small", "--results-dir", str(tmp_path / "results")],
                          cwd=ROOT, env={**os.environ, "OUT": str(out)}, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    summary = json.loads((out / "gpu-check-cpu-small.json").read_text())
    steps = {s["step"]: s["status"] for s in summary["steps"]}
    # Timing first: the benchmarks right after the environment, the weights and the curve.
    assert list(steps) == ["env", "weights", "latency", "bench", "bench_batch", "loop_syncs",
                           "sync", "verify_share", "tests"]
    assert all(steps[name] == "ok" for name in ("env", "sync", "verify_share", "latency", "tests",
                                                "loop_syncs"))
    assert summary["sync"]["cases"] and summary["latency"]["token_counts"] == [1, 2, 4]
    # The loop's own host reads, as a GPU would wait for them: one per iteration, every drafter.
    assert {row["per_iteration"] for row in summary["loop_syncs"]["rows"]} == {1.0}
    assert [row["batch"] for row in summary["verify_share"]["rows"]] == [1, 2]
    assert len(list(out.iterdir())) <= 8  # what comes back from the remote machine
    assert {p: p.read_bytes() for p in (ROOT / "data" / "results").iterdir()
            if p.is_file()} == records


class ReadyPopen(subprocess.Popen):
    """The kit's Popen, returning only once the child wrote its `ready` file (its handlers are in
    place), so the step's budget counts from there: no race with python's start-up. With
    `sigint_ignored`, the child starts as under `&` in a script or nohup: SIGINT ignored, as
    inherited, before the kit's own preexec_fn runs."""
    ready: Path
    sigint_ignored = False

    def __init__(self, *args, **kwargs):
        kit_preexec = kwargs.get("preexec_fn")

        def preexec():
            if self.sigint_ignored:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
            if kit_preexec:
                kit_preexec()

        super().__init__(*args, **{**kwargs, "preexec_fn": preexec})
        while not self.ready.exists() and self.poll() is None:
            time.sleep(0.02)


def budgeted_run(tmp_path, monkeypatch, sigint_ignored: bool):
    """A kit run whose bench step has a 1 s budget and 2 s of grace, its children started by
    `ReadyPopen`; returns (run, the child's ready file, a polite child's partial file, the
    polite child's code: it writes the partial file on SIGINT and exits 130)."""
    from argparse import Namespace

    monkeypatch.setitem(gpu_check.BUDGET_S, "bench", (1, 1))
    monkeypatch.setattr(gpu_check, "GRACE_S", 2)
    monkeypatch.delenv("OUT", raising=False)
    monkeypatch.setattr(ReadyPopen, "ready", tmp_path / "ready", raising=False)
    monkeypatch.setattr(ReadyPopen, "sigint_ignored", sigint_ignored)
    monkeypatch.setattr(gpu_check.subprocess, "Popen", ReadyPopen)
    run = gpu_check.Run(Namespace(device="cpu", budget="small", results_dir=tmp_path))
    ready, wrote = tmp_path / "ready", tmp_path / "partial.json"
    polite = (f"import sys, time\ntry:\n    open({str(ready)!r}, 'w').close()\n"
              f"    time.sleep(60)\nexcept KeyboardInterrupt:\n"
              f"    open({str(wrote)!r}, 'w').write('{{}}')\n    sys.exit(130)\n")
    return run, ready, wrote, polite


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["foreground", "background-job"])
def test_a_step_at_its_budget_is_interrupted_so_it_can_write_what_finished(
        tmp_path, monkeypatch, sigint_ignored):
    """SIGINT first (bench and bench_batch then write the prompts that finished, exit 130),
    SIGKILL only if the step ignores it for GRACE_S; the same when the kit itself was started
    as a background job."""
    run, ready, wrote, polite = budgeted_run(tmp_path, monkeypatch, sigint_ignored)
    status, _ = run.execute("bench", [sys.executable, "-c", polite])
    assert status == "failed" and wrote.is_file()
    assert run.steps[-1]["note"] == "timed out after 1 s, stopped with SIGINT (exit 130)"
    ready.unlink()
    stubborn = (f"import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                f"open({str(ready)!r}, 'w').close()\ntime.sleep(60)\n")
    status, _ = run.execute("bench", [sys.executable, "-c", stubborn])
    assert status == "failed" and run.steps[-1]["note"] == "timed out after 1 s"
    assert run.steps[-1]["seconds"] < 1 + 2 + 10


def test_a_kit_that_leaves_sigint_as_inherited_loses_the_partial_results(tmp_path, monkeypatch):
    """The broken variant: without the kit's reset, a step started from a background job never
    sees the stop and is killed without writing what finished."""
    run, _, wrote, polite = budgeted_run(tmp_path, monkeypatch, sigint_ignored=True)
    monkeypatch.setattr(gpu_check, "sigint_deliverable", lambda: None)
    status, _ = run.execute("bench", [sys.executable, "-c", polite])
    assert status == "failed" and not wrote.exists()
    assert run.steps[-1]["note"] == "timed out after 1 s"


def test_the_lean_transfer_takes_three_commands():
    """scripts/gpu_transfer.md: without the draft's and the heads' weights in the checkout, the
    GGUF goes in two transfer commands and the last one (its small third part, then the check)."""
    weights = sum((ROOT / name).stat().st_size for name in
                  ("data/draft/model.safetensors", "data/head/model.safetensors",
                   "data/engines_head/model.safetensors"))
    lean = gpu_transfer.checkout_bytes() - weights
    commands = gpu_transfer.plan(lean, GGUF_SIZE, wheel_size=200_000)
    assert len(commands) <= 3


@pytest.mark.parametrize("written, expected", [
    ('{"rows": [{"method": "ours autoregressive", "prompt_id": "a", "identical": true}], '
     '"interrupted": "stopped after 1 of 2 prompts"}',
     "1 methods × 1 prompts; greedy outputs equal to ours AR: 1/1 (partial: stopped after 1 of "
     "2 prompts); bench.json; timed out after 6 s, stopped with SIGINT (exit 130)"),
    ('{"rows": [', "timed out after 6 s, stopped with SIGINT (exit 130); bench.json unreadable"),
])
def test_a_bench_stopped_at_its_budget_keeps_its_partial_record(tmp_path, monkeypatch, written,
                                                                 expected):
    """What an interrupted bench wrote is read and named partial; a file it could not finish
    is reported, and the run goes on to its next steps."""
    from argparse import Namespace

    monkeypatch.delenv("OUT", raising=False)
    run = gpu_check.Run(Namespace(device="cpu", budget="small", results_dir=tmp_path))
    out = tmp_path / "bench.json"

    def execute(name, argv, required=True, env=None):
        out.write_text(written)
        run.record(name, "failed", 6.0, "timed out after 6 s, stopped with SIGINT (exit 130)",
                   required, "python -m specnb.bench")
        return "failed", ""
    monkeypatch.setattr(run, "execute", execute)
    monkeypatch.setattr(gpu_check, "known_flags", lambda module, env: {"--out", "--ids"})
    gpu_check.run_bench(run, "bench", "specnb.bench", ["--ids", "a", "--out", str(out)])
    assert run.steps[-1]["note"].startswith(expected)
    assert ("bench" in run.outputs) == written.endswith("}")
