"""Plots for batched decoding: throughput against batch size, and the cost of verifying.

`plot_batch_throughput(record)` draws a `python -m specnb.bench_batch` record in three panels:
tokens/s over the batch per method, speedup over batched autoregressive decoding, and the cost
of one target forward scoring γ+1 tokens per row relative to one token per row. The last panel
is the "why": while a forward is memory-bound the extra tokens ride along (ratio near 1); as B
grows the forward becomes compute-bound and the ratio climbs towards γ+1, eating the gain.

`cache_layout(valid)` renders a `BatchedCachedLM.valid` mask as text, one row per sequence.
Pure functions: they return figures or strings and never show them.
"""

from matplotlib.figure import Figure


def plot_batch_throughput(record: dict) -> Figure:
    rows = record.get("rows")
    if not rows or "batch_forward" not in record:
        raise ValueError("record must be what python -m specnb.bench_batch wrote "
                         "(with 'rows' and 'batch_forward')")
    methods = list(dict.fromkeys(r["method"] for r in rows))
    fig = Figure(figsize=(14, 4))
    throughput, speedup, verify_cost = fig.subplots(1, 3)
    for name in methods:
        mine = sorted((r for r in rows if r["method"] == name), key=lambda r: r["batch"])
        batches = [r["batch"] for r in mine]
        style = "o-" if name.startswith("ours") else "s--"
        throughput.plot(batches, [r["tokens_per_s"] for r in mine], style, label=name)
        speedup.plot(batches, [r["speedup_vs_ours_ar"] for r in mine], style, label=name)
    throughput.set_title("Throughput over the whole batch")
    throughput.set_ylabel("new tokens / s")
    speedup.axhline(1.0, color="black", linewidth=0.8)
    speedup.set_title("Speedup over batched autoregressive")
    speedup.set_ylabel("× (tokens/s ratio)")
    throughput.legend(fontsize=8)

    forward = record["batch_forward"]
    k = forward["tokens_per_row"][-1]
    batches = forward["batch_sizes"]
    ratios = [forward["median_ms"][f"{b}x{k}"] / forward["median_ms"][f"{b}x1"] for b in batches]
    verify_cost.plot(batches, ratios, "o-", color="tab:red", label="measured")
    verify_cost.axhline(1.0, color="grey", linestyle=":", label="free (memory-bound)")
    verify_cost.axhline(k, color="grey", linestyle="--", label=f"{k}× (compute-bound)")
    verify_cost.set_title(f"Target forward: B×{k} tokens over B×1 token")
    verify_cost.set_ylabel("time ratio")
    verify_cost.legend(fontsize=8)
    for axes in (throughput, speedup, verify_cost):
        axes.set_xscale("log", base=2)
        axes.set_xticks(batches, [str(b) for b in batches])
        axes.set_xlabel("batch size B (rows)")
        axes.grid(True, which="both", alpha=0.3)
    settings = record.get("settings", {})
    fig.suptitle(f"{record.get('device', '?')}: {settings.get('max_new_tokens', '?')} new tokens "
                 f"per row, greedy, γ = {settings.get('gamma', '?')}")
    fig.tight_layout()
    return fig


def cache_layout(valid) -> str:
    """One line per row: `█` a real token's slot, `·` padding or a rolled-back draft.

    Example: [[1, 1, 0, 1], [1, 0, 0, 1]] -> "row 0 |██·█|  3 tokens", "row 1 |█··█|  2 tokens".
    """
    lines = []
    for row, slots in enumerate(valid.tolist() if hasattr(valid, "tolist") else valid):
        cells = "".join("█" if v else "·" for v in slots)
        lines.append(f"row {row} |{cells}| {sum(bool(v) for v in slots):>2} tokens")
    return "\n".join(lines)
