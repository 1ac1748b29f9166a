"""What temperature does to p, q and the residual at one real position (notebook 03's slider).

`residual_view(target_logits, draft_logits, temperature, top_k)` applies one temperature to both
models' next-token logits (`specnb.core.logits_to_probs`, so T = 0 is greedy) and returns, for a
fixed set of tokens, p, q and the normalized residual (p − q)+ / Σ (p − q)+, with an "other"
bucket holding the rest of the vocabulary, and the acceptance probability Σ min(p, q) over the
whole vocabulary. The tokens shown are chosen once, at T = 1 (the top_k by max(p, q)), so bars do
not change places while the slider moves. `plot_residual` draws those bars beside the curve of
Σ min(p, q) against T, with a marker at the chosen T.

Pure: data or a matplotlib Figure, nothing printed, no model run (the logits come in as tensors).
Example: identical logits -> p = q, residual all zero, acceptance 1 at every temperature.
"""

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch

from ..core import logits_to_probs

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

    def with_other(law):  # [V] -> [k + 1]
        shown = law[token_ids]
        return np.append(shown.numpy(), max(float(law.sum() - shown.sum()), 0.0))

    return ResidualView(token_ids, with_other(p), with_other(q), with_other(residual),
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
