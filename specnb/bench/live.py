"""One prompt, run live: the numbers behind notebooks 01, 05, 06 and 10 and their widgets.

`speculative_summary` runs `specnb.speculative` once and counts what its trace shows (tokens
per iteration, draft yield, per-position acceptance, α̂ and the eq. 1 prediction); `race` times
our autoregressive loop, our speculative loop and `generate(assistant_model=…)` on one prompt at
one (γ, temperature) with the benchmark harness's own functions; `clock_against_theory` times
our autoregressive loop and several (drafter, γ) on one prompt, repeats interleaved, and puts
each measured speedup beside Thm 3.8 and the prediction that charges the checking cost the loop
paid in the same rounds (its clock, `interleaved_clock`, times any drafters, token trees included);
`overlap_by_temperature` measures α̂ = mean Σ min(p_T, q_T) along a fixed answer, for
many temperatures from one forward of each model (cheap curves for a widget). All return plain
dicts: `specnb.viz.trace`, `specnb.viz.timing` and `specnb.viz.gamma_temperature` show them.

It deliberately draws and prints nothing, and runs no sweep over prompts (that is
`python -m specnb.bench`).

Example: speculative_summary(target, target, ids, gamma=4, max_new_tokens=10) -> alpha_hat 1.0,
two iterations of 5 tokens.
"""

import math
import statistics
from collections import Counter

import torch

from ..core import logits_to_probs
from ..core.args import check_int
from ..methods import autoregressive, speculative
from ..theory import estimate_alpha, estimate_cost_ratio, expected_tokens_per_iteration, \
    in_loop_checking_cost, position_counts, predicted_speedup, predicted_with_block_cost, \
    relative_cost
from .compare import methods, parse_args, timed


def speculative_summary(target, draft, ids, gamma=4, temperature=0.0, seed=0,
                        max_new_tokens=32) -> dict:
    """Run `specnb.speculative` once and return its numbers (the widgets' callback).

    Keys: gamma, temperature, new_tokens, iterations, target_forwards, draft_forwards,
    draft_yield (accepted / drafted), alpha_hat, tokens_per_iteration (measured), expected_tokens_per_iteration
    (eq. 1 at α̂), emitted_counts {tokens emitted in one iteration: iterations},
    accepted_by_position [[accepted, reached] per draft position], wall_s.
    """
    generator = torch.Generator(device=target.device).manual_seed(int(seed))
    result = speculative(target, draft, ids, gamma=gamma, max_new_tokens=max_new_tokens,
                         temperature=temperature, generator=generator, trace=True)
    stats, alpha_hat = result.stats, estimate_alpha(result)
    counts = position_counts(result, gamma)
    by_position = [[a, r] for a, r in zip(counts.accepted, counts.reached)]
    expected = math.nan if math.isnan(alpha_hat) else expected_tokens_per_iteration(alpha_hat,
                                                                                    gamma)
    return {"gamma": gamma, "temperature": temperature, "new_tokens": stats.new_tokens,
            "iterations": stats.iterations, "target_forwards": stats.target_forwards,
            "draft_forwards": stats.draft_forwards, "draft_yield": stats.draft_yield,
            "alpha_hat": alpha_hat, "tokens_per_iteration": stats.new_tokens / stats.iterations,
            "expected_tokens_per_iteration": expected,
            "emitted_counts": dict(sorted(Counter(len(it.emitted) for it in result.trace).items())),
            "accepted_by_position": by_position, "wall_s": stats.wall_s}


def race(target, draft, ids, gamma: int = 4, temperature: float = 0.0, max_new_tokens: int = 32,
         seed: int = 0, repeats: int = 1) -> dict:
    """Time ours autoregressive, ours speculative and HF assisted (constant γ) on one prompt.

    Uses the harness's `specnb.bench.compare.methods` and `timed`; each method gets a generator
    seeded with `seed`. Returns {"gamma", "temperature", "seconds", "tokens_per_s",
    "new_tokens", "target_forwards" (dicts by method), "speedup", "speedup_vs_hf_assisted"
    (ratios of tokens per second), "alpha_hat", "draft_yield", "c_hat", "predicted",
    "identical" (greedy: all three equal; sampled: None)}.
    """
    if int(gamma) != gamma or gamma < 1:
        raise ValueError(f"gamma must be an integer >= 1, got {gamma}")
    if not temperature >= 0:
        raise ValueError(f"temperature must be >= 0 (0 is greedy), got {temperature}")
    args = parse_args(["--gammas", str(int(gamma)), "--temperature", str(temperature),
                       "--max-new-tokens", str(max_new_tokens)])
    table = methods(args, target, draft)
    names = {"ar": "ours autoregressive", "spec": f"ours speculative γ={gamma}",
             "hf": f"HF assisted γ={gamma}"}
    results, seconds = {}, {}
    for key, name in names.items():
        function = table[name][1]
        generator = torch.Generator(device=target.device).manual_seed(int(seed))
        results[key], seconds[name], _ = timed(lambda: function(ids, generator), repeats,
                                               target.device)
    tokens = {"ar": results["ar"].tokens[0], "spec": results["spec"].tokens[0],
              "hf": results["hf"].tokens}
    # α̂ from an untimed traced run of the same seed (the timed runs record no trace)
    traced = table[names["spec"]][1](
        ids, torch.Generator(device=target.device).manual_seed(int(seed)), trace=True)
    alpha_hat = estimate_alpha(traced)
    c_hat = estimate_cost_ratio(results["spec"], results["ar"])
    predicted = predicted_speedup(alpha_hat, int(gamma), c_hat) \
        if not (math.isnan(alpha_hat) or math.isnan(c_hat)) else math.nan
    rate = {names[k]: len(tokens[k]) / seconds[names[k]] for k in names}
    return {"gamma": int(gamma), "temperature": temperature, "seconds": seconds,
            "tokens_per_s": rate,
            "new_tokens": {names[k]: len(tokens[k]) for k in names},
            "target_forwards": {names["ar"]: results["ar"].stats.target_forwards,
                                names["spec"]: results["spec"].stats.target_forwards,
                                names["hf"]: results["hf"].target_forwards},
            # throughputs: sampled answers differ in length (greedy ones: ratios of times)
            "speedup": rate[names["spec"]] / rate[names["ar"]],
            "speedup_vs_hf_assisted": rate[names["spec"]] / rate[names["hf"]],
            "alpha_hat": alpha_hat, "draft_yield": results["spec"].stats.draft_yield,
            "c_hat": c_hat, "predicted": predicted,
            "identical": tokens["ar"] == tokens["spec"] == tokens["hf"] if temperature == 0
            else None}


def clock_against_theory(target, drafters: dict, ids, latency: dict | None = None,
                         repeats: int = 5, warmup: int = 1, max_new_tokens: int = 24) -> dict:
    """Greedy, one prompt: time our autoregressive loop and each drafter, against the theory.

    `drafters` maps a name to (drafter, γ), e.g. {"draft γ=2": (draft, 2)}. The checking cost
    the prediction charges is the one the loop paid in these same rounds
    (`theory.in_loop_checking_cost`: the method's mean target time per step over autoregressive
    decoding's, with its spread); `latency`, a `measure_forward_latency` result covering
    k = 1 .. γ+1, adds the microbenchmark's t(γ+1)/t(1) beside it for comparison.
    Every method runs `warmup` times, then `repeats` rounds each time every method once
    (interleaved, so a slow moment of the machine hits all methods alike); a round's speedup is
    autoregressive seconds / the method's seconds in that round.

    Returns {"repeats", "max_new_tokens", "seconds": {name: [s per round]},
    "autoregressive_median_s", "autoregressive_tokens" (the greedy answer), "rows": [one dict
    per drafter: name, gamma, median_s, speedup (median), speedup_min, speedup_max,
    tokens_per_forward, draft_yield, alpha_hat, c_hat, checking_cost (in the loop, median),
    checking_cost_min, checking_cost_max, checking_cost_curve (the microbenchmark's, NaN without
    `latency`), predicted (Thm 3.8), predicted_with_checking, identical]}. The autoregressive
    loop is row-less: its time is the denominator of every speedup.

    Example: a drafter equal to the target at γ = 3 and α̂ = 1 -> tokens_per_forward near 4.
    """
    if not drafters:
        raise ValueError("drafters must map at least one name to (drafter, gamma)")
    for name, entry in drafters.items():
        if not (isinstance(entry, tuple) and len(entry) == 2 and int(entry[1]) == entry[1]
                and entry[1] >= 1):
            raise ValueError(f"drafters[{name!r}] must be (drafter, gamma) with an integer "
                             f"gamma >= 1, got {entry!r}")
    runs = {name: (drafter, int(gamma)) for name, (drafter, gamma) in drafters.items()}
    timing = interleaved_clock(target, runs, ids, repeats=repeats, warmup=warmup,
                               max_new_tokens=max_new_tokens)
    seconds, results = timing["seconds"], timing["results"]
    plain = results["autoregressive"]
    rows = []
    for name, (_, gamma) in drafters.items():
        gamma, result = int(gamma), results[name]
        ratios = timing["speedups"][name]
        alpha_hat = estimate_alpha(timing["traced"][name])
        c_hat = estimate_cost_ratio(result, plain)
        paid = in_loop_checking_cost(timing["rounds"][name], timing["rounds"]["autoregressive"])
        checking = paid["median"]
        known = not (math.isnan(alpha_hat) or math.isnan(c_hat))
        rows.append({
            "name": name, "gamma": gamma, "median_s": statistics.median(seconds[name]),
            "speedup": statistics.median(ratios), "speedup_min": min(ratios),
            "speedup_max": max(ratios), "tokens_per_forward": result.stats.tokens_per_forward,
            "draft_yield": result.stats.draft_yield, "alpha_hat": alpha_hat, "c_hat": c_hat,
            "checking_cost": checking, "checking_cost_min": paid["low"],
            "checking_cost_max": paid["high"],
            "checking_cost_curve": (relative_cost(latency, gamma + 1) if latency is not None
                                    else math.nan),
            "predicted": predicted_speedup(alpha_hat, gamma, c_hat) if known else math.nan,
            "predicted_with_checking": (predicted_with_block_cost(alpha_hat, gamma, c_hat, checking)
                                        if known else math.nan),
            "identical": result.tokens == plain.tokens})
    return {"repeats": int(repeats), "max_new_tokens": int(max_new_tokens),
            "autoregressive_median_s": statistics.median(seconds["autoregressive"]),
            "autoregressive_tokens": plain.tokens[0],
            "seconds": seconds, "rows": rows}


def interleaved_clock(target, drafters: dict, ids, repeats: int = 5, warmup: int = 1,
                      max_new_tokens: int = 24) -> dict:
    """Greedy, one prompt: our autoregressive loop and `speculative(target, drafter, ids,
    gamma=γ)` for each name -> (drafter, γ) of `drafters` (a tree drafter's γ caps its depth),
    `warmup` runs each, then `repeats` rounds, each running every method once (interleaved).

    Returns {"seconds": {name: [s per round]} ("autoregressive" first), "results": {name: the
    last round's GenerationResult}, "rounds": {name: [its GenerationResult per round]},
    "traced": {name: an untimed run's GenerationResult with its trace},
    "speedups": {name: [autoregressive s / the method's s, per
    round]}, "identical": {name: its tokens equal autoregressive's}}."""
    if not drafters:
        raise ValueError("drafters must map at least one name to (drafter, gamma)")
    repeats, warmup = check_int("repeats", repeats, 1), check_int("warmup", warmup, 0)
    runs = {"autoregressive": lambda trace=False: autoregressive(
        target, ids, max_new_tokens=max_new_tokens, trace=trace)}
    for name, (drafter, gamma) in drafters.items():
        if name == "autoregressive":
            raise ValueError("'autoregressive' is the reference's name; call the drafter otherwise")
        runs[name] = (lambda trace=False, d=drafter, g=check_int(f"{name}'s gamma", gamma, 1):
                      speculative(target, d, ids, gamma=g, max_new_tokens=max_new_tokens,
                                  trace=trace))
    # The timed rounds are plain calls; the trace (α̂, what was drafted) comes from one untimed
    # run per method, the last warm-up (one even with warmup=0).
    traced = {}
    for _ in range(max(warmup - 1, 0)):
        for run in runs.values():
            run()
    for name, run in runs.items():
        traced[name] = run(trace=True)
    seconds, rounds = {name: [] for name in runs}, {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            result, elapsed, _ = timed(run, 1, target.device)
            seconds[name].append(elapsed)
            rounds[name].append(result)
    results = {name: runs_of[-1] for name, runs_of in rounds.items()}
    plain = results["autoregressive"]
    return {"seconds": seconds, "results": results, "rounds": rounds, "traced": traced,
            "speedups": {name: [a / b for a, b in zip(seconds["autoregressive"], seconds[name])]
                         for name in drafters},
            "identical": {name: results[name].tokens == plain.tokens for name in drafters}}


def overlap_by_temperature(target, draft, ids, answer_tokens, temperatures) -> dict:
    """α̂(T) = mean over the answer's positions of Σ_x min(p_T(x), q_T(x)), for each T.

    One forward of each model over prompt + answer (teacher forcing: both read the same
    answer, e.g. the target's greedy one), then only softmaxes, so a grid of temperatures
    costs next to nothing. At T = 0 both laws are one-hot and α̂ is the top-1 agreement.
    `draft` must be a model over the target's vocabulary (not a feature head).

    Example: draft = target -> 1.0 at every T.
    """
    temperatures = [float(t) for t in temperatures]
    if not temperatures or min(temperatures) < 0:
        raise ValueError(f"temperatures must be a non-empty list of values >= 0, got "
                         f"{temperatures}")
    answer = [int(t) for t in answer_tokens]
    if not answer:
        raise ValueError("answer_tokens must hold at least one token id")
    ids = torch.as_tensor(ids).reshape(1, -1).to(target.device)
    sequence = torch.cat([ids, torch.tensor([answer], device=ids.device)], dim=1)  # [1, L + n]
    with torch.inference_mode():
        # the logits at position i predict token i + 1: those of the n answer tokens
        target_logits = target(sequence).logits[0, -len(answer) - 1:-1].float()  # [n, V]
        draft_logits = draft(sequence.to(draft.device)).logits[0, -len(answer) - 1:-1].float()
    draft_logits = draft_logits.to(target_logits.device)
    return {t: float(torch.minimum(logits_to_probs(target_logits, t),
                                   logits_to_probs(draft_logits, t)).sum(-1).mean())
            for t in temperatures}
