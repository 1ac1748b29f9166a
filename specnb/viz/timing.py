"""The timing notebook's pieces: latency curves side by side, speedup against γ, the race's table.

`plot_latency_curves` overlays forward-latency measurements (`specnb.bench_latency`) from several
devices, absolute and relative to one token per forward. `gamma_table` and
`plot_speedup_vs_gamma` read a benchmark record (`python -m specnb.bench`): measured speedup of
our speculative loop and of transformers' assisted generation at each γ, the prediction at each
γ from that run's α̂ and ĉ, and the whole predicted curve from the pooled α̂ and ĉ.
`format_race` lays out what `specnb.bench_live.race` measured on one prompt (the widget).
`load_records` finds recorded results (e.g. `bench-gpu*.json`). `relative_cost` and
`predicted_with_block_cost` put the measured cost of a (γ+1)-token target forward back into
Thm 3.8, which assumes it equals a one-token forward; `targets_check` compares a record with the
figures issue #5 asks for.

It deliberately runs no model and times nothing (that is `specnb.bench`, `specnb.bench_live`
and `specnb.bench_latency`) and prints nothing; plots use pyplot so that a notebook cell shows
them with `plt.show()`.

Example: pooled α̂ = 0.5, ĉ = 0.1 -> predicted speedup at γ = 1 is 1.5 / 1.1 = 1.364.
"""

import json
import math
import statistics
from pathlib import Path

import matplotlib.pyplot as plt
import numpy
from matplotlib.figure import Figure

from ..theory import predicted_speedup
from .speedups import speculative_by_gamma

TARGETS = {"speculative_vs_hf_assisted": 1.2, "prompt_lookup_vs_hf": 1.1,
           "measured_over_predicted": 0.9}  # issue #5: CPU, embedded pair, greedy, 128 tokens


def plot_latency_curves(curves: dict) -> Figure:
    """{label: measure_forward_latency(...) result} -> two log-x panels: ms per forward, and
    cost relative to one token per forward (with the "k separate forwards" line, k×)."""
    if not curves:
        raise ValueError("curves must map at least one label to a measure_forward_latency result")
    for label, data in curves.items():
        counts = data.get("token_counts") if isinstance(data, dict) else None
        if not counts or len(counts) != len(data.get("median_ms", [])) or 1 not in counts:
            raise ValueError(f"curve {label!r} must hold equally long 'token_counts' and "
                             f"'median_ms', with k = 1 among the counts")
    fig, (absolute, relative) = plt.subplots(1, 2, figsize=(11, 4))
    all_counts = sorted({k for data in curves.values() for k in data["token_counts"]})
    for label, data in curves.items():
        counts, median_ms = data["token_counts"], data["median_ms"]
        one = median_ms[counts.index(1)]
        absolute.plot(counts, median_ms, "o-", label=label)
        relative.plot(counts, [ms / one for ms in median_ms], "o-", label=label)
    relative.plot(all_counts, all_counts, "--", color="grey", label="k separate forwards (k×)")
    absolute.set_title("Time of one forward scoring k new tokens")
    absolute.set_ylabel("time per forward (ms)")
    relative.set_title("Cost relative to a one-token forward")
    relative.set_ylabel("time per forward / time at k = 1 (×)")
    for axes in (absolute, relative):
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.set_xticks(all_counts, [str(k) for k in all_counts])
        axes.set_xlabel("new tokens scored in one forward, k")
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize=8)
    fig.tight_layout()
    return fig


def relative_cost(latency: dict, k: float) -> float:
    """t(k) / t(1) from a latency curve, linear between measured counts (k within their range).

    Example: counts [1, 2, 4], ms [10, 12, 20] -> relative_cost(..., 3) = 16 / 10 = 1.6.
    """
    counts, median_ms = latency["token_counts"], latency["median_ms"]
    if 1 not in counts:
        raise ValueError("latency must include k = 1 in 'token_counts'")
    if not min(counts) <= k <= max(counts):
        raise ValueError(f"k = {k} is outside the measured token counts {counts}")
    measured_k, measured_ms = zip(*sorted(zip(counts, median_ms)))
    return float(numpy.interp(k, measured_k, measured_ms)) / median_ms[counts.index(1)]


def predicted_with_block_cost(alpha: float, gamma: int, cost_ratio: float,
                              block_cost: float) -> float:
    """Thm 3.8 with a verification forward costing `block_cost` one-token forwards, not 1:
    E[tokens per iteration] / (γ c + block_cost). block_cost = 1 gives `predicted_speedup`.

    Example: α = 0.5, γ = 2, c = 0.1, block_cost = 1.25 -> 1.75 / 1.45 = 1.2069.
    """
    if not block_cost > 0:
        raise ValueError(f"block_cost (t(γ+1) / t(1)) must be > 0, got {block_cost}")
    # Same tokens per iteration, an iteration costing γc + block_cost instead of γc + 1.
    return predicted_speedup(alpha, gamma, cost_ratio) * (gamma * cost_ratio + 1) / (
        gamma * cost_ratio + block_cost)


def targets_check(record: dict) -> list:
    """Issue #5's figures against a record: [{"claim", "value", "target", "met"}].

    Speculative ≥ 1.2× HF assisted at the same γ (all prompts), prompt lookup ≥ 1.1× HF prompt
    lookup (input-grounded prompts), measured ≥ 0.9 × predicted speedup (all prompts).
    """
    if "summary" not in record:
        raise ValueError("record has no 'summary'; pass what python -m specnb.bench wrote")
    checks = []
    for group, prefix, key, target, what in (
            ("all", "ours speculative γ=", "speedup_vs_peer",
             TARGETS["speculative_vs_hf_assisted"], "× HF assisted at the same γ"),
            ("input-grounded", "ours prompt lookup k=", "speedup_vs_peer",
             TARGETS["prompt_lookup_vs_hf"], "× HF prompt lookup (input-grounded)"),
            ("all", "ours speculative γ=", "measured_over_predicted",
             TARGETS["measured_over_predicted"], "measured / predicted speedup")):
        for line in record["summary"].get(group, []):
            if line["method"].startswith(prefix):
                value = line.get(key, math.nan)
                checks.append({"claim": f"{line['method']}: {what}", "value": value,
                               "target": target, "met": bool(value >= target)})
    return checks


def format_targets(checks: list) -> str:
    """One line per check: claim, measured value, target, met or not."""
    return "\n".join(f"{c['claim']:<58}{c['value']:>6.2f}  (target ≥ {c['target']:.1f}: "
                     f"{'met' if c['met'] else 'not met'})" for c in checks)


def gamma_table(record: dict, group: str = "all") -> dict:
    """Per γ of the record's speculative rows: measured and predicted speedups, and the pooled α̂, ĉ.

    Returns {"gammas": [γ], "ours": [speedup over our autoregressive], "hf_assisted": [same for
    HF assisted at that γ, NaN if absent], "predicted": [Thm 3.8 from that γ's α̂, ĉ],
    "alpha_hat": pooled mean, "c_hat": pooled mean}.
    """
    if "summary" not in record or group not in record["summary"]:
        raise ValueError(f"record has no summary for group {group!r}; pass what "
                         f"python -m specnb.bench wrote (groups: {list(record.get('summary', {}))})")
    by_name = {s["method"]: s for s in record["summary"][group]}
    gammas = [gamma for gamma, _, _ in speculative_by_gamma(record, group)]
    if not gammas:
        raise ValueError("the record holds no 'ours speculative γ=…' rows")
    ours = [by_name[f"ours speculative γ={g}"] for g in gammas]
    hf = [by_name.get(f"HF assisted γ={g}", {}).get("speedup_vs_ours_ar", math.nan) for g in gammas]
    alphas = [s["alpha_hat"] for s in ours if not math.isnan(s["alpha_hat"])]
    costs = [s["c_hat"] for s in ours if not math.isnan(s["c_hat"])]
    return {"gammas": gammas, "ours": [s["speedup_vs_ours_ar"] for s in ours], "hf_assisted": hf,
            "predicted": [s["predicted"] for s in ours],
            "alpha_hat": statistics.mean(alphas) if alphas else math.nan,
            "c_hat": statistics.mean(costs) if costs else math.nan}


def plot_speedup_vs_gamma(record: dict, group: str = "all", max_gamma: int = 8) -> Figure:
    """Measured speedup against γ (ours, HF assisted) with the predicted curve from pooled α̂, ĉ."""
    table = gamma_table(record, group)
    fig, axes = plt.subplots(figsize=(7, 4.2))
    curve_gammas = list(range(0, max(max_gamma, *table["gammas"]) + 1))
    if not math.isnan(table["alpha_hat"]) and not math.isnan(table["c_hat"]):
        axes.plot(curve_gammas, [predicted_speedup(table["alpha_hat"], g, table["c_hat"])
                                 for g in curve_gammas], "-", color="tab:green",
                  label=f"predicted (α̂ = {table['alpha_hat']:.2f}, ĉ = {table['c_hat']:.3f})")
    axes.plot(table["gammas"], table["predicted"], "s", color="tab:green", fillstyle="none",
              label="predicted from each run's α̂, ĉ")
    axes.plot(table["gammas"], table["ours"], "o-", color="tab:blue", label="measured: specnb")
    axes.plot(table["gammas"], table["hf_assisted"], "x--", color="tab:orange",
              label="measured: HF assisted (constant γ)")
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_xlabel("γ (draft tokens per iteration)")
    axes.set_ylabel("speedup over our autoregressive (×, wall time)")
    axes.set_title(f"Speculative decoding against γ ({group} prompts)\n{record['device']}")
    axes.legend(fontsize=8)
    fig.tight_layout()
    return fig


def format_race(result: dict) -> str:
    """`specnb.bench_live.race`'s result as a small table (timings vary from run to run)."""
    lines = [f"γ = {result['gamma']}, T = {result['temperature']}",
             f"{'method':<24}{'tokens':>7}{'target fwd':>11}{'seconds':>9}{'tok/s':>8}"]
    for name, seconds in result["seconds"].items():
        lines.append(f"{name:<24}{result['new_tokens'][name]:>7}"
                     f"{result['target_forwards'][name]:>11}{seconds:>9.3f}"
                     f"{result['tokens_per_s'][name]:>8.1f}")
    lines.append(f"speculative: {result['speedup']:.3f}x our autoregressive "
                 f"(predicted {result['predicted']:.3f}x from α̂ = {result['alpha_hat']:.3f}, "
                 f"ĉ = {result['c_hat']:.3f}), {result['speedup_vs_hf_assisted']:.3f}x HF assisted")
    same = {True: "yes", False: "NO", None: "(sampled: not compared)"}[result["identical"]]
    lines.append(f"outputs identical to autoregressive: {same}")
    return "\n".join(lines)


def load_records(directory, pattern: str = "bench-gpu*.json") -> dict:
    """{file name: record} of the benchmark records matching `pattern`, sorted by name ({} if none)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ValueError(f"directory {directory} does not exist; pass data/results")
    return {path.name: json.loads(path.read_text()) for path in sorted(directory.glob(pattern))}
