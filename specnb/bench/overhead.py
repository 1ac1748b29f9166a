"""Where the speculative loop's time goes besides the models: per-iteration overhead and host syncs.

    python -m specnb.bench.overhead                     the default pair, γ = 1 2 3, greedy
    python -m specnb.bench.overhead --default           also what `speculative` drafts without γ
    python -m specnb.bench.overhead --pair embedded-distilled --gammas 4

One process runs our autoregressive loop and `speculative` at each γ on the same prompts, with
every part of an iteration wrapped in a clock: choosing γ (`budget`), drafting outside the
draft's forwards (`propose`), our cache wrapper around the target's forward (`forward`), turning
logits into probabilities (`probs`), the acceptance rule (`verify`), rolling back and emitting
(`rollback`, `emit`), the step's one host read (`read`), the rows' state and statistics
(`state`), what the drafter is told (`step`), the drafter's own bookkeeping (`update`) and
dropping finished rows (`drop`). The *overhead* of an iteration is its wall time minus the target's and
the draft's forwards (`TimedModel` logs). Host syncs are counted by where they happen: every
`.tolist()`, `.item()`, `bool()`, `int()`, `float()` of a tensor (free on a CPU, a wait on a
GPU) is attributed to the first specnb line on its stack.

The record (JSON, with the CPU's model and ISA) goes to `data/results/overhead-<device>.json`.
It changes nothing in the loop: the clocks wrap the loop's callables from outside and are removed
afterwards. It does not compare with transformers (`python -m specnb.bench` does).
"""

import argparse
import collections
import contextlib
import datetime
import json
import platform
import sys
import time
from pathlib import Path

import torch
import transformers
from tqdm.auto import tqdm

from ..core.args import check_out_file, command_line
from ..core.batch_kv import BatchedCachedLM
from ..drafters import Drafter, NoDrafter
from ..methods import autoregressive, speculative
from ..methods.speculative import as_drafter, speculate
from ..methods.results import BatchOutput
from ..methods.run import Run
from ..models.data import DATA_DIR, load_prompts
from ..models.fast_path import cpu_identity
from ..models.loading import chat_ids
from ..models.pairs import load_pair

SYNC_METHODS = ("tolist", "item", "__bool__", "__int__", "__float__", "__index__")
SPECNB_ROOT = str(Path(__file__).resolve().parents[1])


class Clocks:
    """Seconds per named section, and host syncs per call site (file:line function)."""

    def __init__(self):
        self.seconds = collections.Counter()
        self.calls = collections.Counter()
        self.syncs = collections.Counter()
        self.depth = 0  # sections nest (verify inside the loop); time only the outermost
        self.muted = False  # inside `to_host`: its reads are one synchronization, counted once

    def wrap(self, name: str, function):
        def timed(*args, **kwargs):
            if self.depth:
                return function(*args, **kwargs)
            self.depth += 1
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
                self.calls[name] += 1
                self.depth -= 1
        return timed

    def count_sync(self, method: str, original):
        clocks = self

        def counted(tensor, *args, **kwargs):
            if clocks.muted:
                return original(tensor, *args, **kwargs)
            frame = sys._getframe(1)
            while frame is not None and not frame.f_code.co_filename.startswith(SPECNB_ROOT):
                frame = frame.f_back
            if frame is not None and not frame.f_code.co_filename.endswith("overhead.py"):
                where = Path(frame.f_code.co_filename).relative_to(Path(SPECNB_ROOT).parent)
                clocks.syncs[f"{where}:{frame.f_lineno} {frame.f_code.co_name} .{method}"] += 1
            return original(tensor, *args, **kwargs)
        return counted

    def count_host_reads(self, to_host):
        """`to_host` copies every tensor, then waits once: one sync, whatever it reads."""
        def counted(**tensors):
            self.syncs["specnb/core/host.py to_host (one wait for all its tensors)"] += 1
            self.muted = True
            try:
                return to_host(**tensors)
            finally:
                self.muted = False
        return counted


@contextlib.contextmanager
def instrumented(drafter, count_syncs: bool):
    """Wrap the loop's callables in clocks (and, if asked, tensor reads in counters: that adds
    time of its own to every iteration, so timed runs do not count) for the duration."""
    clocks = Clocks()
    speculative_module = sys.modules[speculate.__module__]  # the loop's module: its globals
    run_module = sys.modules[Run.__module__]
    targets = [  # (owner, attribute, section)
        (Run, "draft_budget", "budget"), (Run, "read_step", "read"), (Run, "advance", "state"),
        (Run, "drafter_step", "step"),
        (Run, "drop_finished", "drop"), (BatchOutput, "extend", "emit"),
        (BatchedCachedLM, "rollback", "rollback"),
        (speculative_module, "logits_to_probs", "probs"),
        (speculative_module, "greedy_ids", "probs"),  # greedy: the argmax ids instead of laws
        (speculative_module, "verify_drafts", "verify"),
        (speculative_module, "verify_greedy", "verify"),
    ] + [(kind, name, name) for kind in {type(drafter), NoDrafter} for name in ("propose", "update")]
    # The target's forward: the wrapper's own work, told apart from the model by TimedModel's log.
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in targets]
    forward = BatchedCachedLM.forward

    try:
        for owner, name, section in targets:
            setattr(owner, name, clocks.wrap(section, getattr(owner, name)))
        BatchedCachedLM.forward = clocks.wrap("forward", forward)
        for method in SYNC_METHODS if count_syncs else ():
            originals.append((torch.Tensor, method, getattr(torch.Tensor, method)))
            setattr(torch.Tensor, method, clocks.count_sync(method, getattr(torch.Tensor, method)))
        if count_syncs:
            originals.append((run_module, "to_host", run_module.to_host))
            run_module.to_host = clocks.count_host_reads(run_module.to_host)
        yield clocks
    finally:
        BatchedCachedLM.forward = forward
        for owner, name, original in reversed(originals):
            setattr(owner, name, original)


def profile(target, drafter, prompts: list, *, gamma: int, max_new_tokens: int,
            count_syncs: bool = False, label: str | None = None) -> dict:
    """One method (γ = 0: our autoregressive loop) over `prompts`: ms per iteration by section,
    or (`count_syncs`) host syncs per iteration by call site. `label` names the method in the
    record (default: 'autoregressive' or 'γ=<gamma>')."""
    iterations, wall, model, draft_model, sections, syncs = 0, 0.0, 0.0, 0.0, \
        collections.Counter(), collections.Counter()
    for ids in prompts:
        with instrumented(drafter, count_syncs) as clocks:
            start = time.perf_counter()
            if gamma == 0:
                result = autoregressive(target, ids, max_new_tokens=max_new_tokens)
            else:
                result = speculative(target, drafter, ids, gamma=gamma,
                                     max_new_tokens=max_new_tokens)
            wall += time.perf_counter() - start
        stats = result.stats
        iterations += stats.iterations
        model += stats.target_s
        draft_model += stats.draft_s
        sections.update(clocks.seconds)
        syncs.update(clocks.syncs)
    # Sections that contain model forwards report their own work only.
    sections["forward"] -= model
    sections["propose"] -= draft_model
    per_iteration = {name: 1000 * s / iterations for name, s in sorted(sections.items())}
    overhead = 1000 * (wall - model - draft_model) / iterations
    per_iteration["other"] = overhead - sum(per_iteration.values())
    if label is None:
        label = "autoregressive" if gamma == 0 else f"γ={gamma}"
    return {"method": label, "gamma": gamma, "iterations": iterations,
            "target_forward_ms": 1000 * model / iterations,
            "draft_ms": 1000 * draft_model / iterations,
            "overhead_ms": overhead, "sections_ms": per_iteration,
            "syncs_per_iteration": {site: n / iterations for site, n in syncs.most_common()}}


def format_report(record: dict) -> str:
    lines = [f"{record['cpu']['name']} [{record['cpu']['isa']}], {record['threads']} threads; "
             f"ms per iteration (the median of {record['repeats']} runs)"]
    for run in record["runs"]:
        name = run.get("method") or (  # records before --default had no "method"
            "autoregressive" if run["gamma"] == 0 else f"γ={run['gamma']}")
        parts = ", ".join(f"{k} {v:.2f}" for k, v in run["sections_ms"].items() if abs(v) >= 0.05)
        lines.append(f"  {name}: target {run['target_forward_ms']:.1f}, draft "
                     f"{run['draft_ms']:.1f}, overhead {run['overhead_ms']:.2f} ({parts}); "
                     f"{sum(run['syncs_per_iteration'].values()):.1f} host syncs")
        for site, n in run["syncs_per_iteration"].items():
            lines.append(f"{'':18}{n:5.2f}  {site}")
    return "\n".join(lines)


def measure(target, drafter, prompts: list, *, gamma: int, max_new_tokens: int,
            repeats: int, label: str | None = None) -> dict:
    """The timed repeat whose overhead is the median (its sections kept together), with every
    repeat's overhead, and the host syncs of one more, counted, run."""
    runs = sorted((profile(target, drafter, prompts, gamma=gamma, max_new_tokens=max_new_tokens,
                           label=label) for _ in range(repeats)), key=lambda r: r["overhead_ms"])
    chosen = dict(runs[len(runs) // 2])
    chosen["overhead_ms_all"] = [round(r["overhead_ms"], 3) for r in runs]
    chosen["syncs_per_iteration"] = profile(target, drafter, prompts, gamma=gamma,
                                            max_new_tokens=max_new_tokens,
                                            count_syncs=True)["syncs_per_iteration"]
    return chosen


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m specnb.bench.overhead",
                                     description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--pair", default="embedded", help="a load_pair name")
    parser.add_argument("--gammas", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--prompts", type=int, default=2, help="open-ended eval prompts")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--default", action="store_true",
                        help="also the shape `speculative` drafts without γ on this machine (the "
                             "pair's recommended chain or tree, e.g. the embedded head's trimmed "
                             "tree)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    for name in ("prompts", "max_new_tokens", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if any(g < 1 for g in args.gammas):
        parser.error(f"--gammas must be >= 1 (autoregressive is always run), got {args.gammas}")
    if args.out is not None:
        check_out_file(parser, "--out", args.out)
    target, drafter, tokenizer = load_pair(args.pair)
    if not isinstance(drafter, Drafter):
        drafter = as_drafter(target, drafter)
    methods = [(drafter, g, None) for g in [0] + args.gammas]  # (drafter, γ, label)
    if args.default:
        if not hasattr(drafter, "recommended"):
            parser.error(f"--default: the pair {args.pair!r} drafts with "
                         f"{type(drafter).__name__}, which has no recommended shape")
        try:
            chosen, depth = drafter.recommended(0.0)
        except ValueError as error:
            parser.error(f"--default: {error}")
        methods.append((chosen, depth, f"default: {chosen.shape_text(depth)}"))
    prompts = [chat_ids(tokenizer, p["prompt"])
               for p in load_prompts("eval", group="open-ended")[:args.prompts]]
    for each, gamma, _ in methods[1:]:  # warm-up, every drafter (the default may be a new one)
        speculative(target, each, prompts[0], gamma=gamma, max_new_tokens=8)
    runs = [measure(target, each, prompts, gamma=gamma, max_new_tokens=args.max_new_tokens,
                    repeats=args.repeats, label=label)
            for each, gamma, label in tqdm(methods, desc="methods")]
    cpu = cpu_identity()
    record = {"cpu": cpu, "threads": torch.get_num_threads(), "pair": args.pair,
              "torch": torch.__version__, "transformers": transformers.__version__,
              "python": platform.python_version(),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "command": command_line("python -m specnb.bench.overhead", argv),
              "prompts": args.prompts, "max_new_tokens": args.max_new_tokens,
              "repeats": args.repeats, "runs": runs}
    print(format_report(record))
    out = args.out or DATA_DIR / "results" / f"overhead-{cpu['tag']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out}")
    return record


if __name__ == "__main__":
    main()
