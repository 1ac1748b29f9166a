"""Plots for batched decoding: throughput against batch size, and the cost of verifying.

`plot_batch_throughput(record)` draws a `python -m specnb.bench.batch` record in three panels:
tokens/s over the batch per method, speedup over batched autoregressive decoding, and the cost
of one target forward scoring γ+1 tokens per row relative to one token per row. The last panel
is the "why": while a forward is memory-bound the extra tokens ride along (ratio near 1); as B
grows the forward becomes compute-bound and the ratio climbs towards γ+1, eating the gain.

`checking_cost(forward, k)` turns the single-forward timings of a record
(`measure_batch_forward`) into the ratio t(B × k) / t(B × 1) per B: the median over repeats,
paired repeat by repeat, and its range. `plot_checking_cost` draws it against B or against k.
`plot_mix_sweep(record)` separates the two causes a batch size sweep mixes up: per-row tokens per
forward (what the rows accept) and checking cost (what the wider forward costs), for batches of
copies of one prompt and for mixed batches, beside the measured speedup with its spread.

`cache_layout(valid)` renders a `BatchedCachedLM.valid` mask as text, one row per sequence.
Pure functions: they return figures or strings and never show them.
"""

import statistics

from matplotlib.figure import Figure

from .spread import paired_ratios, summarize


def plot_batch_throughput(record: dict) -> Figure:
    rows = record.get("rows")
    if not rows or "batch_forward" not in record:
        raise ValueError("record must be what python -m specnb.bench.batch wrote "
                         "(with 'rows' and 'batch_forward')")
    mixes = list(dict.fromkeys(r.get("mix", "mixed") for r in rows))
    lines = list(dict.fromkeys((r["method"], r.get("mix", "mixed")) for r in rows))
    fig = Figure(figsize=(14, 4))
    throughput, speedup, verify_cost = fig.subplots(1, 3)
    for name, mix in lines:
        mine = sorted((r for r in rows if r["method"] == name and r.get("mix", "mixed") == mix),
                      key=lambda r: r["batch"])
        batches = [r["batch"] for r in mine]
        style = "o-" if name.startswith("ours") else "s--"
        label = name if len(mixes) == 1 else f"{name} ({mix})"
        throughput.plot(batches, [r["tokens_per_s"] for r in mine], style, label=label)
        speedup.plot(batches, [r["speedup_vs_ours_ar"] for r in mine], style, label=label)
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
    verify_cost.plot(batches, ratios, "o-", color="tab:red",
                     label=f"measured (median of {forward['repeats']})" if "repeats" in forward
                     else "measured")
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


def checking_cost(forward: dict, k: int) -> dict:
    """Per batch size B: the time of one forward of B × k tokens over one of B × 1 token.

    Uses the paired repeats in `forward["samples_ms"]` when present (repeat i of B × k over
    repeat i of B × 1) and returns {B: (median, lowest, highest, n)}; a record with medians only
    gives (ratio, ratio, ratio, 1).
    Example: samples 1x1 [10, 12, 11], 1x5 [15, 18, 22] -> {1: (1.5, 1.5, 2.0, 3)}.
    """
    if k not in forward.get("tokens_per_row", []) or 1 not in forward["tokens_per_row"]:
        raise ValueError(f"k must be one of the measured tokens_per_row "
                         f"{forward.get('tokens_per_row')} (and 1 must be measured too)")
    samples = forward.get("samples_ms", {})
    result = {}
    for b in forward["batch_sizes"]:
        if f"{b}x{k}" in samples:
            ratios = paired_ratios(samples[f"{b}x{k}"], samples[f"{b}x1"])
        else:
            ratios = [forward["median_ms"][f"{b}x{k}"] / forward["median_ms"][f"{b}x1"]]
        result[b] = summarize(ratios)
    return result


def _errorbar(axes, xs, triples, **style):
    """Median with a bar from the lowest to the highest repeat."""
    medians = [t[0] for t in triples]
    axes.errorbar(xs, medians, yerr=[[m - t[1] for m, t in zip(medians, triples)],
                                     [t[2] - m for m, t in zip(medians, triples)]],
                  capsize=3, **style)


def plot_checking_cost(forward: dict, along: str = "batch") -> Figure:
    """t(B × k) / t(B × 1) with the range of the paired repeats.

    along="batch": one line per k > 1 against B; along="tokens": one line per B against k.
    """
    if along not in ("batch", "tokens"):
        raise ValueError(f"along must be 'batch' or 'tokens', got {along!r}")
    widths = [k for k in forward["tokens_per_row"] if k > 1]
    costs = {k: checking_cost(forward, k) for k in widths}
    n = next(iter(costs[widths[0]].values()))[3]
    fig = Figure(figsize=(6.5, 3.8))
    axes = fig.subplots()
    if along == "batch":
        batches = forward["batch_sizes"]
        for k in widths:
            _errorbar(axes, batches, [costs[k][b] for b in batches], fmt="o-",
                      label=f"B × {k} tokens over B × 1")
        axes.set_xscale("log", base=2)
        axes.set_xticks(batches, [str(b) for b in batches])
        axes.set_xlabel("batch size B (rows)")
    else:
        for b in forward["batch_sizes"]:
            _errorbar(axes, widths, [costs[k][b] for k in widths], fmt="o-",
                      label=f"B = {b}: B × k tokens over B × 1")
        axes.plot(widths, widths, ":", color="grey", label="k× (cost grows with every token)")
        axes.set_xticks(widths, [str(k) for k in widths])
        axes.set_xlabel("tokens per row in the forward, k")
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_ylabel("time ratio (×)")
    axes.set_title(f"Checking cost: one target forward, median of n = {n} paired repeats "
                   f"(bars: min–max)", fontsize=9)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_mix_sweep(record: dict, method_prefix: str = "ours prompt lookup") -> Figure:
    """Three panels against B, one colour per prompt mix ("same" copies, "mixed" prompts):
    tokens per forward (mean over rows, and the batch's, which its slowest row sets), the
    checking cost (one forward of [B, num_pred + 1] tokens over [B, 1], from the record's paired
    single-forward repeats: the widest a prompt-lookup forward gets), and the speedup over
    autoregressive (median of the repeats, bars min–max, paired repeat by repeat) beside what
    the first two predict (the batch's tokens per forward over autoregressive's ÷ the cost)."""
    rows = record.get("rows") or []
    if not any("row_tokens_per_forward" in r for r in rows):
        raise ValueError("record must come from python -m specnb.bench.batch with per-row counts "
                         "(a record written after --mix existed)")
    mixes = list(dict.fromkeys(r.get("mix", "mixed") for r in rows))
    forward = record["batch_forward"]
    k = record.get("settings", {}).get("num_pred", 0) + 1
    k = k if k in forward["tokens_per_row"] else forward["tokens_per_row"][-1]
    costs = checking_cost(forward, k)  # {B: (median, min, max, n)}: the same for both mixes
    fig = Figure(figsize=(14, 4))
    per_row, cost, speedup = fig.subplots(1, 3)
    _errorbar(cost, forward["batch_sizes"], [costs[b] for b in forward["batch_sizes"]], fmt="o-",
              color="tab:red", label=f"[B, {k}] tokens over [B, 1], median of n = "
                                     f"{next(iter(costs.values()))[3]} (bars: min–max)")
    n = None
    for mix, colour in zip(mixes, ("tab:green", "tab:purple", "tab:orange")):
        mine = {(r["method"].startswith(method_prefix), r["batch"]): r for r in rows
                if r.get("mix", "mixed") == mix and (r["method"].startswith(method_prefix)
                                                     or r["method"] == "ours autoregressive")}
        batches = sorted(b for is_method, b in mine if is_method)
        label = {"same": "B copies of one prompt", "mixed": "B different prompts"}.get(mix, mix)
        method = [mine[True, b] for b in batches]
        base = [mine[False, b] for b in batches]
        per_row.plot(batches, [statistics.mean(r["row_tokens_per_forward"]) for r in method],
                     "o-", color=colour, label=f"{label}: mean over rows")
        batch_per_forward = [r["new_tokens"] / r["target_forwards"] / r["batch"] for r in method]
        per_row.plot(batches, batch_per_forward, "x--", color=colour,
                     label=f"{label}: the batch's (tokens / forwards / B)")
        predicted = [tpf / (a["new_tokens"] / a["target_forwards"] / a["batch"]) / costs[b][0]
                     for tpf, a, b in zip(batch_per_forward, base, batches)]
        speedup.plot(batches, predicted, "x:", color=colour,
                     label=f"{label}: tokens per forward ÷ checking cost")
        triples = []
        for m, a in zip(method, base):
            ratios = paired_ratios([sa / a["new_tokens"] for sa in a["seconds_samples"]],
                                   [sm / m["new_tokens"] for sm in m["seconds_samples"]])
            triples.append(summarize(ratios))  # seconds per token, repeat by repeat
            n = len(ratios)
        _errorbar(speedup, batches, triples, fmt="o-", color=colour, label=label)
    per_row.axhline(1.0, color="black", linewidth=0.8)
    per_row.set(title="What the rows accept: tokens per target forward",
                ylabel="new tokens per target forward")
    cost.axhline(1.0, color="black", linewidth=0.8)
    cost.set(title=f"What checking costs: one target forward of {k} tokens per row",
             ylabel="time ratio (×)")
    speedup.axhline(1.0, color="black", linewidth=0.8)
    speedup.set(title=f"Result: speedup, median of n = {n} (bars: min–max)",
                ylabel="× autoregressive (tokens/s ratio)")
    for axes in (per_row, cost, speedup):
        axes.set_xscale("log", base=2)
        axes.set_xticks(batches, [str(b) for b in batches])
        axes.set_xlabel("batch size B (rows)")
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize=7)
        axes.title.set_fontsize(9)
    settings = record.get("settings", {})
    fig.suptitle(f"{record.get('device', '?')}: {method_prefix}, {settings.get('max_new_tokens', '?')} "
                 f"new tokens per row, greedy")
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
