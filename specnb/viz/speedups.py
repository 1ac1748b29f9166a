"""Plots of benchmark records (`python -m specnb.bench`): speedups per method, each prompt's
speedup beside the total, and the speculative rows against γ (`plot_speedup_vs_gamma` in
`specnb.viz.timing` draws them).

Pure functions of the JSON record; they return matplotlib figures and never show them.
"""

from matplotlib.figure import Figure

BASE = "ours autoregressive"


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
        ax.set_xlabel("speedup over our autoregressive (×, tokens per second)")
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


def per_prompt_speedups(record: dict, base: str = BASE) -> dict:
    """{method: {prompt id: speedup over `base` on that prompt, "total": over all its prompts}}
    for every method but `base`, in tokens per second from the record's rows (greedy, where
    every output equals `base`'s, that is base seconds / method seconds; sampled answers differ
    in length). The total divides all tokens by all seconds of the prompts both ran.
    Example: base 2 s and 4 s, method 1 s and 4 s, 8 tokens each -> {p1: 2.0, p2: 1.0,
    "total": 1.2}."""
    rows = record.get("rows") if isinstance(record, dict) else None
    if not rows:
        raise ValueError("record has no 'rows'; pass what python -m specnb.bench wrote")
    runs = {}  # method -> prompt -> (tokens, seconds)
    for row in rows:
        runs.setdefault(row["method"], {})[row["prompt_id"]] = (row["new_tokens"], row["seconds"])
    if base not in runs:
        raise ValueError(f"record has no {base!r} rows to compare with (methods: {sorted(runs)})")

    def rate(pairs):
        return sum(tokens for tokens, _ in pairs) / sum(seconds for _, seconds in pairs)
    result = {}
    for method, times in runs.items():
        if method == base:
            continue
        prompts = [p for p in times if p in runs[base]]
        ratios = {p: rate([times[p]]) / rate([runs[base][p]]) for p in prompts}
        ratios["total"] = rate([times[p] for p in prompts]) / rate([runs[base][p] for p in prompts])
        result[method] = ratios
    return result


def plot_per_prompt_speedups(record: dict, methods=None, base: str = BASE) -> Figure:
    """One row per method (`methods`: which and in what order; default all but `base`): a dot
    per prompt at its speedup over `base`, a bar at the speedup over all prompts' time, a line
    at 1 (as fast as `base`). The dots show what a total hides: how much prompts differ."""
    speedups = per_prompt_speedups(record, base)
    names = list(speedups) if methods is None else list(methods)
    missing = [n for n in names if n not in speedups]
    if missing:
        raise ValueError(f"no rows for {missing} in the record (methods: {list(speedups)})")
    fig = Figure(figsize=(10, 0.55 * len(names) + 1.6))
    ax = fig.subplots()
    for i, name in enumerate(names):
        ratios = speedups[name]
        per_prompt = [v for p, v in ratios.items() if p != "total"]
        colour = "tab:blue" if name.startswith("ours") else "tab:orange"
        ax.barh(i, ratios["total"], color=colour, alpha=0.35, height=0.6)
        # Spread the dots a little in height so that equal values stay visible.
        spread = max(len(per_prompt) - 1, 1)
        offsets = [0.22 * (2 * k / spread - 1) for k in range(len(per_prompt))]
        ax.plot(per_prompt, [i + o for o in offsets], "o", color=colour, markersize=4)
        ax.text(0.03, i, f"{ratios['total']:.2f}×", va="center", fontsize=9)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlim(left=0, right=max(1.1, *(max(speedups[n].values()) for n in names)) * 1.12)
    ax.set_xlabel(f"speedup over {base} (×, tokens per second): bar = all prompts, "
                  f"dot = one prompt")
    settings = record.get("settings", {})
    prompts = {row["prompt_id"] for row in record["rows"] if row["method"] == base}
    ax.set_title(f"{record.get('device', '')}: {len(prompts)} prompts, "
                 f"{settings.get('max_new_tokens', '?')} new tokens, "
                 f"T = {settings.get('temperature', '?')}", fontsize=10)
    fig.tight_layout()
    return fig
