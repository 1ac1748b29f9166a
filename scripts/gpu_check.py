"""`python3 scripts/gpu_check.py` (`make gpu-check`): the whole GPU run as one command.

Steps, each in its own process with its own time budget, inside one overall deadline (8 min for
`--budget full`), offline (HF_HUB_OFFLINE=1), timing first:

    env           device name and versions
    weights       dequantize the embedded GGUF if it was sent (scripts/gpu_transfer.py join)
    latency       the forward-latency curve t(k)/t(1), k up to 512, bf16
    bench         python -m specnb.bench: every method against its transformers peer on eval
                  prompts (autoregressive, the distilled pair, the head as chains, as a tree and
                  as the shape this GPU's own checking curve picks, prompt lookup, lookahead,
                  Jacobi), 3 repeats                                     } only with the real
    bench_batch   python -m specnb.bench.batch, B ∈ {1, ..., 32}         } weights
    loop_syncs    host syncs per iteration of the real loop, counted by
                  torch.cuda.set_sync_debug_mode (scripts/gpu_measure.py)
    sync          no host sync inside batched verify + sample
    verify_share  share of an iteration spent in verify + sample, B ∈ {1, 8, 32}
    tests         greedy-equality and χ² tests on tiny models, with SPECNB_TEST_DEVICE set

A step that fails or runs out of time is recorded as failed and the run goes on; the exit code
is 1 if any required step failed. A step at its budget gets SIGINT, then SIGKILL `GRACE_S`
later: bench and bench_batch write the prompts and batch sizes that finished, which are kept.
The summary (`gpu-check-<tag>.json`, with each step's result) is rewritten after every step and,
with the results and logs, copied into $OUT when that is set. `--device cpu --budget small` runs
the same steps in a couple of minutes on a CPU (tiny settings, results in build/gpu-check/), so
the script cannot rot between GPU runs.

It runs with any python3 that has torch and transformers (no .venv needed), and it decides
nothing about methods: bench and bench_batch run their own default sets. In bfloat16 a k-token
check rounds differently from one-token forwards, so a greedy output may part from ours
autoregressive after a near-tie: their "equal to ours AR" counts are measurements there, not
verdicts (the float32 tests are the verdicts). The loop times its forwards with CUDA events read
at the step's one host read, so its times include no wait that transformers' loops do not pay.
"""

import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import gpu_transfer

ROOT = gpu_transfer.ROOT
DEADLINE_S = {"full": 480, "small": 600}
BUDGET_S = {  # step -> (full, small) seconds; the deadline cuts the last steps, not the timing
    "env": (60, 90), "weights": (90, 120), "latency": (30, 90), "bench": (170, 180),
    "bench_batch": (80, 150), "loop_syncs": (40, 120), "sync": (20, 60),
    "verify_share": (30, 90), "tests": (100, 240),
}
GRACE_S = 20  # after a step's SIGINT at its budget, before SIGKILL


def sigint_deliverable() -> None:
    """In a step's process, before it runs: SIGINT back to its default. A job started with `&`
    from a script or with nohup inherits SIGINT as ignored, and python then installs no
    KeyboardInterrupt handler, so the stop at the budget would never reach bench's clean-up."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
TEST_FILES = {  # -k narrows the small run to two quick tests
    "full": (["tests/test_methods_greedy.py", "tests/test_batched.py",
              "tests/test_speculative_exact.py"], None),
    "small": (["tests/test_methods_greedy.py", "tests/test_speculative_exact.py"],
              "autoregressive_equals_hf_greedy or (the_target_joint and speculative and 1.0)"),
}


NOTES = {  # a measurement's one-line note in the summary table
    "env": lambda r: f"{r['device']}; torch {r['versions']['torch']}, CUDA {r['versions']['cuda']}",
    "weights": lambda r: f"dequantized the GGUF in {r['seconds']:.0f} s: {r['checkpoint']}",
    "sync": lambda r: r["note"],
    "loop_syncs": lambda r: "host syncs per iteration (loop + model): " + ", ".join(
        f"{row['drafter']} {row['per_iteration']:.2f} + {row['model_per_iteration']:.2f}"
        for row in r["rows"]),
    "verify_share": lambda r: "verify+sample share of an iteration: " + ", ".join(
        f"B={row['batch']} {100 * row['share']:.1f}%" for row in r["rows"]),
    "latency": lambda r: "t(k)/t(1): " + ", ".join(
        f"k={k} {ratio:.2f}" for k, ratio in zip(r["token_counts"], r["ratio_to_one_token"])
        if k in (r["token_counts"][-1], 8, 64)),
}


def tag_of(device: str, budget: str) -> str:
    """'cuda', 'full' -> 'gpu'; 'cpu', 'small' -> 'cpu-small'."""
    name = "gpu" if device.startswith("cuda") else device.split(":")[0]
    return name if budget == "full" else f"{name}-{budget}"


def eval_prompt_ids(per_group: int) -> list:
    """The first `per_group` eval prompt ids of each group, in file order."""
    rows = [json.loads(line) for line in
            (ROOT / "data" / "prompts" / "eval.jsonl").read_text().splitlines() if line.strip()]
    groups = list(dict.fromkeys(r["group"] for r in rows))
    return [r["id"] for g in groups for r in [r for r in rows if r["group"] == g][:per_group]]


def known_flags(module: str, env: dict) -> set:
    """The --flags `python -m module --help` lists (so dropped flags are noticed, not fatal)."""
    done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=90)
    flags = set(re.findall(r"--[a-z][a-z0-9-]*", done.stdout))
    if "--out" not in flags:  # without its flags it would run its whole default set: refuse
        raise RuntimeError(f"`{module} --help` failed: {(done.stderr or done.stdout)[-300:]}")
    return flags


def with_known_flags(argv: list, flags: set) -> tuple[list, list]:
    """Keep the options `flags` knows (with their values); return (argv, dropped options)."""
    kept, dropped, keep = [], [], True
    for item in argv:
        if item.startswith("--"):
            keep = item in flags
            (kept if keep else dropped).append(item)
        elif keep:
            kept.append(item)
    return kept, dropped


class Run:
    """One gpu_check run: its settings, folders, steps so far and the summary file."""

    def __init__(self, args):
        self.device, self.budget, self.tag = args.device, args.budget, tag_of(args.device,
                                                                             args.budget)
        default = ROOT / ("data/results" if self.tag == "gpu" else "build/gpu-check")
        self.results = (args.results_dir or default).resolve()
        if self.results == (ROOT / "data/results").resolve() and self.tag != "gpu":
            raise SystemExit("gpu_check: data/results holds the project's CPU records; write a "
                             "non-GPU run elsewhere (--results-dir)")
        # Logs never go into data/results (committed records): build/ is ignored by git.
        logs_parent = self.results if args.results_dir else ROOT / "build" / "gpu-check"
        self.logs = logs_parent / f"gpu-check-{self.tag}-logs"
        shutil.rmtree(self.logs, ignore_errors=True)
        self.logs.mkdir(parents=True)
        self.results.mkdir(parents=True, exist_ok=True)
        self.out = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
        self.summary_path = self.results / f"gpu-check-{self.tag}.json"
        self.start, self.started, self.steps, self.outputs = time.monotonic(), time.time(), [], {}
        site = ROOT / gpu_transfer.SITE_DIR  # where the remote command installs the gguf wheel
        self.env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                    "PYTHONUNBUFFERED": "1", "MPLBACKEND": "Agg",
                    "TOKENIZERS_PARALLELISM": "false", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                    "PYTHONPATH": os.pathsep.join(
                        [str(ROOT)] + ([str(site)] if site.is_dir() else []) +
                        ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))}
        if self.budget == "small" and not self.device.startswith("cuda"):
            # The dry run checks that every step works, not how fast the CPU is; one thread
            # keeps it quick on a busy machine, where OpenMP threads spin against other work.
            self.env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")

    def left_s(self) -> float:
        return DEADLINE_S[self.budget] - (time.monotonic() - self.start)

    def budget_s(self, name: str) -> int:
        return BUDGET_S[name][0 if self.budget == "full" else 1]

    def record(self, name, status, seconds=0.0, note="", required=True, command=None):
        ran = command is not None
        self.steps.append({"step": name, "status": status, "seconds": round(seconds, 1),
                           "budget_s": self.budget_s(name), "required": required, "note": note,
                           "command": command.replace(f"{ROOT}/", "") if ran else None,
                           "log": f"{self.logs.name}/{name}.log" if ran else None})
        self.write_summary()
        return status

    def execute(self, name: str, argv: list, required=True, env=None) -> tuple[str, str]:
        """Run `argv` under the step's budget (cut to the deadline); log to logs/<name>.log.
        Returns (status, its whole output)."""
        timeout = min(self.budget_s(name), self.left_s())
        if timeout < min(20, self.budget_s(name) / 2):
            return self.record(name, "skipped", note="out of time (overall deadline)",
                               required=required), ""
        log, start = self.logs / f"{name}.log", time.monotonic()
        with open(log, "w") as out:
            out.write("$ " + shlex.join(argv) + "\n")
            out.flush()
            process = subprocess.Popen(argv, cwd=ROOT, env=env or self.env, stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True,
                                       preexec_fn=sigint_deliverable)
            timed_out = False
            try:
                code = process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                # SIGINT first: bench and bench_batch then write what finished (exit 130)
                timed_out = True
                os.killpg(process.pid, signal.SIGINT)
                try:
                    code = process.wait(timeout=GRACE_S)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                    code = None
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
        status = "ok" if code == 0 else "failed"
        note = f"timed out after {timeout:.0f} s" + (
            "" if code is None else f", stopped with SIGINT (exit {code})") if timed_out else \
            ("" if code == 0 else f"exit {code}: {tail[0][:160]}")
        self.record(name, status, time.monotonic() - start, note, required, shlex.join(argv))
        return status, log.read_text(errors="replace")

    def measure(self, name: str, required=True) -> dict | None:
        """A gpu_measure.py step; its JSON goes into the summary's outputs."""
        result = self.logs / f"{name}.json"
        argv = [sys.executable, str(ROOT / "scripts" / "gpu_measure.py"), name, "--device",
                self.device, "--budget", self.budget, "--json", str(result)]
        if name == "latency":
            argv += ["--png", str(self.results / f"forward-latency-{self.tag}.png")]
        status, _ = self.execute(name, argv, required)
        if status != "ok":
            return None
        self.outputs[name] = json.loads(result.read_text())
        self.steps[-1]["note"] = NOTES[name](self.outputs[name])
        self.write_summary()
        return self.outputs[name]

    def write_summary(self) -> None:
        summary = {"tag": self.tag, "device_setting": self.device, "budget": self.budget,
                   "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                       timespec="seconds"),
                   "wall_s": round(time.monotonic() - self.start, 1),
                   "deadline_s": DEADLINE_S[self.budget],
                   "budgets_s": {name: self.budget_s(name) for name in BUDGET_S},
                   "test_selection": TEST_FILES[self.budget], "steps": self.steps,
                   **self.outputs}
        self.summary_path.write_text(json.dumps(summary, indent=1, default=str) + "\n")
        self.export()

    def export(self) -> None:
        """Copy into $OUT: the summary, the result files (at most 8 files in all come back),
        and one archive holding everything, logs included."""
        if self.out is None:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        results = sorted(p for p in self.results.glob(f"*-{self.tag}.*")  # this run's only
                         if p.is_file() and p.stat().st_mtime >= self.started - 1)
        with tarfile.open(self.out / f"gpu-check-{self.tag}-all.tar.gz", "w:gz") as archive:
            for path in results:
                archive.add(path, arcname=path.name)
            archive.add(self.logs, arcname=self.logs.name)
        others = [p for p in results if p != self.summary_path]
        for path in [self.summary_path] + others[:6]:
            shutil.copy2(path, self.out / path.name)


def run_tests(run: Run) -> None:
    files, keyword = TEST_FILES[run.budget]
    present = [f for f in files if (ROOT / f).is_file()]
    argv = [sys.executable, "-m", "pytest", "-q", "-rfE", "-o", "addopts=", "-p",
            "no:cacheprovider", *present] + (["-k", keyword] if keyword else [])
    status, output = run.execute("tests", argv,
                                 env={**run.env, "SPECNB_TEST_DEVICE": run.device})
    lines = [l for l in output.splitlines() if re.search(r"\d+ (passed|failed|error)", l)]
    run.outputs["tests"] = {"files": present, "keyword": keyword,
                            "missing_files": sorted(set(files) - set(present)),
                            "result": lines[-1].strip("= ") if lines else None,
                            "failures": [l for l in output.splitlines()
                                         if l.startswith(("FAILED", "ERROR"))][:40]}
    run.steps[-1]["note"] = run.outputs["tests"]["result"] or run.steps[-1]["note"]
    run.write_summary()


def run_bench(run: Run, name: str, module: str, argv: list) -> None:
    """`python -m module argv` with only the flags it knows; its JSON joins the outputs."""
    try:
        argv, dropped = with_known_flags(argv, known_flags(module, run.env))
    except (subprocess.SubprocessError, OSError, RuntimeError) as error:
        run.record(name, "failed", note=str(error).replace("\n", " "),
                   command=f"python -m {module} --help")
        return
    status, _ = run.execute(name, [sys.executable, "-m", module, *argv])
    if dropped:
        run.steps[-1]["note"] += f" (flags it does not know, dropped: {' '.join(dropped)})"
    out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else None
    # At its budget a bench is interrupted and writes what finished: keep that too.
    record = None
    if out is not None and out.is_file() and out.stat().st_mtime >= run.started - 1:
        try:
            record = json.loads(out.read_text())
        except (OSError, ValueError) as error:  # benches write whole files; be sure anyway
            run.steps[-1]["note"] += f"; {out.name} unreadable ({error})"
    if record is not None:
        run.outputs[name] = {"file": out.name, "settings": record.get("settings"),
                             "summary": record.get("summary"), "wall_s": record.get("wall_s")}
        rows = record.get("rows", [])
        if name == "bench":
            same = [r.get("identical") for r in rows if r.get("identical") is not None]
            note = (f"{len({r['method'] for r in rows})} methods × "
                    f"{len({r['prompt_id'] for r in rows})} prompts; greedy outputs equal to "
                    f"ours AR: {sum(same)}/{len(same)}")
        else:
            note = (f"B ∈ {sorted({r['batch'] for r in rows})}, "
                    f"{len({r['method'] for r in rows})} methods; rows equal to ours AR: "
                    f"{sum(r['identical_rows'] for r in rows)}/{sum(r['batch'] for r in rows)}")
        if "interrupted" in record:
            note += f" (partial: {record['interrupted']})"
        own = run.steps[-1]["note"]  # e.g. how it timed out
        run.steps[-1]["note"] = f"{note}; {out.name}" + (f"; {own.lstrip(' ;')}" if own else "")
    run.write_summary()


def weights_state() -> tuple[str, str]:
    """('ready' | 'gguf' | 'parts' | 'none', explanation) for the embedded model here."""
    cache = gpu_transfer.cache_dir()
    if (cache / "smollm2-135m-instruct" / "config.json").is_file():
        return "ready", f"prepared checkpoint in {cache}"
    if (cache / "gguf" / gpu_transfer.GGUF_NAME).is_file():
        return "gguf", f"GGUF in {cache / 'gguf'}: dequantizing it"
    if (ROOT / gpu_transfer.PARTS_DIR / gpu_transfer.MANIFEST).is_file():
        return "parts", "GGUF parts arrived but were not joined: see `gpu_transfer.py join`"
    return "none", "no embedded weights on this machine (send them: scripts/gpu_transfer.md)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--budget", choices=["full", "small"], default="full")
    parser.add_argument("--results-dir", type=Path, default=None,
                        help="default: data/results for a full GPU run, else build/gpu-check")
    args = parser.parse_args(argv)
    run, small = Run(args), args.budget == "small"
    print(f"gpu_check: device {run.device}, budget {run.budget}, deadline "
          f"{DEADLINE_S[run.budget]} s, results in {run.results}", flush=True)

    env = run.measure("env")  # None when it failed or ran out of time: the steps still try
    if env is not None and run.device.startswith("cuda") and not env.get("cuda_available"):
        for name in ("weights", "latency", "bench", "bench_batch", "loop_syncs", "sync",
                     "verify_share", "tests"):
            run.record(name, "skipped", note=f"no usable {run.device} device (see env)")
        return finish(run)
    state, why = weights_state()
    if state == "gguf":
        run.measure("weights")
    else:
        run.record("weights", "ok" if state == "ready" else
                   ("failed" if state == "parts" else "skipped"), note=why,
                   required=state == "parts")
    run.measure("latency")
    # Timing first: every method against its transformers peer, while the most time is left.
    state, why = weights_state()
    if state != "ready":
        for name in ("bench", "bench_batch"):
            run.record(name, "skipped", note=f"needs the real weights: {why}", required=False)
    else:
        ids = eval_prompt_ids(1 if small else 2)[:1 if small else None]
        common = ["--device", run.device]
        run_bench(run, "bench", "specnb.bench", common + [
            "--ids", *ids, "--repeats", "1" if small else "3", "--warmup", "0" if small else "1",
            "--max-new-tokens", "4" if small else "64",
            "--gammas", *(["2"] if small else ["2", "4"]), "--head-gammas", "3",
            # The head's shape as this GPU's own checking curve picks it (`speculative` without
            # γ), and the (4, 2) tree alone and merged with lookup; lookahead beside Jacobi.
            "--head-default", *([] if small else ["--head-trees", "4,2", "--mixed", "4,2"]),
            "--lookahead", "5,3,5",
            *(["--latency-counts"] if small else []),  # nothing after it: no latency curve
            "--out", str(run.results / f"bench-{run.tag}.json")])
        run_bench(run, "bench_batch", "specnb.bench.batch", common + [
            "--batch-sizes", *(["2"] if small else ["1", "2", "4", "8", "16", "32"]),
            "--repeats", "1" if small else "2", "--warmup", "0" if small else "1",
            "--max-new-tokens", "4" if small else "64",
            "--out", str(run.results / f"bench-batch-{run.tag}.json")])
    for name in ("loop_syncs", "sync", "verify_share"):
        run.measure(name)
    run_tests(run)
    return finish(run)


def finish(run: Run) -> int:
    run.write_summary()
    failed = [s["step"] for s in run.steps if s["required"] and s["status"] == "failed"]
    print(f"\n{'step':<13}{'status':<9}{'seconds':>8}{'budget':>8}  note")
    for s in run.steps:
        print(f"{s['step']:<13}{s['status']:<9}{s['seconds']:>8.1f}{s['budget_s']:>8}  "
              f"{s['note'][:110]}")
    print(f"\n{time.monotonic() - run.start:.0f} s in all; summary {run.summary_path}" +
          (f"; copied to {run.out}" if run.out else "") +
          (f"\nFAILED (required): {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
