"""`python -m specnb.bench.batch`: batched throughput against batch size, in one process.

For each batch size B, a batch of B prompts runs through our batched autoregressive,
speculative and prompt-lookup loops and through transformers' batched greedy `generate`
(left-padded), with warm-up and repeats (CUDA events on GPU). Two ways to fill the batch
(`--mix`): `mixed`, the first B eval prompts (of `--group`; cycled past the end), and `same`,
B copies of one prompt (`--prompt`). Batch size and prompt mix are separate causes: with copies,
every row accepts what the single prompt accepts, so only the cost of the wider forward changes
with B; a mixed batch also changes what the rows accept.

Throughput is new tokens over the whole batch per second; every greedy row is checked against
our batched autoregressive row. Each row also records its own tokens per target forward (from the
trace) and the run's mean ms per decoding forward. Separately, it times one target forward of
B rows × 1 token and B rows × (γ+1) (and num_pred+1) tokens, keeping every repeat: the ratio is
what checking the drafts costs, and it grows with B as the forward stops being memory-bound.

It does not tune anything; settings go into the JSON next to a plot. The forwards are timed
first, so Ctrl-C (SIGINT) during the sweep still writes them with the batch sizes that finished,
marked "interrupted" (exit 130).
"""

import argparse
import datetime
import json
import platform
import statistics
import sys
from pathlib import Path

import torch
import transformers
from tqdm.auto import tqdm

from ..core.args import command_line
from ..core.batch_kv import BatchedCachedLM
from ..core.files import sigint_ignored, write_atomic
from ..drafters.model import pad_token_id
from ..methods import autoregressive, prompt_lookup, speculative
from ..methods.inputs import eos_token_ids
from ..methods.results import cut_at_eos
from ..models.data import DATA_DIR, GROUPS, load_prompts
from ..models.fast_path import cpu_identity
from ..models.loading import chat_ids
from ..models.pairs import load_pair
from ..theory import estimate_alpha
from .compare import DTYPES, timed

METHODS = ["autoregressive", "speculative", "prompt_lookup", "hf"]


MIXES = ["mixed", "same"]


def batch_of_prompts(tokenizer, batch: int, device, group=None, mix="mixed",
                     prompt_id=None) -> list:
    """`batch` chat-formatted eval prompts as `[1, L]` tensors.

    mix="mixed": the first `batch` prompts (of `group`; cycled). mix="same": `batch` copies of
    the prompt `prompt_id` (default: the first of `group`), so every row decodes the same text.
    """
    prompts = load_prompts("eval", group)
    if mix == "same":
        if prompt_id is not None:
            chosen = [p for p in load_prompts("eval") if p["id"] == prompt_id]
            if not chosen:
                raise ValueError(f"prompt_id {prompt_id!r} is not an eval prompt id "
                                 f"(see data/prompts/eval.jsonl)")
            prompts = chosen
        prompts = prompts[:1]
    elif mix != "mixed":
        raise ValueError(f"mix must be one of {MIXES}, got {mix!r}")
    return [chat_ids(tokenizer, prompts[i % len(prompts)]["prompt"], device=device)
            for i in range(batch)]


def per_row_counts(result) -> dict:
    """Per row: new tokens, target forwards it took part in, and their ratio; the mean ms of one
    decoding target forward, the ms of the forward that filled the cache with the prompts, and
    the run's wall time (prompt forward + decoding forwards + the work between forwards).

    Example: rows of 8 and 3 tokens, in 4 and 3 steps -> tokens per forward [2.0, 1.0].
    """
    forwards = [0] * len(result.tokens)
    step_seconds = {}
    for it in result.trace:
        forwards[it.row] += 1
        step_seconds[it.step] = it.target_s  # shared by the rows of one step
    tokens = [len(t) for t in result.tokens]
    decoding_s = sum(step_seconds.values())
    return {"row_tokens": tokens, "row_forwards": forwards,
            "row_tokens_per_forward": [t / f if f else float("nan")
                                       for t, f in zip(tokens, forwards)],
            "ms_per_forward": 1e3 * decoding_s / max(1, len(step_seconds)),
            "prompt_forward_ms": 1e3 * max(0.0, result.stats.target_s - decoding_s),
            "wall_s": result.stats.wall_s}


def hf_batched_generate(target, prompts, max_new_tokens) -> list:
    """transformers' batched greedy generate (left padding); new tokens per row, cut at EOS."""
    width = max(p.shape[1] for p in prompts)
    pad = pad_token_id(target)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long, device=prompts[0].device)
    mask = torch.zeros_like(ids)
    for row, prompt in enumerate(prompts):
        ids[row, width - prompt.shape[1]:], mask[row, width - prompt.shape[1]:] = prompt[0], 1
    out = target.generate(ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                          do_sample=False, pad_token_id=pad)[:, width:].tolist()
    eos = eos_token_ids(target)
    return [cut_at_eos(row, eos) for row in out]


def measure_batch_forward(model, batch_sizes, tokens_per_row, prefix_len=128, repeats=7) -> dict:
    """Ms of one forward of B rows × k new tokens after a cached prefix, per (B, k).

    Keeps every repeat in `samples_ms["Bxk"]` and their median in `median_ms`. Repeat i times
    every k in turn, so the repeats of two widths are paired: divide them one by one for a ratio.
    """
    generator = torch.Generator().manual_seed(0)
    result = {"batch_sizes": list(batch_sizes), "tokens_per_row": list(tokens_per_row),
              "prefix_len": prefix_len, "repeats": repeats, "median_ms": {}, "samples_ms": {}}
    for batch in batch_sizes:
        lm = BatchedCachedLM(model)
        prefix = torch.randint(0, lm.vocab_size, (batch, prefix_len), generator=generator)
        lm.prefill(prefix.tolist())
        new_ids = {k: torch.randint(0, lm.vocab_size, (batch, k), generator=generator).to(lm.device)
                   for k in tokens_per_row}
        samples = {k: [] for k in tokens_per_row}
        for _ in range(repeats + 1):  # the first round is a warm-up
            for k in tokens_per_row:
                lm.forward(new_ids[k], keep=k)
                samples[k].append(lm.log.seconds[-1] * 1e3)
                lm.rollback(torch.full((batch,), k, device=lm.device))
        for k in tokens_per_row:
            result["samples_ms"][f"{batch}x{k}"] = samples[k][1:]
            result["median_ms"][f"{batch}x{k}"] = statistics.median(samples[k][1:])
    return result


def run(args, pair=None, keep_partial: bool = False) -> dict:
    """The sweep of the command's `args`; `pair`: an already loaded (target, draft, tokenizer).
    `keep_partial`: on Ctrl-C (KeyboardInterrupt) after a batch size finished, return the
    finished ones' rows, marked "interrupted" (the command does this; a caller that does not ask
    gets the interrupt)."""
    target, draft, tokenizer = pair if pair is not None else load_pair(
        device=args.device, dtype=DTYPES[args.dtype] if args.dtype else None)
    device = target.device
    common = {"max_new_tokens": args.max_new_tokens}
    methods = {  # our autoregressive comes first: it is every row's reference
        "ours autoregressive": lambda p, trace=False: autoregressive(target, p, **common,
                                                                     trace=trace),
        f"ours speculative γ={args.gamma}": lambda p, trace=False: speculative(
            target, draft, p, gamma=args.gamma, **common, trace=trace),
        f"ours prompt lookup k={args.num_pred}": lambda p, trace=False: prompt_lookup(
            target, p, num_pred=args.num_pred, **common, trace=trace),
        "HF generate": lambda p, trace=False: hf_batched_generate(target, p, args.max_new_tokens),
    }
    chosen = {"autoregressive", *args.methods}
    methods = {name: f for (name, f), key in zip(methods.items(), METHODS) if key in chosen}
    widths = sorted({1, args.gamma + 1} | ({args.num_pred + 1} if "prompt_lookup" in chosen
                                           else set()))
    # The forwards first (a second on a GPU): an interrupted sweep still has them.
    forward = measure_batch_forward(target, args.batch_sizes, widths,
                                    repeats=max(5, getattr(args, "forward_repeats", 7)))
    rows = []
    mixes = getattr(args, "mix", None) or ["mixed"]
    bar = tqdm(total=len(mixes) * len(args.batch_sizes) * len(methods), desc="bench_batch")
    try:
        for mix in mixes:
            for batch in args.batch_sizes:
                prompts = batch_of_prompts(tokenizer, batch, device, args.group, mix,
                                           getattr(args, "prompt", None))
                rows += time_batch(args, methods, prompts, mix, batch, device, bar)
    except KeyboardInterrupt:  # Ctrl-C, or scripts/gpu_check.py at its budget: keep what finished
        if not (keep_partial and rows):
            raise
    finally:
        bar.close()
    done = len({(row["mix"], row["batch"]) for row in rows})
    base = {(r["mix"], r["batch"]): r["seconds"] / r["new_tokens"] for r in rows
            if r["method"] == "ours autoregressive"}
    for r in rows:
        r["tokens_per_s"] = r["new_tokens"] / r["seconds"]
        r["speedup_vs_ours_ar"] = base[r["mix"], r["batch"]] / (r["seconds"] / r["new_tokens"])
    total = len(mixes) * len(args.batch_sizes)
    cpu = cpu_identity()  # the host CPU, named in every record (also beside a GPU)
    return {"settings": {k: v for k, v in vars(args).items() if k != "out"},
            "device": torch.cuda.get_device_name(device) if device.type == "cuda"
            else f"CPU {cpu['name']} [{cpu['isa']}], {torch.get_num_threads()} threads",
            "cpu": cpu,
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "python": platform.python_version()},
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "dtype": str(target.dtype), "rows": rows, "batch_forward": forward,
            **({} if done == total else
               {"interrupted": f"stopped after {done} of {total} (mix, batch size) settings"})}


def time_batch(args, methods: dict, prompts, mix: str, batch: int, device, bar) -> list:
    """Every method on one batch: warm-ups, then repeats in which every method runs in turn; a
    row per method, its rows checked against the first method's (ours autoregressive)."""
    # The per-row counts and α̂ come from an untimed traced run: the last warm-up, or, without
    # warm-ups, one run after the timed repeats, and only for our loops (transformers' batched
    # generate has no trace). The timed runs are plain calls, which record none.
    traced = {}
    for name, function in methods.items():
        for _ in range(max(args.warmup - 1, 0)):
            function(prompts)
        if args.warmup:
            traced[name] = function(prompts, trace=True)
    # Repeat i runs every method in turn, so a slow moment of a shared machine hits all of
    # them alike: ratios of repeat i are paired.
    samples, results = {name: [] for name in methods}, {}
    for _ in range(args.repeats):
        for name, function in methods.items():
            results[name], seconds, _ = timed(lambda: function(prompts), 1, device)
            samples[name].append(seconds)
    for name, function in methods.items():
        if name not in traced and not isinstance(results[name], list):
            traced[name] = function(prompts, trace=True)
    rows, reference = [], None
    for name, times in samples.items():
        result = results[name]
        tokens = result if isinstance(result, list) else result.tokens
        reference = reference if reference is not None else tokens
        row = {"method": name, "mix": mix, "batch": batch, "seconds": statistics.median(times),
               "spread": max(times) - min(times), "seconds_samples": times,
               "new_tokens": sum(len(t) for t in tokens),
               "identical_rows": sum(a == b for a, b in zip(tokens, reference))}
        if not isinstance(result, list):
            stats = result.stats
            row.update(target_forwards=stats.target_forwards, drafted=stats.drafted,
                       accepted=stats.accepted, **per_row_counts(traced[name]))
            row["wall_s"] = stats.wall_s  # the timed run's, not the traced one's
            if stats.drafted:
                row["alpha_hat"] = estimate_alpha(traced[name])
        rows.append(row)
        bar.update()
    return rows


def row_mix(row: dict) -> str:
    """How the row's batch was filled; records written before `--mix` existed were "mixed"."""
    return row.get("mix", "mixed")


def paired_speedup(row: dict, base: dict) -> float:
    """Speedup of `row` over `base` (autoregressive, same mix and B): the median over repeats
    of (base seconds per token) / (row seconds per token), repeat i against repeat i; records
    without per-repeat timings give their stored ratio of medians."""
    if "seconds_samples" not in row or "seconds_samples" not in base:
        return row["speedup_vs_ours_ar"]
    return statistics.median((b / base["new_tokens"]) / (r / row["new_tokens"])
                             for r, b in zip(row["seconds_samples"], base["seconds_samples"]))


def format_table(record: dict) -> str:
    """One line per (mix, B, method).

    × ours AR: `paired_speedup`, the median of the paired repeats where they were kept;
    tok/fwd: new tokens per target forward per row (the batch's tokens / forwards / B);
    row tok/fwd: the mean over rows of each row's own tokens / the forwards it ran in (records
    with the per-row counts only); yield: draft yield, accepted / drafted (drafts after a first
    rejection count as not accepted); α̂: mean Σ min(p, q) over the checked drafts.
    """
    rows = record["rows"]
    bases = {(row_mix(r), r["batch"]): r for r in rows if r["method"] == "ours autoregressive"}
    show_mix = len({row_mix(r) for r in rows}) > 1 or "mix" in rows[0]
    lines = [("mix    " if show_mix else "") +
             f"{'B':>3}  {'method':<28} {'tok/s':>8} {'× ours AR':>9} {'tok/fwd':>8} "
             f"{'row tok/fwd':>11} {'yield':>6} {'α̂':>5} {'identical':>9}"]
    for r in rows:
        forwards = r.get("target_forwards")
        per_forward = f"{r['new_tokens'] / forwards / r['batch']:8.2f}" if forwards else f"{'-':>8}"
        per_row = r.get("row_tokens_per_forward")
        per_row = f"{statistics.mean(per_row):11.2f}" if per_row else f"{'-':>11}"
        accept = f"{r['accepted'] / r['drafted']:6.2f}" if r.get("drafted") else f"{'-':>6}"
        alpha = f"{r['alpha_hat']:5.2f}" if "alpha_hat" in r else f"{'-':>5}"
        lines.append((f"{row_mix(r):<7}" if show_mix else "") +
                     f"{r['batch']:>3}  {r['method']:<28} {r['tokens_per_s']:8.1f} "
                     f"{paired_speedup(r, bases[row_mix(r), r['batch']]):9.2f} {per_forward} "
                     f"{per_row} {accept} {alpha} "
                     f"{r['identical_rows']:>4}/{r['batch']:<4}")
    forward = record["batch_forward"]
    samples, median = forward.get("samples_ms", {}), forward["median_ms"]

    def ratio(b, k):  # the median of the paired repeats where they were kept
        if f"{b}x{k}" in samples:
            return statistics.median(m / o for m, o in zip(samples[f"{b}x{k}"], samples[f"{b}x1"]))
        return median[f"{b}x{k}"] / median[f"{b}x1"]

    lines.append("")
    for k in forward["tokens_per_row"][1:]:
        lines.append(f"one target forward, B rows × {k} tokens over B rows × 1 token: " + ", ".join(
            f"B={b}: {ratio(b, k):.2f}×" for b in forward["batch_sizes"]))
    return "\n".join(lines)


def main(argv=None) -> dict:
    from ..viz.batching import plot_batch_throughput  # only for the PNG: measuring needs no viz

    parser = argparse.ArgumentParser(prog="python -m specnb.bench.batch",
                                     description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--num-pred", type=int, default=8, help="prompt lookup draft length")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--group", choices=GROUPS, default=None, help="eval prompts of one group")
    parser.add_argument("--mix", nargs="+", choices=MIXES, default=["mixed"],
                        help="mixed: the first B prompts; same: B copies of one prompt")
    parser.add_argument("--prompt", default=None,
                        help="the prompt id copied by --mix same (default: the first of --group)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=METHODS,
                        help="which to run (our autoregressive always runs: it is the reference)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--forward-repeats", type=int, default=7,
                        help="repeats of each single-forward timing (at least 5)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--device", default=None, help="cuda when available, else cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default=None)
    parser.add_argument("--out", type=Path, default=DATA_DIR / "results" / "bench-batch.json")
    args = parser.parse_args(argv)
    if min(args.batch_sizes) < 1 or args.gamma < 1 or args.repeats < 1 or args.warmup < 0:
        parser.error("batch sizes, --gamma and --repeats must be >= 1, --warmup >= 0")
    record = run(args, keep_partial=True)
    record["command"] = command_line("python -m specnb.bench.batch", argv)
    with sigint_ignored():  # what was measured is written whole, a second Ctrl-C or not
        write_atomic(args.out, json.dumps(record, indent=1).encode())
        plot_batch_throughput(record).savefig(args.out.with_suffix(".png"), dpi=110,
                                              bbox_inches="tight")
    if "interrupted" in record:  # said first: stdout may be a pipe that Ctrl-C closed too
        print(f"interrupted: {record['interrupted']}", file=sys.stderr)
    print(format_table(record))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    if "interrupted" in record:  # what finished is written; the exit code says it is partial
        raise SystemExit(130)
    return record


if __name__ == "__main__":
    main()
