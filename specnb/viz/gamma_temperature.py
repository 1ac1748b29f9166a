"""The γ / temperature widget of notebook 10: predicted speedup along cheap, precomputed curves.

`speedup_curves` turns three measurements into a grid over γ and temperature: α̂(T) (the mean
overlap Σ min(p_T, q_T) at each temperature, `specnb.bench.live.overlap_by_temperature`), the
draft's cost ratio ĉ and the target's latency curve (for the checking cost t(γ+1)/t(1)). Each
(γ, T) gets Thm 3.8's prediction, E[tokens per iteration] / (γ ĉ + 1), and the one that charges
the checking cost, E[tokens per iteration] / (γ ĉ + t(γ+1)/t(1)). `gamma_temperature_panel`
reads one point of that grid: a line of text and a figure (α̂ against T; predicted speedup
against γ at that T, with measured points if given). A slider move only reads the grid, so
the widget answers at once.

It deliberately runs no model and times nothing (the notebook measures α̂(T), ĉ and the
latency once, in ordinary cells) and prints nothing.

Example: α̂(0) = 0.5, ĉ = 0.1, t(2)/t(1) = 1.5 -> at γ = 1, Thm 3.8 1.5 / 1.1 = 1.364 and with
checking 1.5 / 1.6 = 0.9375.
"""

import math

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from ..theory import expected_tokens_per_iteration, relative_cost


def speedup_curves(alpha_by_temperature: dict, cost_ratio: float, latency: dict,
                   gammas=range(1, 9)) -> dict:
    """{T: α̂}, ĉ and a latency curve -> the predicted speedups over γ for every T.

    Returns {"temperatures": [T, sorted], "alpha": [α̂ per T], "gammas": [γ], "cost_ratio",
    "checking": [t(γ+1)/t(1) per γ], "theorem": [[Thm 3.8 per γ] per T], "with_checking":
    [[with the checking cost per γ] per T]}. The latency curve must cover k = 1 .. max γ + 1.
    """
    if not alpha_by_temperature:
        raise ValueError("alpha_by_temperature must map at least one temperature to α̂")
    for temperature, alpha in alpha_by_temperature.items():
        if not (temperature >= 0 and 0 <= alpha <= 1):
            raise ValueError(f"alpha_by_temperature needs T >= 0 and 0 <= α̂ <= 1, got "
                             f"T = {temperature}, α̂ = {alpha}")
    if not (cost_ratio >= 0 and math.isfinite(cost_ratio)):
        raise ValueError(f"cost_ratio (ĉ, draft / target forward time) must be >= 0, got "
                         f"{cost_ratio}")
    gammas = [int(g) for g in gammas]
    if not gammas or min(gammas) < 1:
        raise ValueError(f"gammas must be a non-empty list of integers >= 1, got {gammas}")
    temperatures = sorted(float(t) for t in alpha_by_temperature)
    alphas = [float(alpha_by_temperature[t]) for t in sorted(alpha_by_temperature)]
    checking = [relative_cost(latency, g + 1) for g in gammas]  # ValueError if not covered
    tokens = [[expected_tokens_per_iteration(a, g) for g in gammas] for a in alphas]
    return {"temperatures": temperatures, "alpha": alphas, "gammas": gammas,
            "cost_ratio": float(cost_ratio), "checking": checking,
            "theorem": [[e / (g * cost_ratio + 1) for e, g in zip(row, gammas)]
                        for row in tokens],
            "with_checking": [[e / (g * cost_ratio + k) for e, g, k in zip(row, gammas, checking)]
                              for row in tokens]}


def nearest_temperature_index(curves: dict, temperature: float) -> int:
    """Index of the grid temperature nearest `temperature` (a slider's 0.30000000000000004)."""
    return min(range(len(curves["temperatures"])),
               key=lambda i: abs(curves["temperatures"][i] - temperature))


def gamma_temperature_panel(curves: dict, gamma: int, temperature: float,
                            measured: dict | None = None) -> tuple[str, Figure]:
    """One (γ, T) of `speedup_curves`: a text line and a two-panel figure.

    `measured` optionally maps γ to (median, low, high) measured speedups at T = 0 (drawn as
    points with min–max bars on the right panel). Returns (text, Figure).
    """
    if int(gamma) not in curves["gammas"]:
        raise ValueError(f"gamma must be one of the grid's γ {curves['gammas']}, got {gamma}")
    t_index = nearest_temperature_index(curves, temperature)
    g_index = curves["gammas"].index(int(gamma))
    temperature, alpha = curves["temperatures"][t_index], curves["alpha"][t_index]
    theorem, refined = curves["theorem"][t_index], curves["with_checking"][t_index]
    best = max(range(len(curves["gammas"])), key=lambda i: refined[i])
    text = (f"T = {temperature:.1f}: α̂ = {alpha:.3f}; γ = {gamma}: "
            f"E[tokens per iteration] = {expected_tokens_per_iteration(alpha, int(gamma)):.2f}, "
            f"Thm 3.8 {theorem[g_index]:.2f}×, with checking cost "
            f"t({int(gamma) + 1})/t(1) = {curves['checking'][g_index]:.2f}: "
            f"{refined[g_index]:.2f}× (ĉ = {curves['cost_ratio']:.3f}); "
            f"best γ at this T with checking: {curves['gammas'][best]} ({refined[best]:.2f}×)")

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    left.plot(curves["temperatures"], curves["alpha"], "o-", color="tab:purple", markersize=3)
    left.plot([temperature], [alpha], "o", color="tab:red", markersize=9,
              label=f"T = {temperature:.1f}: α̂ = {alpha:.3f}")
    left.set_xlabel("temperature T")
    left.set_ylabel("α̂ = mean Σ min(p_T, q_T)")
    left.set_title("Overlap of target and draft against T")
    left.set_ylim(0, 1)
    left.legend(fontsize=8)
    left.grid(alpha=0.3)

    right.plot(curves["gammas"], theorem, "--", color="tab:green", label="Thm 3.8")
    right.plot(curves["gammas"], refined, "-", color="tab:green",
               label="with checking cost t(γ+1)/t(1)")
    right.plot([int(gamma)], [refined[g_index]], "o", color="tab:red", markersize=9,
               label=f"γ = {gamma}: {refined[g_index]:.2f}×")
    if measured:
        gammas = sorted(measured)
        medians = [measured[g][0] for g in gammas]
        right.errorbar(gammas, medians, yerr=[[m - measured[g][1] for m, g in zip(medians, gammas)],
                                              [measured[g][2] - m for m, g in zip(medians, gammas)]],
                       fmt="s", color="tab:blue", capsize=3, label="measured at T = 0 (min–max)")
    right.axhline(1.0, color="black", linewidth=0.8)
    right.set_xlabel("γ (drafts per iteration)")
    right.set_ylabel("predicted speedup (×)")
    right.set_title(f"Predicted speedup at T = {temperature:.1f}")
    right.set_xticks(curves["gammas"])
    right.set_ylim(0, max(1.5, *theorem) * 1.1)
    right.legend(fontsize=7)
    right.grid(alpha=0.3)
    fig.tight_layout()
    return text, fig
