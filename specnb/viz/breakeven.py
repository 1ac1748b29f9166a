"""When does speculative decoding pay? Break-even α against γ, and the predicted-speedup panel.

An iteration with γ drafts costs γ draft forwards (c each, in one-token target forwards) plus
one target forward that checks γ + 1 tokens, t(γ+1)/t(1) one-token forwards (the *checking
cost*; Leviathan et al.'s Theorem 3.8 takes it as 1). It emits (1 − α^{γ+1}) / (1 − α) tokens on
average, where autoregressive decoding would emit one per forward. So

    speedup = E[tokens per iteration] / (γ c + t(γ+1)/t(1))

and the method breaks even at the α where E[tokens per iteration] = γ c + t(γ+1)/t(1).

Pure functions of numbers: `break_even_alpha`, `speedup_numbers` and `format_numbers` give the
numbers, `plot_break_even` and `plot_speedup_panel` draw them (notebook 06's figure and widget).
Nothing here runs a model or times anything; the measured c, α̂ and t(k) come from the caller.

Example: γ = 1, c = 0.1, checking cost 1.6 -> 1 + α = 1.7, break-even α = 0.7.
"""

import math

import matplotlib.pyplot as plt
import numpy as np

from ..theory import expected_tokens_per_iteration, predicted_speedup, predicted_with_block_cost


ALPHA_GRID = np.linspace(0.0, 1.0, 201)


def _check_costs(cost_ratio: float, checking_cost: float) -> None:
    if not cost_ratio >= 0:
        raise ValueError(f"cost_ratio (draft forward / one-token target forward) must be >= 0, "
                         f"got {cost_ratio}")
    if not checking_cost > 0:
        raise ValueError(f"checking_cost (t(γ+1) / t(1)) must be > 0, got {checking_cost}")


def break_even_alpha(gamma: int, cost_ratio: float, checking_cost: float = 1.0) -> float:
    """The α at which γ drafts per iteration are exactly as fast as autoregressive decoding.

    Solves (1 − α^{γ+1}) / (1 − α) = γ c + checking_cost for α (the left side grows from 1 at
    α = 0 to γ + 1 at α = 1). Returns 0.0 when the right side is at most 1 (any draft pays) and
    NaN when it exceeds γ + 1 (not even a perfect draft pays).
    Example: γ = 2, c = 0, checking 1.75 -> 1 + α + α² = 1.75 -> α = 0.5.
    """
    if int(gamma) != gamma or gamma < 1:
        raise ValueError(f"gamma (drafts per iteration) must be an integer >= 1, got {gamma}")
    _check_costs(cost_ratio, checking_cost)
    cost = gamma * cost_ratio + checking_cost  # one iteration, in one-token target forwards
    if cost <= 1.0:
        return 0.0
    if cost > gamma + 1:
        return math.nan
    low, high = 0.0, 1.0
    for _ in range(60):  # bisection: 2^-60 is far below float32 noise
        middle = (low + high) / 2
        if expected_tokens_per_iteration(middle, int(gamma)) < cost:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def speedup_numbers(alpha: float, cost_ratio: float, gamma: int, checking_cost: float) -> dict:
    """The panel's numbers at one setting: expected tokens per iteration, the cost of one
    iteration, Thm 3.8's speedup (checking cost 1), the speedup with the checking cost, and
    the break-even α at this (c, γ, checking cost)."""
    _check_costs(cost_ratio, checking_cost)
    return {"alpha": float(alpha), "cost_ratio": float(cost_ratio), "gamma": int(gamma),
            "checking_cost": float(checking_cost),
            "expected_tokens": expected_tokens_per_iteration(alpha, gamma),
            "iteration_cost": gamma * cost_ratio + checking_cost,
            "theorem_speedup": predicted_speedup(alpha, gamma, cost_ratio),
            "speedup": predicted_with_block_cost(alpha, gamma, cost_ratio, checking_cost),
            "break_even_alpha": break_even_alpha(gamma, cost_ratio, checking_cost)
            if gamma >= 1 else math.nan}


def format_numbers(numbers: dict) -> str:
    """Two lines for the widget: the setting, then what it predicts."""
    n = numbers
    return (f"α = {n['alpha']:.2f}, c = {n['cost_ratio']:.3f}, γ = {n['gamma']}, "
            f"checking cost t(γ+1)/t(1) = {n['checking_cost']:.2f}\n"
            f"E[tokens per iteration] = {n['expected_tokens']:.3f}; one iteration costs "
            f"{n['iteration_cost']:.3f} one-token forwards; speedup {n['speedup']:.3f}× "
            f"(Thm 3.8, checking cost 1: {n['theorem_speedup']:.3f}×); "
            f"break-even α = {n['break_even_alpha']:.3f}")


def plot_break_even(gammas, checking_costs, drafts: dict, reference: dict | None = None):
    """Break-even α against γ, one curve per draft, with each draft's measured α̂ marked.

    `checking_costs[i]` is t(γ+1)/t(1) for `gammas[i]`; `drafts` maps a name to
    {"cost_ratio": c, "alpha": α̂, "gamma": the γ it ran at}; `reference` maps a label to a
    published α (drawn as dotted grey lines). Solid: with the measured checking cost; dashed:
    Thm 3.8 (checking cost 1, what a memory-bound GPU forward comes close to).
    """
    gammas = [int(g) for g in gammas]
    if not gammas or len(checking_costs) != len(gammas):
        raise ValueError(f"gammas and checking_costs must be non-empty and of equal length, got "
                         f"{len(gammas)} and {len(checking_costs)}")
    fig, ax = plt.subplots(figsize=(8, 4.6))
    for (name, draft), colour in zip(drafts.items(), plt.rcParams["axes.prop_cycle"].by_key()[
            "color"]):
        c = draft["cost_ratio"]
        ax.plot(gammas, [break_even_alpha(g, c, k) for g, k in zip(gammas, checking_costs)],
                "o-", color=colour, label=f"{name}: break-even, measured checking cost (c = {c:.3f})")
        ax.plot(gammas, [break_even_alpha(g, c, 1.0) for g in gammas], "--", color=colour,
                alpha=0.7, label=f"{name}: break-even, Thm 3.8 (checking cost 1)")
        ax.plot(draft["gamma"], draft["alpha"], "*", markersize=16, color=colour,
                markeredgecolor="black", label=f"{name}: measured α̂ = {draft['alpha']:.3f}")
    for label, alpha in (reference or {}).items():
        ax.axhline(alpha, color="grey", linestyle=":", linewidth=1)
        ax.text(gammas[-1] + 0.1, alpha, label, fontsize=7, color="dimgrey", va="center")
    ax.set(title="The α a draft needs to break even (above a curve: faster than autoregressive)",
           xlabel="γ (draft tokens per iteration)", ylabel="acceptance rate α", ylim=(0, 1.02),
           xlim=(gammas[0] - 0.3, gammas[-1] + (2.2 if reference else 0.3)), xticks=gammas)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def plot_speedup_panel(alpha: float, cost_ratio: float, gamma: int, checking_cost: float):
    """Left: predicted speedup against α at (c, γ), with and without the checking cost.
    Right: predicted speedup against the checking cost at (α, c, γ). The setting is marked."""
    numbers = speedup_numbers(alpha, cost_ratio, gamma, checking_cost)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    with_checking = [predicted_with_block_cost(a, gamma, cost_ratio, checking_cost)
                     for a in ALPHA_GRID]
    theorem = [predicted_speedup(a, gamma, cost_ratio) for a in ALPHA_GRID]
    left.plot(ALPHA_GRID, theorem, "--", color="tab:grey", label="Thm 3.8 (checking cost 1)")
    left.plot(ALPHA_GRID, with_checking, color="tab:blue",
              label=f"checking cost {checking_cost:.2f}")
    left.plot(alpha, numbers["speedup"], "o", color="tab:red", markersize=8,
              label=f"α = {alpha:.2f}: {numbers['speedup']:.2f}×")
    if not math.isnan(numbers["break_even_alpha"]):
        left.axvline(numbers["break_even_alpha"], color="tab:blue", linestyle=":", linewidth=1)
    left.axhline(1.0, color="black", linewidth=0.8)
    left.set(title=f"Predicted speedup vs α (γ = {gamma}, c = {cost_ratio:.3f})",
             xlabel="acceptance rate α", ylabel="speedup over autoregressive (×)", xlim=(0, 1))
    left.legend(fontsize=8, loc="upper left")

    costs = np.linspace(1.0, 4.0, 61)
    right.plot(costs, [predicted_with_block_cost(alpha, gamma, cost_ratio, k) for k in costs],
               color="tab:blue")
    right.plot(checking_cost, numbers["speedup"], "o", color="tab:red", markersize=8,
               label=f"checking cost {checking_cost:.2f}: {numbers['speedup']:.2f}×")
    right.axhline(1.0, color="black", linewidth=0.8)
    right.set(title=f"Predicted speedup vs checking cost (α = {alpha:.2f}, γ = {gamma})",
              xlabel="checking cost t(γ+1)/t(1) (one-token forwards)",
              ylabel="speedup over autoregressive (×)")
    right.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def plot_tokens_per_iteration(points: list, gamma: int, drafts: dict | None = None):
    """Tokens per iteration against α: each point of `points` ({"alpha_hat", "counts"}: the
    emitted count of each iteration) as mean ± 2 standard errors with its n, against
    (1 − α^{γ+1}) / (1 − α); `drafts` (name -> {"alpha", "tokens_per_iteration"}) as stars."""
    fig, ax = plt.subplots(figsize=(8, 4.4))
    ax.plot(ALPHA_GRID, [expected_tokens_per_iteration(a, gamma) for a in ALPHA_GRID],
            color="black", label=f"(1 − α^(γ+1)) / (1 − α), γ = {gamma}")
    for point in points:
        counts = np.asarray(point["counts"], dtype=float)
        error = 2 * counts.std(ddof=1) / np.sqrt(len(counts)) if len(counts) > 1 else 0.0
        ax.errorbar(point["alpha_hat"], counts.mean(), yerr=error, fmt="o", color="tab:blue",
                    capsize=4)
        ax.annotate(f"n={len(counts)}", (point["alpha_hat"], counts.mean()), xytext=(6, -12),
                    textcoords="offset points", fontsize=7)
    ax.plot([], [], "o", color="tab:blue", label="synthetic draft: mean ± 2 SE (n iterations)")
    for (name, draft), colour in zip((drafts or {}).items(), ("tab:green", "tab:orange")):
        ax.plot(draft["alpha"], draft["tokens_per_iteration"], "*", markersize=15, color=colour,
                markeredgecolor="black", label=f"{name} (real)")
    ax.set(title="Tokens per target forward against the acceptance rate",
           xlabel="acceptance rate α (measured α̂)", ylabel="tokens per iteration (= per forward)",
           xlim=(0, 1), ylim=(0.9, gamma + 1.1))
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig
