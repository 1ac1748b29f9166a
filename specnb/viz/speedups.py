"""Plots of benchmark records (`python -m specnb.bench`): speedups per method, and the
speculative rows against γ (`plot_speedup_vs_gamma` in `specnb.viz.timing` draws them).

Pure functions of the JSON record; they return matplotlib figures and never show them.
"""

from matplotlib.figure import Figure


def plot_speedups(record: dict) -> Figure:
    """Horizontal bars: speedup over our autoregressive decoding, one panel per prompt group."""
    if "summary" not in record:
        raise ValueError("record has no 'summary'; pass what python -m specnb.bench wrote")
    groups = [g for g in record["summary"] if g != "all"] or ["all"]
    fig = Figure(figsize=(11, 0.45 * len(record["summary"]["all"]) + 1.8))
    axes = fig.subplots(1, len(groups), sharey=True, squeeze=False)[0]
    for ax, group in zip(axes, groups):
        summary = record["summary"][group]
        names = [s["method"] for s in summary]
        values = [s["speedup_vs_ours_ar"] for s in summary]
        colours = ["tab:blue" if n.startswith("ours") else "tab:orange" for n in names]
        ax.barh(range(len(names)), values, color=colours)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_yticks(range(len(names)), names)
        ax.invert_yaxis()
        ax.set_xlabel("speedup over our autoregressive (×, wall time)")
        ax.set_title(f"{group} prompts")
    fig.suptitle(f"{record['device']}: {record['settings']['max_new_tokens']} new tokens, "
                 f"T = {record['settings']['temperature']} (blue: specnb, orange: transformers)")
    fig.tight_layout()
    return fig


def speculative_by_gamma(record: dict, group: str = "all") -> list:
    """[(γ, measured speedup, predicted speedup)] for our speculative rows, sorted by γ."""
    points = []
    for s in record["summary"][group]:
        setting = s["method"].removeprefix("ours speculative γ=")
        if setting != s["method"] and setting.isdigit():  # fixed γ, exact acceptance
            points.append((int(setting), s["speedup_vs_ours_ar"], s["predicted"]))
    return sorted(points)
