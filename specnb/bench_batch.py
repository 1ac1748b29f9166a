"""`python -m specnb.bench_batch`: batched throughput against batch size, in one process.

For each batch size B, the first B eval prompts (cycled past 24) run through our batched
autoregressive, speculative and prompt-lookup loops and through transformers' batched greedy
`generate` (left-padded), with warm-up and repeats (CUDA events on GPU). Throughput is new tokens
over the whole batch per second; every greedy row is checked against our batched autoregressive
row. It also times one target forward of B rows × 1 token and B rows × (γ+1) tokens: the ratio
is what verifying γ drafts costs, and it grows with B as the forward stops being memory-bound.

It does not tune anything; settings go into the JSON next to a plot.
"""

import argparse
import datetime
import json
import platform
import statistics
from pathlib import Path

import torch
import transformers
from tqdm.auto import tqdm

from . import autoregressive, prompt_lookup, speculative
from .bench import DTYPES, timed
from .core.batch_kv import BatchedCachedLM
from .data import DATA_DIR, GROUPS, load_prompts
from .models import chat_ids
from .drafters.model import pad_token_id
from .methods.inputs import eos_token_ids
from .methods.results import cut_at_eos
from .pairs import load_pair

METHODS = ["autoregressive", "speculative", "prompt_lookup", "hf"]


def batch_of_prompts(tokenizer, batch: int, device, group=None) -> list:
    """The first `batch` eval prompts (of `group`; cycled), chat-formatted, as `[1, L]` tensors."""
    prompts = load_prompts("eval", group)
    return [chat_ids(tokenizer, prompts[i % len(prompts)]["prompt"], device=device)
            for i in range(batch)]


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
    """Median ms of one forward of B rows × k new tokens after a cached prefix, per (B, k)."""
    generator = torch.Generator().manual_seed(0)
    result = {"batch_sizes": list(batch_sizes), "tokens_per_row": list(tokens_per_row),
              "prefix_len": prefix_len, "median_ms": {}}
    for batch in batch_sizes:
        lm = BatchedCachedLM(model)
        prefix = torch.randint(0, lm.vocab_size, (batch, prefix_len), generator=generator)
        lm.prefill(prefix.tolist())
        for k in tokens_per_row:
            new_ids = torch.randint(0, lm.vocab_size, (batch, k), generator=generator)
            new_ids = new_ids.to(lm.device)
            samples = []
            for _ in range(repeats + 1):  # the first is a warm-up
                lm.forward(new_ids, keep=k)
                samples.append(lm.log.seconds[-1] * 1e3)
                lm.rollback(torch.full((batch,), k, device=lm.device))
            result["median_ms"][f"{batch}x{k}"] = statistics.median(samples[1:])
    return result


def run(args, pair=None) -> dict:
    target, draft, tokenizer = pair if pair is not None else load_pair(
        device=args.device, dtype=DTYPES[args.dtype] if args.dtype else None)
    device = target.device
    common = {"max_new_tokens": args.max_new_tokens}
    methods = {  # our autoregressive comes first: it is every row's reference
        "ours autoregressive": lambda p: autoregressive(target, p, **common),
        f"ours speculative γ={args.gamma}": lambda p: speculative(target, draft, p,
                                                                  gamma=args.gamma, **common),
        f"ours prompt lookup k={args.num_pred}": lambda p: prompt_lookup(
            target, p, num_pred=args.num_pred, **common),
        "HF generate": lambda p: hf_batched_generate(target, p, args.max_new_tokens),
    }
    chosen = {"autoregressive", *args.methods}
    methods = {name: f for (name, f), key in zip(methods.items(), METHODS) if key in chosen}
    rows = []
    bar = tqdm(total=len(args.batch_sizes) * len(methods), desc="bench_batch")
    for batch in args.batch_sizes:
        prompts = batch_of_prompts(tokenizer, batch, device, args.group)
        reference = None
        for name, function in methods.items():
            for _ in range(args.warmup):
                function(prompts)
            result, seconds, spread = timed(lambda: function(prompts), args.repeats, device)
            tokens = result if isinstance(result, list) else result.tokens
            reference = reference if reference is not None else tokens
            row = {"method": name, "batch": batch, "seconds": seconds, "spread": spread,
                   "new_tokens": sum(len(t) for t in tokens),
                   "identical_rows": sum(a == b for a, b in zip(tokens, reference))}
            if not isinstance(result, list):
                stats = result.stats
                row.update(target_forwards=stats.target_forwards, drafted=stats.drafted,
                           accepted=stats.accepted)
            rows.append(row)
            bar.update()
    bar.close()
    base = {r["batch"]: r["seconds"] / r["new_tokens"] for r in rows
            if r["method"] == "ours autoregressive"}
    for r in rows:
        r["tokens_per_s"] = r["new_tokens"] / r["seconds"]
        r["speedup_vs_ours_ar"] = base[r["batch"]] / (r["seconds"] / r["new_tokens"])
    forward = measure_batch_forward(target, args.batch_sizes, [1, args.gamma + 1])
    return {"settings": {k: v for k, v in vars(args).items() if k != "out"},
            "device": torch.cuda.get_device_name(device) if device.type == "cuda"
            else f"CPU {platform.processor() or platform.machine()}, "
                 f"{torch.get_num_threads()} threads",
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "python": platform.python_version()},
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "dtype": str(target.dtype), "rows": rows, "batch_forward": forward}


def format_table(record: dict) -> str:
    """One line per (B, method); tok/fwd is new tokens per target forward per row."""
    lines = [f"{'B':>3}  {'method':<28} {'tok/s':>8} {'× ours AR':>9} {'tok/fwd':>8} "
             f"{'accept':>7} {'identical':>9}"]
    for r in record["rows"]:
        forwards = r.get("target_forwards")
        per_forward = f"{r['new_tokens'] / forwards / r['batch']:8.2f}" if forwards else f"{'-':>8}"
        accept = f"{r['accepted'] / r['drafted']:7.2f}" if r.get("drafted") else f"{'-':>7}"
        lines.append(f"{r['batch']:>3}  {r['method']:<28} {r['tokens_per_s']:8.1f} "
                     f"{r['speedup_vs_ours_ar']:9.2f} {per_forward} {accept} "
                     f"{r['identical_rows']:>4}/{r['batch']:<4}")
    forward = record["batch_forward"]
    k = forward["tokens_per_row"][-1]
    lines.append(f"\none target forward, B rows × {k} tokens over B rows × 1 token: " + ", ".join(
        f"B={b}: {forward['median_ms'][f'{b}x{k}'] / forward['median_ms'][f'{b}x1']:.2f}×"
        for b in forward["batch_sizes"]))
    return "\n".join(lines)


def main(argv=None) -> dict:
    from .viz.batching import plot_batch_throughput  # only for the PNG: measuring needs no viz

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--num-pred", type=int, default=8, help="prompt lookup draft length")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--group", choices=GROUPS, default=None, help="eval prompts of one group")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=METHODS,
                        help="which to run (our autoregressive always runs: it is the reference)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--device", default=None, help="cuda when available, else cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default=None)
    parser.add_argument("--out", type=Path, default=DATA_DIR / "results" / "bench-batch.json")
    args = parser.parse_args(argv)
    if min(args.batch_sizes) < 1 or args.gamma < 1 or args.repeats < 1 or args.warmup < 0:
        parser.error("batch sizes, --gamma and --repeats must be >= 1, --warmup >= 0")
    record = run(args)
    print(format_table(record))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1))
    plot_batch_throughput(record).savefig(args.out.with_suffix(".png"), dpi=110,
                                          bbox_inches="tight")
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return record


if __name__ == "__main__":
    main()
