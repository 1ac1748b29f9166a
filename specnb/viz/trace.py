"""Token-level views of decoding traces: notebooks 05 (speculative), 07 (lookup), 08 (Jacobi).

Text and HTML renderings of `GenerationResult.trace` (what was drafted, accepted and emitted,
and why), where a prompt-lookup draft was copied from, how Jacobi guesses converge, and the
numbers and plots behind the speculative-decoding widgets. Functions return a string, plain
data or a matplotlib figure and print nothing. Nothing here runs a model or changes how decoding
is done: the widgets' numbers come from `specnb.bench.live.speculative_summary`.

Example: trace_text(result, tokenizer) -> a header, then a line per iteration (from 0), e.g.
    iter   1 | ✓'.' ✗' Get' ·' more' -> '.' ~' Establish'
"""

import html
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from ..theory import optimal_gamma, predicted_speedup
from .bars import grouped_bars

DRAFT_MARKS = {"accepted": "✓", "rejected": "✗", "unverified": "·"}
EMIT_MARKS = {"accepted": "", "resampled": "~", "bonus": "+", "target": ""}
COLOURS = {"accepted": "#b7e4b0", "rejected": "#f4b6b6", "unverified": "#dddddd",
           "resampled": "#f9d49b", "bonus": "#a9cdf5", "target": "#d9c8f0", "ngram": "#fff1a8"}


def token_repr(tokenizer, token: int) -> str:
    """One token quoted as Python would (the embedded tokenizer): 198 -> '\\n', 253 -> ' a'."""
    return repr(tokenizer.decode([int(token)]))


def _span(text: str, colour: str, title: str = "", line_breaks: bool = False) -> str:
    """A coloured HTML chip. Newlines show as \\n, or as ↵ plus a real line break."""
    text = text.replace("\n", "↵\n" if line_breaks else "\\n").replace("\t", "\\t")
    return (f'<span title="{html.escape(title)}" style="background:{colour};padding:1px 2px;'
            f'margin:1px;border-radius:3px;white-space:pre">{html.escape(text)}</span>')


def _iterations(result, max_iterations):
    if max_iterations is not None and max_iterations < 1:
        raise ValueError(f"max_iterations must be None or >= 1, got {max_iterations}")
    return result.trace[:max_iterations]


def trace_text(result, tokenizer, max_iterations=None) -> str:
    """One line per iteration: drafts marked ✓ accepted, ✗ rejected, · unverified, then the
    emitted tokens (~ resampled, + bonus; accepted drafts and plain target tokens unmarked)."""
    lines = [f"{result.method}: {len(result.trace)} iterations, {len(result.tokens[0])} tokens"]
    for i, it in enumerate(_iterations(result, max_iterations)):
        drafted = " ".join(DRAFT_MARKS[d.status] + token_repr(tokenizer, d.token)
                           for d in it.drafted) or "(no draft)"
        emitted = " ".join(EMIT_MARKS[e.kind] + token_repr(tokenizer, e.token) for e in it.emitted)
        lines.append(f"iter {i:3d} | {drafted} -> {emitted}")
    if max_iterations is not None and len(result.trace) > max_iterations:
        lines.append(f"... {len(result.trace) - max_iterations} more iterations")
    return "\n".join(lines)


def trace_html(result, tokenizer, max_iterations=None) -> str:
    """An HTML table, one row per iteration: drafts coloured by status, emitted by kind.
    Hovering a draft shows q, p and min(1, p/q)."""
    legend = " ".join(_span(name, COLOURS[name]) for name in
                      ("accepted", "rejected", "unverified", "resampled", "bonus"))
    rows = []
    for i, it in enumerate(_iterations(result, max_iterations)):
        drafted = "".join(_span(tokenizer.decode([d.token]), COLOURS[d.status],
                                f"{d.status}: q={d.q:.3f} p={d.p:.3f} "
                                f"min(1,p/q)={d.accept_prob:.3f}") for d in it.drafted)
        emitted = "".join(_span(tokenizer.decode([e.token]), COLOURS[e.kind], e.kind)
                          for e in it.emitted)
        rows.append(f"<tr><td>{i}</td><td style='text-align:left'>{drafted}</td>"
                    f"<td style='text-align:left'>{emitted}</td></tr>")
    return (f"<div style='font-family:monospace;font-size:90%'><p>{legend}</p><table>"
            f"<tr><th>iter</th><th>drafted</th><th>emitted</th></tr>{''.join(rows)}</table></div>")


def format_summary(summary: dict) -> str:
    """The deterministic numbers of a summary, floats rounded to 4 decimals (no wall time)."""
    keys = ("gamma", "temperature", "new_tokens", "iterations", "target_forwards",
            "draft_forwards", "draft_yield", "alpha_hat", "tokens_per_iteration",
            "expected_tokens_per_iteration")
    shown = {k: round(summary[k], 4) if isinstance(summary[k], float) else summary[k] for k in keys}
    return "\n".join(f"{k:30s} {v}" for k, v in shown.items())


def plot_speculative_summary(summary: dict):
    """Left: tokens emitted per iteration, measured vs the truncated geometric law at α̂.
    Right: the per-position acceptance, P(draft j accepted | drafts 1..j-1 accepted), vs α̂."""
    gamma, alpha = summary["gamma"], summary["alpha_hat"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    sizes = np.arange(1, gamma + 2)
    measured = np.array([summary["emitted_counts"].get(int(k), 0) for k in sizes], float)
    bars = left.bar(sizes, measured / max(measured.sum(), 1), color="tab:blue",
                    label=f"measured (n = {int(measured.sum())} iterations)")
    left.bar_label(bars, labels=[f"n={int(n)}" for n in measured], fontsize=8)
    if not math.isnan(alpha):  # P(k) = α^{k-1}(1-α) for k <= γ, α^γ for k = γ+1
        law = [alpha ** (k - 1) * ((1 - alpha) if k <= gamma else 1) for k in sizes]
        left.plot(sizes, law, "ko--", label=f"predicted at α̂ = {alpha:.3f}")
    left.set(title=f"Tokens per iteration (γ = {gamma}, T = {summary['temperature']})",
             xlabel="tokens emitted in one iteration", ylabel="fraction of iterations",
             xticks=sizes)
    left.legend()
    rates = [a / r if r else np.nan for a, r in summary["accepted_by_position"]]
    bars = right.bar(np.arange(1, gamma + 1), rates, color="tab:green", label="measured")
    # n: how many times each position was reached (checked), the denominator of its rate
    right.bar_label(bars, labels=[f"n={r}" for _, r in summary["accepted_by_position"]],
                    fontsize=8)
    if not math.isnan(alpha):
        right.axhline(alpha, color="black", linestyle="--", label="α̂ (all positions)")
    right.set(title="Per-position acceptance", xlabel="draft position j",
              ylabel="P(accepted | reached)", ylim=(0, 1.05), xticks=np.arange(1, gamma + 1),
              xlim=(0.5, gamma + 0.5))
    right.legend()
    fig.tight_layout()
    return fig


def plot_gamma_curves(alphas, cost_ratio, measured_alpha=None, max_gamma=12):
    """Predicted speedup (Thm 3.8) against γ for each α, γ* starred; measured α̂ in black."""
    if not len(alphas):
        raise ValueError("alphas must hold at least one acceptance rate")
    fig, ax = plt.subplots(figsize=(7, 4.2))
    gammas = np.arange(0, max_gamma + 1)
    curves = [(a, f"α = {a:.2f}", None) for a in alphas]
    if measured_alpha is not None:
        curves.append((measured_alpha, f"measured α̂ = {measured_alpha:.3f}", "black"))
    for alpha, label, colour in curves:
        line, = ax.plot(gammas, [predicted_speedup(alpha, g, cost_ratio) for g in gammas],
                        color=colour, linewidth=2.5 if colour else 1.5, label=label)
        best = optimal_gamma(alpha, cost_ratio, max_gamma)
        ax.plot(best, predicted_speedup(alpha, best, cost_ratio), "*", markersize=13,
                color=line.get_color())
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set(title=f"Predicted speedup vs γ (c = {cost_ratio:.3f}; ★ = γ*)",
           xlabel="γ (draft tokens per iteration)", ylabel="speedup over autoregressive (×)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def lookup_spans(result, prompt_ids) -> list:
    """Per prompt-lookup iteration: the sequence it saw and where its draft was copied from.

    Each item: {"sequence" (ids), "tail" (start, end) of the sequence's last n tokens, "ngram"
    (start, end) of their earlier occurrence, "source" (start, end) of the copied draft,
    "statuses" of the drafts}; the spans are None when nothing was drafted.
    """
    if result.method != "prompt_lookup":
        raise ValueError(f"result must come from specnb.prompt_lookup, got {result.method!r}")
    sequence, items = torch.as_tensor(prompt_ids).view(-1).tolist(), []
    for it in result.row(0).trace:
        n, match, source = (it.info[k] for k in ("ngram_size", "match_start", "source_start"))
        found = bool(it.drafted) and match >= 0
        items.append({"sequence": list(sequence),
                      "tail": (len(sequence) - n, len(sequence)) if found else None,
                      "ngram": (match, match + n) if found else None,
                      "source": (source, source + len(it.drafted)) if found else None,
                      "statuses": [d.status for d in it.drafted]})
        sequence += [e.token for e in it.emitted]
    return items


def lookup_text(result, tokenizer, prompt_ids, iterations) -> str:
    """One line per chosen iteration: the tail n-gram, where it matched, the copy and its fate."""
    items, lines = lookup_spans(result, prompt_ids), []
    for i in iterations:
        item = items[i]
        if item["source"] is None:
            lines.append(f"iter {i:3d} | no draft (no earlier match, or no room left)")
            continue
        tail, ngram, source = (item[k] for k in ("tail", "ngram", "source"))
        marks = "".join(DRAFT_MARKS[s] for s in item["statuses"])
        lines.append(f"iter {i:3d} | tail {tokenizer.decode(item['sequence'][slice(*tail)])!r} "
                     f"(n={tail[1] - tail[0]}) found at {ngram[0]} -> copy "
                     f"{tokenizer.decode(item['sequence'][slice(*source)])!r} {marks}")
    return "\n".join(lines)


def _render(tokenizer, sequence, start, end, colours) -> str:
    """sequence[start:end] as HTML, positions in `colours` highlighted."""
    pieces = []
    for p in range(max(start, 0), min(end, len(sequence))):
        text = tokenizer.decode([sequence[p]])
        pieces.append(_span(text, colours[p], line_breaks=True) if p in colours
                      else html.escape(text))
    return "".join(pieces)


def lookup_html(result, tokenizer, prompt_ids, iterations, context=30) -> str:
    """For each chosen iteration: the text around the copy (earlier n-gram yellow, copied draft
    coloured by status), then the end of the sequence with the tail n-gram in yellow."""
    box = "font-family:monospace;white-space:pre-wrap;padding:4px"
    items, blocks = lookup_spans(result, prompt_ids), []
    for i in iterations:
        item = items[i]
        if item["source"] is None:
            blocks.append(f"<p><b>iteration {i}</b>: no draft.</p>")
            continue
        sequence, tail, ngram, source = (item[k] for k in ("sequence", "tail", "ngram", "source"))
        around = {p: COLOURS["ngram"] for p in range(*ngram)}
        around.update({source[0] + j: COLOURS[s] for j, s in enumerate(item["statuses"])})
        at_end = {p: COLOURS["ngram"] for p in range(*tail)}
        blocks.append(
            f"<p><b>iteration {i}</b>: the last {tail[1] - tail[0]} token(s) also occur at "
            f"position {ngram[0]}; {len(item['statuses'])} copied, "
            f"{item['statuses'].count('accepted')} accepted</p>"
            f"<div style='{box};border:1px solid #ccc'>…"
            f"{_render(tokenizer, sequence, ngram[0] - context, source[1] + context, around)}"
            f"…</div><div style='{box}'>end of the sequence so far: …"
            f"{_render(tokenizer, sequence, len(sequence) - context, len(sequence), at_end)}</div>")
    return "<div>" + "".join(blocks) + "</div>"


def plot_grouped_bars(categories, series: dict, *, title, xlabel, ylabel, reference=None):
    """Bars per category, one colour per series; an optional horizontal reference line."""
    fig, ax = plt.subplots(figsize=(max(5.0, 1.8 * len(categories)), 3.8))
    grouped_bars(ax, categories, series, fontsize=8)
    if reference is not None:
        ax.axhline(reference, color="black", linewidth=0.8)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    fig.tight_layout()
    return fig
