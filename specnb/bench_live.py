"""One prompt, run live: the numbers behind the notebooks' widgets (notebooks 05 and 09).

`speculative_summary` runs `specnb.speculative` once and counts what its trace shows (tokens
per iteration, acceptance by draft position, α̂ and the eq. 1 prediction); `race` times our
autoregressive loop, our speculative loop and `generate(assistant_model=…)` on one prompt at
one (γ, temperature) with the benchmark harness's own functions. Both return plain dicts:
`specnb.viz.trace.format_summary` / `plot_speculative_summary` and
`specnb.viz.timing.format_race` show them.

It deliberately draws and prints nothing, and runs no sweep (that is `python -m specnb.bench`).

Example: speculative_summary(target, target, ids, gamma=4, max_new_tokens=10) -> alpha_hat 1.0,
two iterations of 5 tokens.
"""

import math
from collections import Counter

import torch

from . import speculative
from .bench import methods, parse_args, timed
from .theory import estimate_alpha, estimate_cost_ratio, expected_tokens_per_iteration, \
    predicted_speedup


def speculative_summary(target, draft, ids, gamma=4, temperature=0.0, seed=0,
                        max_new_tokens=32) -> dict:
    """Run `specnb.speculative` once and return its numbers (the widgets' callback).

    Keys: gamma, temperature, new_tokens, iterations, target_forwards, draft_forwards,
    acceptance_rate, alpha_hat, tokens_per_iteration (measured), expected_tokens_per_iteration
    (eq. 1 at α̂), emitted_counts {tokens emitted in one iteration: iterations},
    accepted_by_position [[accepted, reached] per draft position], wall_s.
    """
    generator = torch.Generator(device=target.device).manual_seed(int(seed))
    result = speculative(target, draft, ids, gamma=gamma, max_new_tokens=max_new_tokens,
                         temperature=temperature, generator=generator)
    stats, alpha_hat = result.stats, estimate_alpha(result)
    by_position = [[0, 0] for _ in range(gamma)]
    for it in result.trace:
        for j, d in enumerate(it.drafted):
            if d.status != "unverified":
                by_position[j][0] += d.status == "accepted"
                by_position[j][1] += 1
    expected = math.nan if math.isnan(alpha_hat) else expected_tokens_per_iteration(alpha_hat,
                                                                                    gamma)
    return {"gamma": gamma, "temperature": temperature, "new_tokens": stats.new_tokens,
            "iterations": stats.iterations, "target_forwards": stats.target_forwards,
            "draft_forwards": stats.draft_forwards, "acceptance_rate": stats.acceptance_rate,
            "alpha_hat": alpha_hat, "tokens_per_iteration": stats.new_tokens / stats.iterations,
            "expected_tokens_per_iteration": expected,
            "emitted_counts": dict(sorted(Counter(len(it.emitted) for it in result.trace).items())),
            "accepted_by_position": by_position, "wall_s": stats.wall_s}


def race(target, draft, ids, gamma: int = 4, temperature: float = 0.0, max_new_tokens: int = 32,
         seed: int = 0, repeats: int = 1) -> dict:
    """Time ours autoregressive, ours speculative and HF assisted (constant γ) on one prompt.

    Uses the harness's `specnb.bench.methods` and `timed`; each method gets a generator seeded
    with `seed`. Returns {"gamma", "temperature", "seconds", "tokens_per_s", "new_tokens",
    "target_forwards" (dicts by method), "speedup", "speedup_vs_hf_assisted", "alpha_hat",
    "c_hat", "predicted", "identical" (greedy: all three equal; sampled: None)}.
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
    alpha_hat = estimate_alpha(results["spec"])
    c_hat = estimate_cost_ratio(results["spec"], results["ar"])
    predicted = predicted_speedup(alpha_hat, int(gamma), c_hat) \
        if not (math.isnan(alpha_hat) or math.isnan(c_hat)) else math.nan
    return {"gamma": int(gamma), "temperature": temperature, "seconds": seconds,
            "tokens_per_s": {names[k]: len(tokens[k]) / seconds[names[k]] for k in names},
            "new_tokens": {names[k]: len(tokens[k]) for k in names},
            "target_forwards": {names["ar"]: results["ar"].stats.target_forwards,
                                names["spec"]: results["spec"].stats.target_forwards,
                                names["hf"]: results["hf"].target_forwards},
            "speedup": seconds[names["ar"]] / seconds[names["spec"]],
            "speedup_vs_hf_assisted": seconds[names["hf"]] / seconds[names["spec"]],
            "alpha_hat": alpha_hat, "c_hat": c_hat, "predicted": predicted,
            "identical": tokens["ar"] == tokens["spec"] == tokens["hf"] if temperature == 0
            else None}
