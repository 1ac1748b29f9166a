"""`python -m specnb` (what `make run` runs): every method on the embedded default model.

Speculative decoding with the default drafter (the feature head of data/head) and with the
distilled draft model, prompt lookup and Jacobi, against autoregressive decoding: each prompt
alone first (a table per prompt and method, with speedups), then the default pair against
autoregressive decoding in interleaved timed rounds (the spread of a speedup, not one run),
then all prompts as one batch.
"""

import argparse
import statistics

import torch
from tqdm.auto import tqdm

from .bench.live import interleaved_clock
from .methods import autoregressive, jacobi, prompt_lookup, speculative

from .models.data import load_prompts
from .models.loading import EMBEDDED_NAME, chat_ids, default_device, embedded_checkpoint
from .models.fast_path import quiet_machine
from .models.pairs import load_embedded_draft, load_pair
from .theory import estimate_alpha


def calibrate() -> None:
    """Settle what "auto" chooses on this CPU at this thread count (the linears' path of the
    target and of the distilled draft, the head's tree shape), trusting that nothing else runs:
    a calibration whose rounds disagree is otherwise not cached and taken again at the next
    load, on the dense path meanwhile, and a test run's parallel workers would never settle it."""
    if default_device().type != "cpu":
        return
    with quiet_machine():
        target, head, _ = load_pair()
        drafter, gamma = head.recommended()
        # The draft model calibrates for itself (None: as load_pair, $SPECNB_CPU_PATH or
        # "auto"); the target is loaded already.
        draft = load_embedded_draft(target.device, target.dtype, cpu_path=None)
    print(f"calibrated for {torch.get_num_threads()} thread(s): {target.specnb_cpu_path} "
          f"linears, the head drafts {drafter.shape_text(gamma)}, the distilled draft runs "
          f"{draft.specnb_cpu_path} linears")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m specnb", description=__doc__)
    parser.add_argument("--prompts", type=int, default=4, help="first N prompts of eval.jsonl")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--gamma", type=int, default=None,
                        help="drafts per iteration of the feature head, as a chain (default: "
                             "the chain or token tree measured fastest on this machine)")
    parser.add_argument("--draft-gamma", type=int, default=2,
                        help="drafts per iteration of the distilled draft model")
    parser.add_argument("--num-pred", type=int, default=8, help="prompt-lookup draft length")
    parser.add_argument("--block", type=int, default=8, help="Jacobi block size")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed rounds per prompt of autoregressive decoding and the default "
                             "pair, interleaved, for the spread of its speedup (0: skip)")
    parser.add_argument("--prepare", action="store_true",
                        help="only fetch and cache the embedded model (the set-up does this)")
    parser.add_argument("--calibrate", action="store_true",
                        help="only prepare, then settle this CPU's choices for the current "
                             "thread count while nothing else runs (make test does this)")
    args = parser.parse_args(argv)
    if args.prepare or args.calibrate:
        print(f"embedded model ready in {embedded_checkpoint()}")
        if args.calibrate:
            calibrate()
        return

    if args.gamma is not None and args.gamma < 1:
        parser.error(f"--gamma must be >= 1, got {args.gamma}")
    if args.repeats < 0:
        parser.error(f"--repeats must be >= 0, got {args.repeats}")
    target, head, tokenizer = load_pair()
    # Without --gamma the head drafts the shape `speculative(..., gamma=None)` would: measured
    # here at first use (a few seconds), cached.
    drafter, head_gamma = (head, args.gamma) if args.gamma is not None else head.recommended()
    shape = drafter.shape_text(head_gamma)
    draft = load_embedded_draft(target.device, target.dtype)
    head_params = sum(p.numel() for p in head.head.parameters()) / 1e6
    draft_params = sum(p.numel() for p in draft.parameters()) / 1e6
    print(f"target: {EMBEDDED_NAME} on {target.device}\n"
          f"head:   the feature-reading draft head, data/head ({head_params:.1f}M parameters, "
          f"reads layers {list(head.feature_layers)}, {head.head.config.draft_vocab_size}-token "
          f"draft vocabulary)\n"
          f"draft:  the distilled draft model, data/draft ({draft_params:.1f}M parameters, "
          f"{draft.config.num_hidden_layers} layers, width {draft.config.hidden_size})\n"
          f"greedy, {args.max_new_tokens} new tokens, head {shape}"
          f"{'' if args.gamma is not None else ' (measured fastest here)'}, draft γ = "
          f"{args.draft_gamma}, num_pred = {args.num_pred}, block = {args.block}\n")

    common = {"max_new_tokens": args.max_new_tokens}
    runs = {  # each takes `trace`: the table's runs record one (for α̂), the batched ones do not
        "autoregressive": lambda ids, trace=False: autoregressive(target, ids, **common,
                                                                  trace=trace),
        f"feature head {shape}": lambda ids, trace=False: speculative(
            target, drafter, ids, gamma=head_gamma, **common, trace=trace),
        f"distilled draft γ={args.draft_gamma}": lambda ids, trace=False: speculative(
            target, draft, ids, gamma=args.draft_gamma, **common, trace=trace),
        f"prompt lookup k={args.num_pred}": lambda ids, trace=False: prompt_lookup(
            target, ids, num_pred=args.num_pred, **common, trace=trace),
        f"jacobi block={args.block}": lambda ids, trace=False: jacobi(
            target, ids, block=args.block, **common, trace=trace),
    }
    prompts = load_prompts("eval")[:args.prompts]
    batch = [chat_ids(tokenizer, p["prompt"], device=target.device) for p in prompts]
    rows = []
    for prompt, ids in zip(tqdm(prompts, desc="prompts"), batch):
        reference = None
        for name, run in runs.items():
            result = run(ids, trace=True)
            reference = reference or result.tokens[0]
            rows.append((prompt["id"], prompt["group"], name, result.stats,
                         result.tokens[0] == reference, estimate_alpha(result)))
    print_table(rows)
    if args.repeats:
        print_clock(target, f"feature head {shape}", (drafter, head_gamma), prompts, batch,
                    args.repeats, args.max_new_tokens)
    print_batched(runs, batch, rows)


def print_clock(target, name, pair, prompts, batch, repeats: int, max_new_tokens: int) -> None:
    """The default pair against autoregressive decoding, `repeats` rounds per prompt, each round
    running both once (interleaved, so a busy moment of the machine hits both); the table's runs
    were the warm-up. A round's speedup is its autoregressive time over the pair's."""
    print(f"\nthe default pair against autoregressive decoding, {repeats} interleaved rounds per "
          f"prompt (×AR: median over rounds, min–max):")
    rounds = [[0.0, 0.0] for _ in range(repeats)]
    for prompt, ids in zip(tqdm(prompts, desc="timed rounds"), batch):
        clock = interleaved_clock(target, {name: pair}, ids, repeats=repeats, warmup=0,
                                  max_new_tokens=max_new_tokens)
        speedups = clock["speedups"][name]
        for i, (plain, ours) in enumerate(zip(clock["seconds"]["autoregressive"],
                                              clock["seconds"][name])):
            rounds[i][0] += plain
            rounds[i][1] += ours
        tqdm.write(f"  {prompt['id']:<20} {name}: {statistics.median(speedups):.2f}× "
                   f"({min(speedups):.2f}–{max(speedups):.2f})"
                   f"{'' if clock['identical'][name] else ', OUTPUT DIFFERS FROM AR'}")
    totals = [plain / ours for plain, ours in rounds]
    print(f"  {'all prompts':<20} {name}: {statistics.median(totals):.2f}× "
          f"({min(totals):.2f}–{max(totals):.2f}; total autoregressive time over the pair's, "
          f"per round)")


def print_batched(runs, batch, rows) -> None:
    """The same prompts as one ragged batch: throughput, and each row against its lone run."""
    print(f"\nthe same {len(batch)} prompts as one batch (ragged lengths, rows at their own pace):")
    alone = {name: [] for name in runs}
    for _, _, name, stats, _, _ in rows:
        alone[name].append(stats.wall_s)
    reference = None
    width = max(len(name) for name in runs)
    for name, run in runs.items():
        if name.startswith("jacobi"):  # Jacobi decodes one prompt at a time
            continue
        result = run(batch)
        reference = reference or result.tokens
        same = sum(a == b for a, b in zip(result.tokens, reference))
        rate = result.stats.new_tokens / result.stats.wall_s
        print(f"  {name:<{width}} {rate:6.1f} tok/s batched "
              f"vs {result.stats.new_tokens / sum(alone[name]):6.1f} one prompt at a time; "
              f"rows = AR greedy: {same}/{len(batch)}")


def print_table(rows) -> None:
    width = max(len(name) for _, _, name, _, _, _ in rows)  # a tree's name is long
    header = (f"{'prompt':<20} {'group':<15} {'method':<{width}} {'tokens':>6} {'fwd':>5} "
              f"{'tok/fwd':>7} {'yield':>6} {'α̂':>6} {'wall s':>7} {'×AR':>5}  = AR greedy")
    print(header + "\n" + "-" * len(header))
    baseline = {}
    for prompt_id, group, name, stats, same, alpha_hat in rows:
        baseline.setdefault(prompt_id, stats.wall_s)  # autoregressive runs first
        accept = "-" if not stats.drafted else f"{stats.draft_yield:.2f}"
        alpha = "-" if alpha_hat != alpha_hat else f"{alpha_hat:.2f}"  # NaN: nothing checked
        print(f"{prompt_id:<20} {group:<15} {name:<{width}} {stats.new_tokens:>6} "
              f"{stats.target_forwards:>5} {stats.tokens_per_forward:>7.2f} {accept:>6} {alpha:>6} "
              f"{stats.wall_s:>7.2f} {baseline[prompt_id] / stats.wall_s:>5.2f}  "
              f"{'yes' if same else 'NO'}")
    print("yield (draft yield): accepted / drafted, unchecked drafts included; α̂: mean Σ min(p, q) "
          "over the checked drafts, the chance one draft is accepted; ×AR: speedup over autoregressive on that prompt "
          "(one run each: a demonstration, not a benchmark; see python -m specnb.bench)")


if __name__ == "__main__":
    main()
