"""What temperature does to p, q and the residual at one real position (notebook 03's slider).

`residual_view(target_logits, draft_logits, temperature, top_k)` applies one temperature to both
models' next-token logits (`specnb.core.logits_to_probs`, so T = 0 is greedy) and returns, for a
fixed set of tokens, p, q and the normalized residual (p − q)+ / Σ (p − q)+, with an "other"
bucket holding the rest of the vocabulary, and the acceptance probability Σ min(p, q) over the
whole vocabulary. The tokens shown are chosen once, at T = 1 (the top_k by max(p, q)), so bars do
not change places while the slider moves. `plot_residual` draws those bars beside the curve of
Σ min(p, q) against T, with a marker at the chosen T.

`plot_typical_law` draws, at the same position, the law the lossy typical acceptance emits
(`specnb.core.typical.typical_law`, notebook 12's slider) beside p and q.

Pure: data or a matplotlib Figure, nothing printed, no model run (the logits come in as tensors).
Example: identical logits -> p = q, residual all zero, acceptance 1 at every temperature.
"""

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch

from ..core import logits_to_probs
from ..core.typical import typical_law, typical_threshold

DEFAULT_TEMPERATURES = tuple(np.round(np.linspace(0.0, 2.0, 41), 2))


@dataclass
class ResidualView:
    token_ids: list  # [k] the tokens shown (then "other")
    target_probs: np.ndarray  # [k + 1] p of each shown token, then of all the others together
    draft_probs: np.ndarray  # [k + 1] q, the same way
    residual: np.ndarray  # [k + 1] (p − q)+ / Σ (p − q)+, the same way; all 0 when p = q
    acceptance: float  # Σ min(p, q) over the whole vocabulary
    temperature: float


def _check_logits(target_logits, draft_logits) -> tuple:
    target_logits = torch.as_tensor(target_logits, dtype=torch.float32).flatten()
    draft_logits = torch.as_tensor(draft_logits, dtype=torch.float32).flatten()
    if target_logits.shape != draft_logits.shape or target_logits.numel() < 2:
        raise ValueError(f"target_logits and draft_logits must be [V] over one vocabulary of at "
                         f"least 2 tokens, got {tuple(target_logits.shape)} and "
                         f"{tuple(draft_logits.shape)}")
    return target_logits, draft_logits


def _with_other(law, token_ids) -> np.ndarray:
    """[V] -> [k + 1]: the law on the shown tokens, then the mass of all the others."""
    shown = law[token_ids]
    return np.append(shown.numpy(), max(float(law.sum() - shown.sum()), 0.0))


def shown_tokens(target_logits, draft_logits, top_k: int = 8) -> list:
    """The top_k token ids by max(p, q) at T = 1, most likely under p first."""
    target_logits, draft_logits = _check_logits(target_logits, draft_logits)
    if not 1 <= top_k < target_logits.numel():
        raise ValueError(f"top_k must be in [1, {target_logits.numel() - 1}], got {top_k}")
    p, q = torch.softmax(target_logits, -1), torch.softmax(draft_logits, -1)
    top = torch.topk(torch.maximum(p, q), top_k).indices
    return top[torch.argsort(p[top], descending=True, stable=True)].tolist()


def residual_view(target_logits, draft_logits, temperature: float = 1.0,
                  top_k: int = 8) -> ResidualView:
    """p, q, the normalized residual on the shown tokens (+ other) and Σ min(p, q) at T."""
    target_logits, draft_logits = _check_logits(target_logits, draft_logits)
    token_ids = shown_tokens(target_logits, draft_logits, top_k)
    p = logits_to_probs(target_logits, temperature).double()  # [V]
    q = logits_to_probs(draft_logits, temperature).double()  # [V]
    excess = (p - q).clamp_min(0.0)
    residual = excess / excess.sum() if excess.sum() > 0 else torch.zeros_like(excess)

    return ResidualView(token_ids, _with_other(p, token_ids), _with_other(q, token_ids),
                        _with_other(residual, token_ids),
                        float(torch.minimum(p, q).sum()), float(temperature))


def acceptance_curve(target_logits, draft_logits, temperatures=DEFAULT_TEMPERATURES) -> np.ndarray:
    """Σ min(p, q) at each temperature: `[len(temperatures)]`."""
    target_logits, draft_logits = _check_logits(target_logits, draft_logits)
    return np.array([float(torch.minimum(logits_to_probs(target_logits, t),
                                         logits_to_probs(draft_logits, t)).sum())
                     for t in temperatures])


def plot_residual(target_logits, draft_logits, temperature: float = 1.0, top_k: int = 8,
                  decode=str, temperatures=DEFAULT_TEMPERATURES):
    """Bars of p, q and the residual at T (left); Σ min(p, q) against T (right). A Figure.

    `decode` turns a token id into its label (e.g. `lambda t: tokenizer.decode([t])`).
    """
    view = residual_view(target_logits, draft_logits, temperature, top_k)
    curve = acceptance_curve(target_logits, draft_logits, temperatures)
    labels = [repr(decode(token)) for token in view.token_ids] + ["other"]
    fig, (bars, line) = plt.subplots(1, 2, figsize=(12, 3.8),
                                     gridspec_kw={"width_ratios": [2.2, 1]})
    positions = np.arange(len(labels))
    laws = {"target p": view.target_probs, "draft q": view.draft_probs,
            "residual (p−q)+ / Σ(p−q)+": view.residual}
    for i, (name, law) in enumerate(laws.items()):
        bars.bar(positions + (i - 1) * 0.27, law, 0.27, label=name)
    bars.set_xticks(positions, labels, rotation=30, ha="right", fontsize=8)
    bars.set(title=f"Next token at T = {temperature:g}: acceptance Σ min(p, q) = "
                   f"{view.acceptance:.3f}", xlabel="token", ylabel="probability", ylim=(0, 1.02))
    bars.legend(fontsize="small")
    line.plot(temperatures, curve, color="tab:green")
    line.plot([temperature], [view.acceptance], "o", color="black", label=f"T = {temperature:g}")
    line.set(title="Acceptance against temperature", xlabel="temperature T (both models)",
             ylabel="Σ min(p, q)", ylim=(0, 1.02))
    line.legend(fontsize="small")
    fig.tight_layout()
    return fig


def typical_view(target_logits, draft_logits, temperature: float, posterior_threshold: float,
                 posterior_alpha: float, top_k: int = 8) -> dict:
    """Typical acceptance at one position and T (`specnb.core.typical`, γ = 1): {"target",
    "draft", "typical" ([k + 1] laws on the shown tokens, then "other"), "bar" (the threshold
    a draft must clear), "scaled_entropy" (δ·exp(−H(p)): the bar is min(ε, this)), "tv" (TV of
    the typical law from p over the whole vocabulary), "cleared" (how many tokens clear the
    bar)}."""
    target_logits, draft_logits = _check_logits(target_logits, draft_logits)
    token_ids = shown_tokens(target_logits, draft_logits, top_k)
    p = logits_to_probs(target_logits, temperature).double()
    q = logits_to_probs(draft_logits, temperature).double()
    law = typical_law(p, q, posterior_threshold, posterior_alpha)
    bar = float(typical_threshold(p, posterior_threshold, posterior_alpha))
    # δ·exp(−H(p)), the other side of the min: a threshold of 1 leaves only it.
    scaled_entropy = float(typical_threshold(p, 1.0, posterior_alpha))

    return {"token_ids": token_ids, "target": _with_other(p, token_ids),
            "draft": _with_other(q, token_ids), "typical": _with_other(law, token_ids),
            "bar": bar, "tv": 0.5 * float((law - p).abs().sum()),
            "cleared": int((p > bar).sum()), "scaled_entropy": scaled_entropy}


def plot_typical_law(target_logits, draft_logits, temperature: float, posterior_threshold: float,
                     posterior_alpha: float, top_k: int = 8, decode=str) -> tuple:
    """(text, Figure): p, q and the law typical acceptance emits at one position (`typical_view`),
    the bar drawn across, its distance from p in the title. At T = 0 the law is p (greedy)."""
    view = typical_view(target_logits, draft_logits, temperature, posterior_threshold,
                        posterior_alpha, top_k)
    labels = [repr(decode(token)) for token in view["token_ids"]] + ["other"]
    fig, ax = plt.subplots(figsize=(9, 3.6))
    positions = np.arange(len(labels))
    for i, (name, law) in enumerate({"target p": view["target"], "draft q": view["draft"],
                                     "typical acceptance's law": view["typical"]}.items()):
        ax.bar(positions + (i - 1) * 0.27, law, 0.27, label=name)
    ax.axhline(view["bar"], color="black", linestyle=":", linewidth=1,
               label=f"bar {view['bar']:.3f}: p(x) must clear it")
    ax.set_xticks(positions, labels, rotation=30, ha="right", fontsize=8)
    ax.set(title=f"T = {temperature:g}, ε = {posterior_threshold:g}, δ = {posterior_alpha:g}: "
                 f"TV(typical law, p) = {view['tv']:.3f}", ylabel="probability of the first token",
           ylim=(0, 1.02))
    ax.legend(fontsize="small")
    fig.tight_layout()
    text = (f"bar = min(ε, δ·exp(−H(p))) = min({posterior_threshold:g}, "
            f"{view['scaled_entropy']:.3f}) = {view['bar']:.3f}; {view['cleared']} token(s) clear "
            f"it; TV(typical law, p) = {view['tv']:.3f} (exact acceptance: 0)")
    return text, fig
