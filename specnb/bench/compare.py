"""`python -m specnb.bench`: time every method side by side with transformers, in one process.

Ours: autoregressive, speculative with the distilled draft model (a sweep of γ), speculative
with the feature head (`--head-gammas`; as token trees, `--head-trees`, or EAGLE-2's dynamic
tree, `--head-dynamic`; merged with prompt lookup's branches, `--mixed`; each drafted by the
head's int8 copy too: `--head-int8-gammas`, `--head-int8-trees`, `--head-int8-dynamic`,
`--mixed-int8`; `--trim`: the head's static trees also trimmed each iteration, drafters.trim),
prompt lookup, lookahead (`--lookahead W,N,G`), Jacobi. Peers from
transformers on the same target and prompts: greedy `generate`, `generate(assistant_model=
draft)` with the distilled draft at a constant γ (a like-for-like comparison) and with its
default schedule, and `generate(prompt_lookup_num_tokens=k)`; "×best HF" compares with the
fastest of those peers.
`--acceptance exact typical` runs the drafting methods under each acceptance rule, and
`--schedules fixed heuristic cost-aware` with fixed and dynamic γ (`specnb.methods.schedules`).
`--methods` runs only the methods whose names start with the given prefixes. Each (method,
prompt) is warmed up, then timed `--repeats` times in interleaved rounds (each round times
every method once; CUDA events on GPU); the median is reported with the spread. Ctrl-C (SIGINT)
writes the prompts that finished, marked "interrupted", and exits 130. Greedy outputs
are checked against our autoregressive tokens; speedups are ratios of tokens per second
(sampled answers differ in length) within this one run, against our autoregressive loop, HF
greedy `generate` and each method's HF peer (`PEERS`). Target forwards of the HF peers are
counted with a forward hook. The record also holds the forward latency against tokens per
forward on the same device (`specnb.core.latency`).

It does not tune anything: settings come from the command line and are written with the
results (JSON: device, dtype, versions, date, settings) next to a plot. The notebooks call the
same functions: `run(parse_args([...]), pair=...)`, then `summaries(record)`.
"""

import argparse
import copy
import datetime
import json
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import transformers
from tqdm.auto import tqdm

from ..core.args import check_out_file, command_line
from ..core.files import sigint_ignored, write_atomic
from ..core.latency import measure_forward_latency
from ..core.timed import timed  # notebooks and assignment 05 import it from here too
from ..drafters import FeatureDrafter, MixedDrafter, ModelDrafter, NgramDrafter
from ..drafters.dynamic_tree import DynamicTree
from ..methods import autoregressive, jacobi, lookahead, prompt_lookup, speculative
from ..methods.results import Stats
from ..methods.schedules import CostAwareGamma
from ..models.data import DATA_DIR, GROUPS, load_prompts
from ..models.fast_path import cpu_identity
from ..models.int8_draft import int8_copy
from ..models.loading import as_device, chat_ids
from ..models.pairs import load_embedded_head, load_head, load_pair
from ..models.tree_shape import tree_cost
from ..theory import estimate_alpha, estimate_cost_ratio, predicted_speedup

# The settings that run the feature head: as it is, and drafted by its int8 copy.
HEAD_FLAGS = ("head_gammas", "head_trees", "head_dynamic", "mixed", "head_default")
INT8_HEAD_FLAGS = ("head_int8_gammas", "head_int8_trees", "head_int8_dynamic", "mixed_int8")

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
PEERS = {"ours autoregressive": "HF generate", "ours speculative γ=": "HF assisted γ=",
         "ours prompt lookup k=": "HF prompt lookup k=",
         "ours feature head γ=": "HF assisted γ="}  # our method (prefix) -> its HF peer


def peer_of(method: str) -> str | None:
    """The transformers peer of one of our methods, e.g. 'ours speculative γ=4' -> 'HF assisted γ=4'."""
    for ours, theirs in PEERS.items():
        if method.startswith(ours):
            return theirs + method[len(ours):]
    return None


@dataclass
class Row:
    """One method on one prompt: median time over repeats and what the run did."""

    method: str
    prompt_id: str
    group: str
    new_tokens: int
    seconds: float  # median
    spread: float  # max - min over repeats
    target_forwards: int = 0
    drafted: int = 0
    accepted: int = 0
    alpha_hat: float = float("nan")
    c_hat: float = float("nan")
    gamma: int | None = 0  # None: a dynamic schedule (see mean_gamma)
    identical: bool | None = None  # to our autoregressive output (greedy only)
    mean_gamma: float = float("nan")  # γ the schedule asked for, mean over iterations
    # As a serving engine counts them (vLLM): steps that drafted anything, and per draft
    # position i the steps that accepted more than i drafts (`Stats.engine_metrics`).
    drafts: int = 0
    accepted_per_position: list = field(default_factory=list)


@dataclass
class PeerResult:
    """What a transformers peer run gives back: its new tokens and the target forwards it ran."""

    tokens: list
    target_forwards: int


def hf_generate(target, ids, *, max_new_tokens, temperature, generator, **extra) -> PeerResult:
    """transformers' generate with our stopping rule; returns the new tokens and forwards."""
    sampling = {"do_sample": True, "temperature": temperature, "top_k": None, "top_p": None} \
        if temperature > 0 else {"do_sample": False}
    if temperature > 0:
        # transformers samples from the global RNG: seed it from our generator, reproducibly.
        torch.manual_seed(int(torch.randint(2**31, (1,), generator=generator,
                                            device=generator.device)))
    calls = []
    hook = target.register_forward_hook(lambda *_: calls.append(1))  # one per target forward
    try:
        out = target.generate(ids, max_new_tokens=max_new_tokens,
                              attention_mask=torch.ones_like(ids), **sampling, **extra)
    finally:
        hook.remove()
    return PeerResult(out[0, ids.shape[1]:].tolist(), len(calls))


def drafts_per_target_forward(target, draft, run) -> list:
    """How many `draft` forwards came before each `target` forward while `run()` ran: what a
    speculative loop actually drafted per iteration, whatever its settings say.
    Example: [4, 4, 2, 4] is γ = 4 with one early stop after two drafts."""
    events = []
    hooks = [draft.register_forward_hook(lambda *_: events.append("d")),
             target.register_forward_hook(lambda *_: events.append("t"))]
    try:
        run()
    finally:
        for hook in hooks:
            hook.remove()
    return [len(chunk) for chunk in "".join(events).split("t")[:-1]]


def assisted_two_ways(target, draft, ids, *, gamma: int, max_new_tokens: int) -> dict:
    """transformers' assisted generation asked for γ drafts per iteration and no early stop,
    twice: {"passed to generate()": ..., "set on the assistant": ...}, each the assistant
    forwards per target forward. transformers 5 builds its candidate generator from the
    assistant's own `generation_config`, so the settings passed to generate() are overwritten by
    the assistant's (a 0.4 confidence stop, a heuristic schedule); set on the assistant, they
    hold (`hf_assisted`, what the benchmark does). Greedy."""
    pristine = copy.deepcopy(draft.generation_config)
    asked = {"num_assistant_tokens": gamma, "num_assistant_tokens_schedule": "constant",
             "assistant_confidence_threshold": 0.0}
    common = dict(max_new_tokens=max_new_tokens, temperature=0.0, generator=None)
    return {"passed to generate()": drafts_per_target_forward(target, draft, lambda: hf_generate(
                target, ids, assistant_model=draft, **common, **asked)),
            "set on the assistant": drafts_per_target_forward(target, draft, lambda: hf_assisted(
                target, draft, pristine, ids, settings=asked, **common))}


def hf_assisted(target, draft, pristine_config, ids, settings=None, **kwargs):
    """`hf_generate` with `draft` as assistant under a fresh copy of its generation config plus
    `settings` (so HF's adaptive state starts anew each run); the draft's own config object is
    put back afterwards."""
    own = draft.generation_config
    draft.generation_config = copy.deepcopy(pristine_config)
    for key, value in (settings or {}).items():
        setattr(draft.generation_config, key, value)
    try:
        return hf_generate(target, ids, assistant_model=draft, **kwargs)
    finally:
        draft.generation_config = own


def methods(args, target, draft, head=None, cost_aware=None, engines_head=None):
    """name -> (gamma, function(ids, generator) returning our result or a `PeerResult`);
    `draft` is the distilled draft model, `head` the feature drafter (None: not run),
    `engines_head` a second one in the engines' layout (`--engines-head`; None: not run);
    `cost_aware`: drafter name ("head", "draft", "engines-head") -> its `CostAwareGamma`."""
    table = all_methods(args, target, draft, head, cost_aware or {}, engines_head)
    if args.methods:
        table = {name: entry for name, entry in table.items()
                 if name == "ours autoregressive" or name == "HF generate"
                 or any(name.startswith(prefix) for prefix in args.methods)}
    return table


def all_methods(args, target, draft, head, cost_aware, engines_head=None):
    common = {"max_new_tokens": args.max_new_tokens}
    pristine = copy.deepcopy(draft.generation_config)
    sampled = {"temperature": args.temperature}
    table = {"ours autoregressive": (0, lambda ids, g, trace=False: autoregressive(
        target, ids, **common, **sampled, generator=g, trace=trace))}
    # Our drafters stop early where the draft doubts its token (`--stop-below`), as
    # transformers' assistant does at the same threshold (its peers below).
    stop = args.stop_below or None
    drafters = ([("feature head", "head", FeatureDrafter(head.head, stop_below=stop),
                  args.head_gammas)] if head is not None else []) \
        + ([("engines head", "engines-head", FeatureDrafter(engines_head.head, stop_below=stop),
             args.head_gammas)] if engines_head is not None else []) \
        + [("speculative", "draft", ModelDrafter(draft, stop_below=stop), args.gammas)]
    # The head's shapes run with the head as it is and, where asked, with its int8 copy
    # (specnb.models.int8_draft): (setting, head module, label suffix) per run.
    int8_head = int8_copy(head.head) if head is not None and any(
        getattr(args, flag, []) for flag in INT8_HEAD_FLAGS) else None

    def runs(float_flag, int8_flag):
        if head is None:
            return []
        floats = getattr(args, float_flag, []) if float_flag else []
        return [(value, head.head, "") for value in floats] + \
            [(value, int8_head, " int8") for value in getattr(args, int8_flag, [])]

    for gamma, drafting, precision in runs(None, "head_int8_gammas"):  # float γ: below
        chain = FeatureDrafter(drafting, stop_below=stop)
        table[f"ours feature head{precision} γ={gamma}"] = (
            gamma, lambda ids, g, trace=False, chain=chain, gamma=gamma: speculative(
                target, chain, ids, gamma=gamma, **common, **sampled, generator=g,
                trace=trace))
    if head is not None and getattr(args, "head_default", False):
        # What `speculative(target, head, ids)` drafts without γ: the shape this machine's own
        # checking curve and the head's ranks pick (specnb.models.tree_shape), named for it.
        chosen, depth = head.recommended(args.temperature)
        table[f"ours feature head recommended {chosen.shape_text(depth)}"] = (
            None, lambda ids, g, trace=False: speculative(
                target, head, ids, **common, **sampled, generator=g, trace=trace))
    for widths, drafting, precision in runs("head_trees", "head_int8_trees"):
        # A tree of depth D drafts D levels (γ = D), the head's runners-up as siblings; no
        # chain formula predicts it (γ None, as for a schedule).
        # With --trim, also trimmed each iteration by this machine's costs (drafters.trim).
        trims = [None] + ([tree_cost(head.advisor.record(), int8=bool(precision))]
                          if args.trim else [])
        for trim in trims:
            tree = FeatureDrafter(drafting, stop_below=stop, tree=widths, trim=trim)
            name = f"ours feature head{precision} tree={','.join(map(str, widths))}"
            table[name + (" trimmed" if trim else "")] = (
                None, lambda ids, g, trace=False, tree=tree, depth=len(widths): speculative(
                    target, tree, ids, gamma=depth, **common, **sampled, generator=g,
                        trace=trace))
    for shape, drafting, precision in runs("head_dynamic", "head_int8_dynamic"):
        # EAGLE-2's dynamic tree: grown from the head's probabilities, γ = its depth.
        grown = FeatureDrafter(drafting, dynamic=shape)
        table[f"ours feature head{precision} dynamic={','.join(map(str, shape))}"] = (
            None, lambda ids, g, trace=False, grown=grown, depth=shape[1]: speculative(
                target, grown, ids, gamma=depth, **common, **sampled, generator=g,
                trace=trace))
    for widths, drafting, precision in runs("mixed", "mixed_int8"):
        # The head's tree and two prompt-lookup branches of up to --num-pred tokens, one tree.
        # Lookup branches need a 2-token match here: 1-token matches on open-ended text add
        # long branches that are rarely kept but still cost checking (drafters/mixed.py).
        mixed = MixedDrafter(FeatureDrafter(drafting, stop_below=stop, tree=widths),
                             NgramDrafter(n_max=max(args.ngram_max, 2), n_min=2, branches=2))
        table[f"ours mixed{precision} tree={','.join(map(str, widths))}+lookup"] = (
            None, lambda ids, g, trace=False, mixed=mixed: speculative(
                target, mixed, ids, gamma=max(args.num_pred, 1), **common, **sampled,
                generator=g, trace=trace))
    for label, key, drafter, gammas in drafters:
        # Fixed γ from the list, then the dynamic schedules; each under every acceptance rule.
        choices = [(gamma, gamma) for gamma in gammas] if "fixed" in args.schedules else []
        choices += [(name, "heuristic" if name == "heuristic" else cost_aware[key])
                    for name in args.schedules if name != "fixed"]
        for rule in args.acceptance:
            suffix = "" if rule == "exact" else f" {rule}"
            for name, gamma in choices:
                table[f"ours {label} γ={name}{suffix}"] = (
                    gamma if isinstance(gamma, int) else None,
                    lambda ids, g, trace=False, drafter=drafter, gamma=gamma, rule=rule: speculative(
                        target, drafter, ids, gamma=gamma, acceptance=rule, **common, **sampled,
                        generator=g, trace=trace))
    table[f"ours prompt lookup k={args.num_pred}"] = (args.num_pred, lambda ids, g, trace=False: prompt_lookup(
        target, ids, num_pred=args.num_pred, ngram_max=args.ngram_max, **common, **sampled,
        generator=g, trace=trace))
    for window, ngram, candidates in getattr(args, "lookahead", []):
        # A token tree of window and pooled n-grams (no chain formula predicts it: γ None).
        table[f"ours lookahead W,N,G={window},{ngram},{candidates}"] = (
            None, lambda ids, g, trace=False, w=window, n=ngram, c=candidates: lookahead(
                target, ids, window=w, ngram=n, candidates=c, **common, **sampled, generator=g,
                trace=trace))
    if args.temperature == 0:
        table[f"ours jacobi block={args.block}"] = (0, lambda ids, g, trace=False: jacobi(
            target, ids, block=args.block, **common, trace=trace))
    table["HF generate"] = (0, lambda ids, g, trace=False: hf_generate(target, ids, **common, **sampled,
                                                          generator=g))
    for gamma in args.gammas:
        table[f"HF assisted γ={gamma}"] = (gamma, lambda ids, g, trace=False, gamma=gamma: hf_assisted(
            target, draft, pristine, ids, settings={
                "num_assistant_tokens": gamma, "num_assistant_tokens_schedule": "constant",
                "assistant_confidence_threshold": args.stop_below}, **common, **sampled,
            generator=g))
    table["HF assisted default"] = (0, lambda ids, g, trace=False: hf_assisted(
        target, draft, pristine, ids, **common, **sampled, generator=g))
    table[f"HF prompt lookup k={args.num_pred}"] = (args.num_pred, lambda ids, g, trace=False: hf_generate(
        target, ids, **common, **sampled, generator=g, prompt_lookup_num_tokens=args.num_pred,
        max_matching_ngram_size=args.ngram_max))
    return table


def lookahead_settings(text: str) -> tuple:
    """argparse type: "5,3,5" -> (5, 3, 5): lookahead's window W >= 1, n-gram size N >= 2 and
    candidates G >= 1."""
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 3 or values[0] < 1 or values[1] < 2 or values[2] < 1:
        raise argparse.ArgumentTypeError(f"lookahead takes W,N,G: window >= 1, n-gram size >= 2, "
                                         f"candidates >= 1 (e.g. 5,3,5), got {text!r}")
    return values


def tree_widths(text: str) -> tuple:
    """argparse type: "4,2" -> (4, 2), widths per depth of a token tree (ints >= 1)."""
    try:
        widths = tuple(int(part) for part in text.split(","))
    except ValueError:
        widths = ()
    if not widths or min(widths) < 1:
        raise argparse.ArgumentTypeError(f"a tree is widths per depth, ints >= 1 joined by "
                                         f"commas (e.g. 4,2), got {text!r}")
    return widths


def dynamic_shape(text: str) -> tuple:
    """argparse type: "6,3,3" -> (6, 3, 3), a DynamicTree's nodes, depth and branch."""
    usage = f"a dynamic tree is N,D,K (nodes kept, depth, branch), e.g. 6,3,3; got {text!r}"
    try:
        shape = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(usage) from None
    try:
        DynamicTree(*shape)
    except (TypeError, ValueError) as error:
        raise argparse.ArgumentTypeError(f"{usage} ({error})" if isinstance(error, ValueError)
                                         else usage) from None
    return shape


def calibrate_cost_aware(args, target, drafters, tokenizer, prompt, latency) -> dict:
    """Per drafter, a `CostAwareGamma` from the measured latency curve and ĉ of one untimed
    γ = 1 run on the first prompt (the schedule's inputs are measured, never typed in)."""
    ids = chat_ids(tokenizer, prompt["prompt"], device=target.device)
    calibrated = {}
    for key, drafter in drafters.items():
        if drafter is not None:
            run = speculative(target, drafter, ids, gamma=1, max_new_tokens=args.max_new_tokens)
            calibrated[key] = CostAwareGamma.from_latency(latency, run)
    return calibrated


def select_prompts(args) -> list:
    """The prompts of --split named by --ids (in that order), else of --group, cut to the first
    --prompts."""
    split = getattr(args, "split", "eval")
    prompts = [p for p in load_prompts(split) if args.group in (None, p["group"])]
    if args.ids:
        by_id = {p["id"]: p for p in prompts}
        missing = [i for i in args.ids if i not in by_id]
        if missing:
            raise ValueError(f"--ids: no {split} prompt {missing} (in group {args.group}); "
                             f"see data/prompts/{split}.jsonl")
        prompts = [by_id[i] for i in args.ids]
    return prompts[:args.prompts] if args.prompts else prompts


def run(args, pair=None, progress: bool = True, keep_partial: bool = False) -> dict:
    """Time every method on the prompts; `pair`: an already loaded (target, draft, tokenizer);
    `progress`: show a progress bar. `keep_partial`: on Ctrl-C (KeyboardInterrupt) after a
    prompt finished, return the finished prompts' rows, marked "interrupted" (the command does
    this; a caller that does not ask gets the interrupt)."""
    if pair is None:
        target, draft, tokenizer = load_pair("embedded-distilled", device=args.device,
                                             dtype=DTYPES[args.dtype] if args.dtype else None)
        wants_head = any(getattr(args, flag) for flag in HEAD_FLAGS + INT8_HEAD_FLAGS)
        head = load_embedded_head(target) if wants_head else None
    else:
        target, draft, tokenizer, *rest = pair
        head = rest[0] if rest else None
    engines_head = load_head(args.engines_head, target) if getattr(
        args, "engines_head", None) else None
    device = target.device
    prompts = select_prompts(args)
    latency = measure_forward_latency(target, prefix_len=200, token_counts=args.latency_counts,
                                      repeats=5) if args.latency_counts else None
    cost_aware = calibrate_cost_aware(
        args, target, {"head": head, "draft": draft, "engines-head": engines_head}, tokenizer,
        prompts[0], latency) if "cost-aware" in args.schedules else {}
    table = methods(args, target, draft, head, cost_aware, engines_head)
    rows, generator = [], torch.Generator(device=device).manual_seed(args.seed)
    bar = tqdm(total=len(prompts) * len(table) * args.repeats, desc="bench",
               disable=not progress)
    try:
        for prompt in prompts:
            rows += time_prompt(args, table, chat_ids(tokenizer, prompt["prompt"], device=device),
                                prompt, generator, device, bar)
    except KeyboardInterrupt:  # Ctrl-C, or scripts/gpu_check.py at its budget: keep what finished
        if not (keep_partial and rows):
            raise
    finally:
        bar.close()
    done = len({row.prompt_id for row in rows})
    cpu = cpu_identity()  # the host CPU, named in every record (also beside a GPU)
    return {"settings": {k: v for k, v in vars(args).items() if k != "out"},
            "device": torch.cuda.get_device_name(device) if device.type == "cuda"
            else f"CPU {cpu['name']} [{cpu['isa']}], {torch.get_num_threads()} threads",
            "cpu": cpu,
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "python": platform.python_version()},
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "dtype": str(target.dtype), "forward_latency": latency,
            # how the target's linears ran here (specnb.models.fast_path): a CPU's timings
            # depend on it
            "cpu_path": getattr(target, "specnb_cpu_path", "dense"),
            "rows": [asdict(r) for r in rows],
            **({} if done == len(prompts) else
               {"interrupted": f"stopped after {done} of {len(prompts)} prompts"})}


def time_prompt(args, table: dict, ids, prompt: dict, generator, device, bar) -> list:
    """Every method of `table` on one prompt: warm-ups, then interleaved timed rounds; a `Row`
    per method, checked against the first method's tokens (ours autoregressive)."""
    # The trace (α̂, the γ asked for) comes from an untimed run: the last warm-up, or, without
    # warm-ups, one run after the timed rounds and only for a method that drafted (the
    # peers, ours autoregressive and Jacobi have nothing to trace). The timed runs are plain
    # calls, which record none.
    traced = {}
    for name, (gamma, function) in table.items():
        for _ in range(max(args.warmup - 1, 0)):
            function(ids, generator)
        if args.warmup:
            traced[name] = function(ids, generator, trace=True)
    # Repeats interleaved, a round visits every method once: a slow moment of a shared
    # machine then lands on every method alike, not on one method's repeats.
    samples, last = {name: [] for name in table}, {}
    for _ in range(args.repeats):
        for name, (gamma, function) in table.items():
            last[name], seconds, _ = timed(lambda: function(ids, generator), 1, device)
            samples[name].append(seconds)
            bar.update()
    for name, (gamma, function) in table.items():
        result = last[name]
        if (name not in traced and not isinstance(result, PeerResult)
                and (result.stats.drafted or result.stats.drafting_steps)):
            traced[name] = function(ids, generator, trace=True)
    rows, reference, baseline = [], None, None
    for name, (gamma, function) in table.items():
        result, times = last[name], samples[name]
        row = Row(name, prompt["id"], prompt["group"], 0, statistics.median(times),
                  max(times) - min(times), gamma=gamma)
        if isinstance(result, PeerResult):  # a transformers peer: tokens and forwards only
            tokens, row.target_forwards = result.tokens, result.target_forwards
        else:
            tokens, stats = result.tokens[0], result.stats
            row.target_forwards, row.drafted, row.accepted = (
                stats.target_forwards, stats.drafted, stats.accepted)
            row.drafts, row.accepted_per_position = (stats.drafting_steps,
                                                     list(stats.accepted_per_position))
            if name == "ours autoregressive":
                baseline = result
            if stats.drafted:  # any checked draft, a model's or prompt lookup's copy
                row.alpha_hat = estimate_alpha(traced[name])
            if stats.draft_forwards:
                row.c_hat = estimate_cost_ratio(result, baseline)
            asked = ([it.gamma for it in traced[name].trace if it.gamma is not None]
                     if name in traced else [])
            row.mean_gamma = statistics.mean(asked) if asked else float("nan")
        reference = reference if reference is not None else tokens
        row.new_tokens = len(tokens)
        row.identical = tokens == reference if args.temperature == 0 else None
        rows.append(row)
    return rows


def summary_rows(record: dict, group: str | None = None) -> list:
    """Per method: totals over prompts (of one group), speedups against the baselines.

    A speedup is a ratio of throughputs, all tokens over all seconds: sampled answers (and an
    answer that ends early) differ in length, and a method that writes fewer tokens is not
    faster for it. Greedy outputs are equal, and it is the ratio of times. Beside the total,
    `speedup_vs_ours_ar_low` / `_high`: the lowest and highest of the prompts' own speedups.
    Example: baseline 8 tokens in 2 s, method 6 tokens in 1 s -> 1.5 (times alone say 2.0)."""
    rows = [r for r in record["rows"] if group in (None, r["group"])]
    if not rows:
        return []
    def over(a, b):  # NaN, not an error, for a hand-made row of 0 tokens or 0 seconds
        return a / b if b else float("nan")
    names = list(dict.fromkeys(r["method"] for r in rows))
    rate = {n: over(sum(r["new_tokens"] for r in rows if r["method"] == n),
                    sum(r["seconds"] for r in rows if r["method"] == n)) for n in names}
    base = {r["prompt_id"]: over(r["new_tokens"], r["seconds"]) for r in rows
            if r["method"] == "ours autoregressive"}
    summary = []
    for name in names:
        mine = [r for r in rows if r["method"] == name]
        tokens = sum(r["new_tokens"] for r in mine)
        forwards = sum(r["target_forwards"] for r in mine)
        drafted, accepted = sum(r["drafted"] for r in mine), sum(r["accepted"] for r in mine)
        alphas = [r["alpha_hat"] for r in mine if r["alpha_hat"] == r["alpha_hat"]]
        costs = [r["c_hat"] for r in mine if r["c_hat"] == r["c_hat"]]
        peer = peer_of(name)
        line = {"method": name, "tokens_per_s": rate[name],
                "speedup_vs_ours_ar": over(rate[name], rate["ours autoregressive"]),
                "speedup_vs_hf_greedy": over(rate[name], rate["HF generate"]),
                "peer": peer, "speedup_vs_peer": over(rate[name], rate[peer]) if peer in rate
                else float("nan"),
                "tokens_per_forward": tokens / forwards if forwards else float("nan"),
                "draft_yield": accepted / drafted if drafted else float("nan"),
                "alpha_hat": statistics.mean(alphas) if alphas else float("nan"),
                "c_hat": statistics.mean(costs) if costs else float("nan"),
                "identical": all(r["identical"] for r in mine) if mine[0]["identical"] is not None
                else None}
        per_prompt = [over(over(r["new_tokens"], r["seconds"]), base[r["prompt_id"]])
                      for r in mine if r["prompt_id"] in base]
        per_prompt = [v for v in per_prompt if v == v]
        line["speedup_vs_ours_ar_low"] = min(per_prompt, default=float("nan"))
        line["speedup_vs_ours_ar_high"] = max(per_prompt, default=float("nan"))
        hf = [t for n, t in rate.items() if n.startswith("HF ")]
        line["speedup_vs_best_hf"] = over(rate[name], max(hf)) if hf else float("nan")
        line["predicted"] = predicted_speedup(line["alpha_hat"], mine[0]["gamma"], line["c_hat"]) \
            if alphas and costs and mine[0]["gamma"] is not None else float("nan")
        gammas = [r["mean_gamma"] for r in mine if r.get("mean_gamma", float("nan")) == r.get(
            "mean_gamma")]
        line["mean_gamma"] = statistics.mean(gammas) if gammas else float("nan")
        line["measured_over_predicted"] = line["speedup_vs_ours_ar"] / line["predicted"]
        line["acceptance"] = line["draft_yield"]  # the older name, kept for old readers
        line.update(engine_metrics(mine))
        summary.append(line)
    return summary


def engine_metrics(rows: list) -> dict:
    """vLLM's "SpecDecoding metrics" (vllm/v1/spec_decode/metrics.py) over rows of one method:
    mean acceptance length 1 + accepted / drafts, per-position acceptance (drafts that accepted
    more than i tokens, over drafts) and draft acceptance rate accepted / draft tokens. NaN (an
    empty list) for rows that drafted nothing or records written before rows counted drafts."""
    pooled = Stats.summed(Stats(drafted=r["drafted"], accepted=r["accepted"],
                                drafting_steps=r.get("drafts", 0),
                                accepted_per_position=list(r.get("accepted_per_position", [])))
                          for r in rows)
    metrics = pooled.engine_metrics()  # the formulas live with the counters (`Stats`)
    if not pooled.drafting_steps:  # nothing drafted, or a record from before drafts were counted
        metrics["draft_acceptance_rate"] = float("nan")
    return {key: metrics[key] for key in ("mean_acceptance_length", "per_position_acceptance",
                                          "draft_acceptance_rate")}


def summaries(record: dict) -> dict:
    """{'all': summary, 'open-ended': ..., 'input-grounded': ...}, groups without rows left out."""
    found = {group or "all": summary_rows(record, group) for group in (None, *GROUPS)}
    return {group: summary for group, summary in found.items() if summary}


def format_summary(summary: list) -> str:
    """The table the command prints; ×peer is the speedup over the method's HF peer (`PEERS`),
    "per prompt" the range of the prompts' own speedups over ours autoregressive."""
    name_width = max([26] + [len(s["method"]) + 1 for s in summary])  # tree names run long
    header = (f"{'method':<{name_width}}{'tok/s':>7}{'×ours AR':>9}{'per prompt':>12}"
              f"{'×HF gen':>8}{'×peer':>7}{'×best HF':>9}{'tok/fwd':>8}{'yield':>7}{'α̂':>6}{'ĉ':>7}"
              f"{'pred':>6}{'meas/pred':>10}{'acc.len':>8}  same as AR")
    lines = [header, "-" * len(header)]
    for s in summary:
        def num(value, width, digits):
            return f"{'-':>{width}}" if value != value else f"{value:>{width}.{digits}f}"
        same = {True: "yes", False: "NO", None: "(sampled)"}[s["identical"]]
        low, high = (s.get(f"speedup_vs_ours_ar_{end}", float("nan")) for end in ("low", "high"))
        spread = f"{low:.2f}–{high:.2f}" if low == low and high == high else "-"
        lines.append(f"{s['method']:<{name_width}}{num(s['tokens_per_s'], 7, 1)}"
                     f"{num(s['speedup_vs_ours_ar'], 9, 2)}{spread:>12}"
                     f"{num(s['speedup_vs_hf_greedy'], 8, 2)}"
                     f"{num(s.get('speedup_vs_peer', float('nan')), 7, 2)}"
                     f"{num(s.get('speedup_vs_best_hf', float('nan')), 9, 2)}"
                     f"{num(s['tokens_per_forward'], 8, 2)}"
                     f"{num(s.get('draft_yield', s.get('acceptance')), 7, 2)}"
                     f"{num(s['alpha_hat'], 6, 2)}{num(s['c_hat'], 7, 3)}"
                     f"{num(s['predicted'], 6, 2)}"
                     f"{num(s['measured_over_predicted'], 10, 2)}"
                     f"{num(s.get('mean_acceptance_length', float('nan')), 8, 2)}  {same}")
    lines.append("acc.len: vLLM's mean acceptance length, 1 + accepted / drafts (a draft: a "
                 "row's step that drafted); the records hold its per-position acceptance too")
    return "\n".join(lines)


# What --methods prefixes can select (names in `all_methods` start with one of these).
METHOD_STEMS = ("ours autoregressive", "ours feature head γ=", "ours feature head tree=",
                "ours feature head dynamic=", "ours engines head γ=", "ours mixed tree=",
                "ours speculative γ=", "ours prompt lookup k=", "ours lookahead W,N,G=",
                "ours jacobi block=", "HF generate", "HF assisted γ=", "HF assisted default",
                "HF prompt lookup k=")


def parse_args(argv=None, *, check_prompts: bool = False) -> argparse.Namespace:
    """The command line's settings; `parse_args([])` gives the defaults.

    Every flag and the output path are checked here, before any model is loaded; a bad one
    ends the command with an argparse message (exit 2). `check_prompts` also checks --ids
    against the eval prompts (the command does; a notebook gets `select_prompts`' ValueError).
    """
    parser = argparse.ArgumentParser(prog="python -m specnb.bench",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--gammas", type=int, nargs="+", default=[2, 4, 6],
                        help="γ of the distilled draft model (ours and HF assisted)")
    parser.add_argument("--head-gammas", type=int, nargs="*", default=[1, 2, 3],
                        help="γ of the feature head (none: skip it)")
    parser.add_argument("--head-int8-gammas", type=int, nargs="*", default=[],
                        help="γ of the feature head's int8 copy (CPU only; none by default)")
    parser.add_argument("--head-default", action="store_true",
                        help="also the head as `speculative` drafts it without gamma: the shape "
                             "this machine's checking curve picks (measured once, cached)")
    parser.add_argument("--head-trees", type=tree_widths, nargs="*", default=[], metavar="W,W",
                        help="token trees of the feature head, widths per depth, e.g. 4 4,2 "
                             "(each run with γ = its depth; none by default)")
    parser.add_argument("--head-int8-trees", type=tree_widths, nargs="*", default=[],
                        metavar="W,W", help="the same trees drafted by the head's int8 copy "
                        "(CPU only; none by default)")
    parser.add_argument("--head-dynamic", type=dynamic_shape, nargs="*", default=[],
                        metavar="N,D,K", help="EAGLE-2's dynamic tree of the feature head: N "
                        "nodes kept, D depths, K expanded nodes and children per node, e.g. "
                        "6,3,3 (each run with γ = D; none by default)")
    parser.add_argument("--head-int8-dynamic", type=dynamic_shape, nargs="*", default=[],
                        metavar="N,D,K", help="the same dynamic trees drafted by the head's "
                        "int8 copy (CPU only; none by default)")
    # A str, not a Path: the record keeps the settings as JSON.
    parser.add_argument("--engines-head", default=None, metavar="DIR",
                        help="also race the head saved in DIR (the engines' EAGLE-3 layout, "
                             "data/engines_head) at --head-gammas, beside the default head")
    parser.add_argument("--mixed", type=tree_widths, nargs="*", default=[], metavar="W,W",
                        help="the head's tree W merged with two prompt-lookup branches (2-token "
                             "matches, up to --num-pred tokens) in one tree (MixedDrafter), "
                             "e.g. 2; none by default")
    parser.add_argument("--trim", action="store_true",
                        help="also run each head tree (--head-trees, --head-int8-trees) trimmed "
                             "each iteration to the nodes that pay on this machine (the costs "
                             "the recommended shape was measured with)")
    parser.add_argument("--mixed-int8", type=tree_widths, nargs="*", default=[], metavar="W,W",
                        help="the same as --mixed with the head's int8 copy drafting the tree")
    parser.add_argument("--lookahead", type=lookahead_settings, nargs="*", default=[],
                        metavar="W,N,G", help="lookahead decoding with window W, n-grams of N "
                        "tokens, G candidates, e.g. 5,3,5 (none by default)")
    parser.add_argument("--methods", nargs="+", default=None, metavar="PREFIX",
                        help="run only methods starting with these, e.g. 'ours feature' 'HF "
                             "assisted' (ours autoregressive and HF generate always run)")
    parser.add_argument("--acceptance", nargs="+", choices=["exact", "typical"],
                        default=["exact"], help="acceptance rules for the drafting methods "
                        "(typical: Medusa's lossy rule, vLLM's defaults)")
    parser.add_argument("--schedules", nargs="+", choices=["fixed", "heuristic", "cost-aware"],
                        default=["fixed"], help="γ choices: fixed (--gammas, --head-gammas), "
                        "transformers' heuristic, cost-aware (needs --latency-counts with 1)")
    parser.add_argument("--stop-below", type=float, default=0.4,
                        help="our drafters and transformers' assistant stop drafting after a "
                             "token the draft gives less than this probability (0: never)")
    parser.add_argument("--num-pred", type=int, default=10)
    parser.add_argument("--ngram-max", type=int, default=3)
    parser.add_argument("--block", type=int, default=8)
    parser.add_argument("--temperature", type=float, default=0.0,
                        help="0: greedy (outputs checked against autoregressive); > 0: sampled")
    parser.add_argument("--split", choices=("eval", "test"), default="eval",
                        help="the prompts: eval (the drafts' held-out figures, the shape "
                             "advisor's acceptance) or test (held out from everything, for "
                             "figures no choice was tuned on)")
    parser.add_argument("--group", choices=GROUPS, default=None)
    parser.add_argument("--prompts", type=int, default=0, help="first N prompts (0: all)")
    parser.add_argument("--ids", nargs="+", default=None,
                        help="prompt ids of --split to run, e.g. sky-blue rename-total (default: all)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None, help="default: cuda when available")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default=None,
                        help="default: bfloat16 on cuda, float32 on cpu")
    parser.add_argument("--latency-counts", type=int, nargs="*", default=[1, 2, 4, 8, 16, 32, 64],
                        help="tokens per forward for the latency curve (none: skip it)")
    parser.add_argument("--out", type=Path, default=DATA_DIR / "results" / "bench.json")
    args = parser.parse_args(argv)
    if not args.temperature >= 0 or args.temperature == float("inf"):
        parser.error(f"--temperature must be a finite number >= 0 (0 is greedy), got "
                     f"{args.temperature}")
    if not 0 <= args.stop_below <= 1:
        parser.error(f"--stop-below must be a probability in [0, 1] (0: never stop early), "
                     f"got {args.stop_below}")
    for name, minimum in (("repeats", 1), ("warmup", 0), ("max_new_tokens", 1), ("num_pred", 0),
                          ("ngram_max", 1), ("block", 1), ("prompts", 0)):
        if getattr(args, name) < minimum:
            parser.error(f"--{name.replace('_', '-')} must be >= {minimum}, "
                         f"got {getattr(args, name)}")
    for name, values, minimum in (("gammas", args.gammas, 1), ("head-gammas", args.head_gammas, 0),
                                  ("head-int8-gammas", args.head_int8_gammas, 1),
                                  ("latency-counts", args.latency_counts, 1)):
        if any(value < minimum for value in values):
            parser.error(f"--{name} takes integers >= {minimum}, got {values}")
    if args.trim and not (args.head_trees or args.head_int8_trees):
        parser.error("--trim trims the head's static trees: give --head-trees or "
                     "--head-int8-trees too")
    if args.engines_head is not None and not (Path(args.engines_head) / "config.json").is_file():
        parser.error(f"--engines-head {args.engines_head}: no saved head there (config.json "
                     f"missing)")
    if args.engines_head is not None and not args.head_gammas:
        parser.error("--engines-head races at --head-gammas: give at least one")
    if "cost-aware" in args.schedules and 1 not in args.latency_counts:
        parser.error("--schedules cost-aware reads the measured checking cost: --latency-counts "
                     "must include 1")
    unknown = [prefix for prefix in args.methods or [] if not any(
        stem.startswith(prefix) or prefix.startswith(stem) for stem in METHOD_STEMS)]
    if unknown:
        parser.error(f"--methods {unknown} match no method; names start with one of "
                     f"{list(METHOD_STEMS)}")
    try:
        as_device(args.device)
    except ValueError as error:
        parser.error(f"--device: {error}")
    check_out_file(parser, "--out", args.out)
    if check_prompts:
        try:
            select_prompts(args)
        except ValueError as error:
            parser.error(str(error))
    return args


def main(argv=None) -> None:
    from ..viz.speedups import plot_speedups  # only for the PNG: measuring needs no viz

    args = parse_args(argv, check_prompts=True)
    start = time.perf_counter()
    record = run(args, keep_partial=True)
    with sigint_ignored():  # what was measured is written whole, a second Ctrl-C or not
        record["wall_s"] = time.perf_counter() - start
        record["command"] = command_line("python -m specnb.bench", argv)
        record["summary"] = summaries(record)
        write_atomic(args.out, (json.dumps(record, indent=1) + "\n").encode())
        plot_speedups(record).savefig(args.out.with_suffix(".png"), dpi=110)
    if "interrupted" in record:  # said first: stdout may be a pipe that Ctrl-C closed too
        print(f"interrupted: {record['interrupted']}", file=sys.stderr)
    print(f"{record['device']}, {record['dtype']}, torch {record['versions']['torch']}, "
          f"transformers {record['versions']['transformers']}; {args.max_new_tokens} new tokens, "
          f"T = {args.temperature}, median of {args.repeats}; {record['wall_s']:.0f} s in all")
    for group, summary in record["summary"].items():
        print(f"\n[{group} prompts]\n{format_summary(summary)}")
    print(f"\nresults: {args.out} and {args.out.with_suffix('.png')}")
    if "interrupted" in record:  # what finished is written; the exit code says it is partial
        raise SystemExit(130)


if __name__ == "__main__":
    main()
