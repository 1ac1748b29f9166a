"""Timing pieces: latency curves side by side, speedup against γ, a race's table and figure.

`plot_latency_curves` overlays forward-latency measurements (`specnb.core.latency`) from several
devices, absolute and relative to one token per forward. `gamma_table` and
`plot_speedup_vs_gamma` read a benchmark record (`python -m specnb.bench`): measured speedup of
our speculative loop and of transformers' assisted generation at each γ, the prediction at each
γ from that run's α̂ and ĉ, and the whole predicted curve from the pooled α̂ and ĉ.
`format_race` lays out what `specnb.bench.live.race` measured on one prompt;
`format_clock` and `plot_clock_against_theory` what `specnb.bench.live.clock_against_theory`
measured (repeats, their spread, beside the predictions: notebook 06's live race) or a record
replays (`specnb.bench.results.record_against_theory`: notebook 11). `load_records` finds
recorded results (e.g. `bench-gpu*.json`). `relative_cost` and `predicted_with_block_cost` put
the measured cost of a (γ+1)-token target forward back into Thm 3.8, which assumes it equals a
one-token forward.

It deliberately runs no model and times nothing (that is `specnb.bench`, `specnb.bench.live`
and `specnb.core.latency`) and prints nothing; functions return a Figure, which a notebook
cell shows with `display(fig)`.

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


def plot_latency_curves(curves: dict) -> Figure:
    """{label: measure_forward_latency(...) result} -> two log-x panels: ms per forward (the
    min–max band of the repeats where "samples_ms" is there), and cost relative to one token
    per forward (with the "k separate forwards" line, k×)."""
    if not curves:
        raise ValueError("curves must map at least one label to a measure_forward_latency result")
    for label, data in curves.items():
        counts = data.get("token_counts") if isinstance(data, dict) else None
        if not counts or len(counts) != len(data.get("median_ms", [])) or 1 not in counts:
            raise ValueError(f"curve {label!r} must hold equally long 'token_counts' and "
                             f"'median_ms', with k = 1 among the counts")
    fig, (absolute, relative) = plt.subplots(1, 2, figsize=(11, 4))
    all_counts = sorted({k for data in curves.values() for k in data["token_counts"]})
    repeats = set()  # how many forwards each drawn band summarizes
    for label, data in curves.items():
        counts, median_ms = data["token_counts"], data["median_ms"]
        one = median_ms[counts.index(1)]
        samples = data.get("samples_ms")
        if samples and len(samples) == len(counts) and all(samples):
            repeats.add(min(len(x) for x in samples))
        line, = absolute.plot(counts, median_ms, "o-", label=label)
        relative.plot(counts, [ms / one for ms in median_ms], "o-", label=label,
                      color=line.get_color())
        if samples and len(samples) == len(counts) and all(samples):
            absolute.fill_between(counts, [min(x) for x in samples], [max(x) for x in samples],
                                  color=line.get_color(), alpha=0.2, linewidth=0)
    relative.plot(all_counts, all_counts, "--", color="grey", label="k separate forwards (k×)")
    absolute.set_title("Time of one forward scoring k new tokens" + (
        f"\n(median of {'/'.join(map(str, sorted(repeats)))} forwards; band: min–max)"
        if repeats else ""), fontsize=10)
    absolute.set_ylabel("time per forward (ms)")
    relative.set_title("Cost relative to a one-token forward")
    relative.set_ylabel("time per forward / time at k = 1 (×)")
    for axes in (absolute, relative):
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.set_xticks(all_counts, [str(k) for k in all_counts])
        axes.set_xlabel("new tokens scored in one forward, k")
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


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
    """`specnb.bench.live.race`'s result as a small table (timings vary from run to run)."""
    lines = [f"γ = {result['gamma']}, T = {result['temperature']}",
             f"{'method':<24}{'tokens':>7}{'target fwd':>11}{'seconds':>9}{'tok/s':>8}"]
    for name, seconds in result["seconds"].items():
        lines.append(f"{name:<24}{result['new_tokens'][name]:>7}"
                     f"{result['target_forwards'][name]:>11}{seconds:>9.3f}"
                     f"{result['tokens_per_s'][name]:>8.1f}")
    yield_text = (f"draft yield {result['draft_yield']:.3f}, " if "draft_yield" in result else "")
    lines.append(f"speculative: {result['speedup']:.3f}x our autoregressive "
                 f"(predicted {result['predicted']:.3f}x from α̂ = {result['alpha_hat']:.3f}, "
                 f"{yield_text}ĉ = {result['c_hat']:.3f}), "
                 f"{result['speedup_vs_hf_assisted']:.3f}x HF assisted")
    same = {True: "yes", False: "NO", None: "(sampled: not compared)"}[result["identical"]]
    lines.append(f"outputs identical to autoregressive: {same}")
    return "\n".join(lines)


def load_records(directory, pattern: str = "bench-gpu*.json") -> dict:
    """{file name: record} of the benchmark records matching `pattern`, sorted by name ({} if none)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ValueError(f"directory {directory} does not exist; pass data/results")
    return {path.name: json.loads(path.read_text()) for path in sorted(directory.glob(pattern))}


def format_beside(records: dict, group: str = "all") -> str:
    """The speedups of the methods every record ran, one column pair per record: over our
    autoregressive decoding and over the method's transformers peer, each record on its own
    machine. `records`: {label: a `python -m specnb.bench` record with its "summary"}.

    Example columns: method | CPU ×AR ×peer | GPU ×AR ×peer."""
    summaries = {label: {line["method"]: line for line in record["summary"][group]}
                 for label, record in records.items()}
    methods = [m for m in next(iter(summaries.values()), {})
               if all(m in lines for lines in summaries.values())]
    width = max((len(m) for m in methods), default=6)
    head = f"{'method':<{width}}" + "".join(f"  {label[:22]:>22}" for label in summaries)
    sub = f"{'':<{width}}" + "".join(f"  {'× ours AR':>10} {'× peer':>11}" for _ in summaries)
    lines = [head, sub]
    for method in methods:
        cells = []
        for lines_of in summaries.values():
            line = lines_of[method]
            peer = line.get("speedup_vs_peer", math.nan)
            cells.append(f"  {line['speedup_vs_ours_ar']:>10.2f} "
                         f"{'' if peer != peer else f'{peer:.2f}':>11}")
        lines.append(f"{method:<{width}}" + "".join(cells))
    return "\n".join(lines)


def format_clock(clock: dict) -> str:
    """`specnb.bench.live.clock_against_theory`'s result as a table: counts, α̂, ĉ, the
    checking cost paid in the loop (median, min–max of rounds) and, when measured, the
    microbenchmark's, the two predictions and the measured speedup (median, min–max). A
    recorded race (`specnb.bench.results.record_against_theory`) shows its curve's checking
    cost and the speedup over all its prompts (min–max of the prompts' own)."""
    if not clock.get("rows"):
        raise ValueError("clock must be what specnb.bench.live.clock_against_theory returned")
    if clock.get("record"):
        lines = [f"{'method':<22}{'tok/fwd':>8}{'draft yield':>12}{'α̂':>7}{'ĉ':>7}"
                 f"{'checking (curve)':>17}{'Thm 3.8':>9}{'+ checking':>11}"
                 f"{'measured (prompts)':>21}"]
        for row in clock["rows"]:
            lines.append(f"{row['name']:<22}{row['tokens_per_forward']:>8.2f}"
                         f"{row['draft_yield']:>12.3f}{row['alpha_hat']:>7.3f}{row['c_hat']:>7.3f}"
                         f"{row['checking_cost']:>17.2f}{row['predicted']:>8.2f}×"
                         f"{row['predicted_with_checking']:>10.2f}×{row['speedup']:>9.2f}× "
                         f"({row['speedup_min']:.2f}–{row['speedup_max']:.2f})")
        lines.append(f"recorded on {clock['machine']}: {clock['prompts']} prompts, up to "
                     f"{clock['max_new_tokens']} new tokens each, median of {clock['repeats']} "
                     f"timed round(s); speedup = all autoregressive time / all the method's; "
                     f"outputs identical to autoregressive: "
                     f"{'yes' if all(r['identical'] for r in clock['rows']) else 'NO'}")
        return "\n".join(lines)
    curve = any(row.get("checking_cost_curve", math.nan) == row.get("checking_cost_curve")
                for row in clock["rows"])  # a microbenchmark value to show beside
    lines = [f"{'method':<22}{'tok/fwd':>8}{'draft yield':>12}{'α̂':>7}{'ĉ':>7}"
             f"{'checking, in loop':>19}" + (f"{'curve':>7}" if curve else "") +
             f"{'Thm 3.8':>9}{'+ checking':>11}{'measured (min–max)':>21}"]
    for row in clock["rows"]:
        paid = (f"{row['checking_cost']:.2f} ({row.get('checking_cost_min', math.nan):.2f}–"
                f"{row.get('checking_cost_max', math.nan):.2f})")
        lines.append(f"{row['name']:<22}{row['tokens_per_forward']:>8.2f}{row['draft_yield']:>12.3f}"
                     f"{row['alpha_hat']:>7.3f}{row['c_hat']:>7.3f}{paid:>19}"
                     + (f"{row.get('checking_cost_curve', math.nan):>7.2f}" if curve else "") +
                     f"{row['predicted']:>8.2f}×{row['predicted_with_checking']:>10.2f}×"
                     f"{row['speedup']:>9.2f}× ({row['speedup_min']:.2f}–{row['speedup_max']:.2f})")
    lines.append(f"autoregressive: {clock['autoregressive_median_s']:.2f} s for "
                 f"{clock['max_new_tokens']} tokens; every method timed {clock['repeats']} times "
                 f"(rounds interleaved) after a warm-up; speedup = autoregressive / method, per "
                 f"round; outputs identical to autoregressive: "
                 f"{'yes' if all(r['identical'] for r in clock['rows']) else 'NO'}")
    return "\n".join(lines)


def plot_clock_against_theory(clock: dict, title: str = "") -> Figure:
    """Measured speedup per method (median, bar = min–max over rounds, n = rounds) beside
    Thm 3.8 and the prediction that charges the checking cost the loop paid (t(γ+1)/t(1) in
    the same rounds); for a recorded race (`bench.results.record_against_theory`) the speedup
    over all its prompts, bar = the prompts' min–max, and its curve's checking cost."""
    rows = clock.get("rows")
    if not rows:
        raise ValueError("clock must be what specnb.bench.live.clock_against_theory returned")
    fig, axes = plt.subplots(figsize=(max(6.0, 1.6 * len(rows) + 2.5), 3.8))
    x = numpy.arange(len(rows))
    width = 0.27
    axes.bar(x - width, [r["predicted"] for r in rows], width, color="#9cd3a8",
             label="Thm 3.8 (checking costs one forward)")
    recorded = bool(clock.get("record"))
    axes.bar(x, [r["predicted_with_checking"] for r in rows], width, color="#2a7a3b",
             label="with the checking cost of the record's curve" if recorded else
             "with the checking cost paid in the loop")
    medians = [r["speedup"] for r in rows]
    errors = [[m - r["speedup_min"] for m, r in zip(medians, rows)],
              [r["speedup_max"] - m for m, r in zip(medians, rows)]]
    n = clock["prompts"] if recorded else clock["repeats"]
    bars = axes.bar(x + width, medians, width, yerr=errors, capsize=4, color="#3b6fb6",
                    label=f"recorded: all prompts, bar = the prompts' min–max (n = {n})"
                    if recorded else f"measured: median, bar min–max (n = {n} each)")
    for bar, median in zip(bars, medians):
        axes.annotate(f"n={n}", (bar.get_x() + bar.get_width() / 2, 0.02),
                      ha="center", va="bottom", fontsize=7, color="white")
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_xticks(x, [r["name"] for r in rows], fontsize=8)
    axes.set_ylabel("speedup over autoregressive (×)")
    axes.set_xlabel(f"drafter and γ (greedy, {clock['max_new_tokens']} new tokens)")
    axes.set_title(title or "The clock against the theory")
    axes.legend(fontsize=7, loc="upper right")
    axes.set_ylim(0, max(1.3, *(r["predicted"] for r in rows),
                         *(r["speedup_max"] for r in rows)) * 1.25)
    fig.tight_layout()
    return fig
