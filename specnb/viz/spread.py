"""Timings with their spread: the median of repeated runs, a bar from the lowest to the highest.

`summarize([1.2, 0.9, 1.1])` gives (median, lowest, highest, n); `paired_ratios(a, b)` divides
repeat i of one method by repeat i of another (runs made one after the other, so a slow moment
of the machine hits both); `plot_ratio_bars(...)` draws one bar per category at the median, a
whisker over the range, and the count n on every bar.

It times nothing (the notebook runs the repeats) and returns a Figure without showing it.
"""

import statistics

from matplotlib.figure import Figure


def summarize(samples) -> tuple:
    """(median, lowest, highest, n). Example: [1.2, 0.9, 1.1] -> (1.1, 0.9, 1.2, 3)."""
    samples = list(samples)
    if not samples:
        raise ValueError("samples must hold at least one value")
    return statistics.median(samples), min(samples), max(samples), len(samples)


def paired_ratios(numerators, denominators) -> list:
    """Repeat i over repeat i. Example: [2, 3] over [1, 2] -> [2.0, 1.5]."""
    numerators, denominators = list(numerators), list(denominators)
    if len(numerators) != len(denominators) or not numerators:
        raise ValueError(f"numerators and denominators must be paired repeats of the same "
                         f"nonzero length, got {len(numerators)} and {len(denominators)}")
    return [a / b for a, b in zip(numerators, denominators)]


def plot_ratio_bars(samples_by_category: dict, *, title, xlabel, ylabel, reference=1.0) -> Figure:
    """One bar per category at the median of its samples, min–max whisker, "n = …" on the bar."""
    if not samples_by_category or any(not list(v) for v in samples_by_category.values()):
        raise ValueError("samples_by_category must map each category to a nonempty list")
    stats = {name: summarize(values) for name, values in samples_by_category.items()}
    fig = Figure(figsize=(max(5.0, 1.6 * len(stats)), 3.8))
    axes = fig.subplots()
    names = list(stats)
    medians = [stats[n][0] for n in names]
    axes.bar(range(len(names)), medians, color="tab:blue", alpha=0.8,
             yerr=[[m - stats[n][1] for m, n in zip(medians, names)],
                   [stats[n][2] - m for m, n in zip(medians, names)]], capsize=4)
    for x, name in enumerate(names):
        axes.annotate(f"{stats[name][0]:.2f}\nn = {stats[name][3]}", (x, stats[name][2]),
                      textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8)
    if reference is not None:
        axes.axhline(reference, color="black", linewidth=0.8)
    axes.set_xticks(range(len(names)), names, fontsize=8)
    axes.set_ylim(0, max(s[2] for s in stats.values()) * 1.25)
    axes.set(title=title, xlabel=xlabel, ylabel=ylabel)
    axes.title.set_fontsize(10)
    fig.tight_layout()
    return fig
