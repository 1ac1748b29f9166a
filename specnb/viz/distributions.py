"""Distributions for notebooks 03 and 04: a toy (p, q) pair, distances, χ², and their plots.

`toy_pair(shape, temperature)` builds a target p and a draft q over an 8-token vocabulary and the
quantities speculative sampling is made of: min(p, q), the normalized residual (p − q)+ and the
acceptance probability Σ min(p, q). The rest measures how far samples are from a law (total
variation and its sampling noise; the χ² test is `specnb.stats.chi2_goodness_of_fit`, re-exported
here for the notebooks) and plots it.

Everything is pure: functions return data or a matplotlib Figure and print nothing. Nothing
here samples or verifies tokens; that is `specnb.core.verify`'s job, and the notebooks call it.
"""

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch

from ..core import logits_to_probs
from ..core.sampler import check_temperature
from ..stats import chi2_goodness_of_fit, empirical_law  # noqa: F401  (notebooks 03, 04 call them here)
from .bars import grouped_bars

TOY_TOKENS = ("the", "a", "cat", "dog", "sat", "on", "mat", ".")
TOY_TARGET_LOGITS = (2.0, 1.6, 1.2, 0.9, 0.4, 0.0, -0.6, -1.2)
TOY_DRAFT_NOISE = (-1.1, 0.9, 0.2, -0.5, 1.4, -0.3, 0.7, -0.9)  # the direction `shape` moves q


@dataclass
class ToyPair:
    target_probs: torch.Tensor  # [V] float32: p = softmax(target_logits / T)
    draft_probs: torch.Tensor  # [V] float32: q = softmax((target_logits + shape * noise) / T)
    overlap: torch.Tensor  # [V] min(p, q): the mass emitted by accepting a draft
    residual: torch.Tensor  # [V] (p − q)+ / Σ (p − q)+, all zeros when p = q (no rejections)
    acceptance: float  # Σ min(p, q) = 1 − TV(p, q): the chance that a draft is accepted


def toy_logits(shape: float = 1.0) -> tuple:
    """(target_logits, draft_logits), each `[V]` float32; shape 0 makes the two equal."""
    shape = float(shape)
    if not math.isfinite(shape):
        raise ValueError(f"shape must be a finite number (0 makes q = p), got {shape}")
    target_logits = torch.tensor(TOY_TARGET_LOGITS)
    return target_logits, target_logits + shape * torch.tensor(TOY_DRAFT_NOISE)


def toy_pair(shape: float = 1.0, temperature: float = 1.0) -> ToyPair:
    """The toy p and q at one temperature (0 = greedy one-hots), with min, residual, Σ min.

    Computed in float64 and rounded once to float32, so every CPU gets the same bits: a float32
    softmax or sum rounds differently with each vector width torch's CPU kernels use
    (`ATEN_CPU_CAPABILITY`), and notebooks that sample from the toy pair print its exact counts.
    """
    target_logits, draft_logits = toy_logits(shape)
    p, q = (_exact_probs(logits, temperature) for logits in (target_logits, draft_logits))
    overlap = torch.minimum(p, q)
    excess = (p.double() - q.double()).clamp_min(0.0)
    mass = excess.sum()
    residual = (excess / mass).float() if mass > 0 else torch.zeros_like(p)
    return ToyPair(p, q, overlap, residual, float(overlap.double().sum()))


def _exact_probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """softmax(logits / T) computed in float64, returned in float32 (T = 0: the one-hot)."""
    if check_temperature(temperature) == 0.0:
        return logits_to_probs(logits, 0.0)
    shifted = logits.double() - logits.double().max()
    return torch.softmax(shifted / temperature, dim=-1).float()


def plot_toy_pair(shape: float = 1.0, temperature: float = 1.0):
    """Grouped bars of p, q, min(p, q) and the normalized residual; Σ min(p, q) in the title."""
    pair = toy_pair(shape, temperature)
    fig, ax = plt.subplots(figsize=(9, 3.8))
    grouped_bars(ax, TOY_TOKENS, {"target p": pair.target_probs, "draft q": pair.draft_probs,
                                   "min(p, q)": pair.overlap,
                                   "residual (p−q)+ / Σ(p−q)+": pair.residual})
    ax.set(title=f"Toy pair (shape {shape:g}, temperature {temperature:g}): "
                 f"acceptance Σ min(p, q) = {pair.acceptance:.3f}",
           xlabel="token", ylabel="probability")
    fig.tight_layout()
    return fig


def total_variation(law_a, law_b) -> float:
    """½ Σ |a − b|. Example: [0.5, 0.5, 0] vs [0.25, 0.25, 0.5] -> 0.5."""
    return 0.5 * float(np.abs(np.asarray(law_a, float) - np.asarray(law_b, float)).sum())


def expected_sampling_tv(probs, num_samples: int) -> float:
    """E TV(law of N exact samples, p) ≈ ½ Σ sqrt(2 p (1 − p) / (π N)) (normal approximation)."""
    probs = np.asarray(probs, float)
    return 0.5 * float(np.sqrt(2 * probs * (1 - probs) / (math.pi * num_samples)).sum())


def tv_threshold(vocab_size: int, num_samples: int, failure_prob: float = 1e-3) -> float:
    """A TV that N exact samples exceed with probability < failure_prob, for any p over V tokens.

    E TV <= ½ sqrt(V / N) (Cauchy–Schwarz), and one sample moves TV by at most 1/N, so by
    McDiarmid P(TV > E TV + t) <= exp(−2 N t²): t = sqrt(ln(1 / failure_prob) / (2 N)).
    """
    if not 0 < failure_prob < 1:
        raise ValueError(f"failure_prob must be in (0, 1), got {failure_prob}")
    return 0.5 * math.sqrt(vocab_size / num_samples) + \
        math.sqrt(math.log(1 / failure_prob) / (2 * num_samples))


def tv_versus_samples(token_ids: torch.Tensor, probs, sample_sizes) -> np.ndarray:
    """TV(empirical law of the first N ids, p) for each N in `sample_sizes`."""
    token_ids = torch.as_tensor(token_ids).flatten()
    if max(sample_sizes) > token_ids.numel():
        raise ValueError(f"sample_sizes go up to {max(sample_sizes)} but only "
                         f"{token_ids.numel()} token_ids were given")
    return np.array([total_variation(empirical_law(token_ids[:n], len(probs)), probs)
                     for n in sample_sizes])


def plot_tv_versus_samples(sample_sizes, tv_curves: dict, probs, title: str):
    """Log–log TV against N per curve (name -> `[len(sample_sizes)]`), with the 1/√N trend."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, tvs in tv_curves.items():
        ax.loglog(sample_sizes, tvs, marker="o", markersize=3, label=name)
    trend = [expected_sampling_tv(probs, n) for n in sample_sizes]
    ax.loglog(sample_sizes, trend, "k--", label="expected sampling noise ∝ 1/√N")
    ax.set(title=title, xlabel="number of samples N", ylabel="total variation to p")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def top_k_buckets(token_ids: torch.Tensor, probs: torch.Tensor, k: int) -> tuple:
    """Map ids to k + 1 buckets: the k most likely tokens under p, then "other".

    Returns (bucket ids `[N]`, bucket probabilities `[k + 1]` float64, top token ids `[k]`).
    Example: p = [0.1, 0.6, 0.3], k = 1, ids [1, 2, 0] -> buckets [0, 1, 1], probs [0.6, 0.4].
    """
    probs = torch.as_tensor(probs).double().flatten().cpu()
    if not 1 <= k < probs.numel():
        raise ValueError(f"k must be in [1, {probs.numel() - 1}], got {k}")
    top_ids = torch.topk(probs, k).indices
    bucket_of_token = torch.full((probs.numel(),), k, dtype=torch.long)
    bucket_of_token[top_ids] = torch.arange(k)
    bucket_probs = torch.cat([probs[top_ids], (probs.sum() - probs[top_ids].sum()).view(1)])
    return bucket_of_token[torch.as_tensor(token_ids).long().cpu()], bucket_probs, top_ids


def plot_law_comparison(labels, laws: dict, title: str):
    """Grouped bars comparing laws (name -> `[K]` probabilities) over the same K labels."""
    fig, ax = plt.subplots(figsize=(9, 3.8))
    grouped_bars(ax, labels, laws)
    ax.set(title=title, xlabel="token", ylabel="probability")
    ax.tick_params(axis="x", labelrotation=30 if len(labels) > 8 else 0)
    fig.tight_layout()
    return fig


def plot_pair_cells(pair_law, first_labels, second_labels, title: str, observed=None):
    """The cells of the two-token test drawn as a grid: one row per likely first token (its
    probability beside it), one column per likely second token after it and a last column for
    any other second token, then one cell for any other first token. Each cell shows its token
    and its exact probability p(t1) p(t2 | t1), shaded by it; with `observed` (the runs' share
    per cell, same order) the share is printed under it.

    `pair_law`: `[K1·(K2+1) + 1]` cell probabilities in `specnb.course.pair_law`'s order (row i,
    column j at i·(K2+1) + j; the lone cell last); `first_labels`: K1 strings;
    `second_labels`: K1 lists of K2 strings."""
    law = np.asarray(pair_law, dtype=float)
    rows, columns = len(first_labels), len(second_labels[0]) + 1 if second_labels else 0
    if rows == 0 or any(len(s) != columns - 1 for s in second_labels) or \
            len(second_labels) != rows or law.shape != (rows * columns + 1,):
        raise ValueError(f"pair_law must hold K1·(K2+1) + 1 cells for {rows} first tokens and "
                         f"their second-token labels, got {law.shape[0]} cells")
    shares = None if observed is None else np.asarray(observed, dtype=float)
    if shares is not None and shares.shape != law.shape:
        raise ValueError(f"observed must have one share per cell ({law.shape[0]}), got "
                         f"{shares.shape[0]}")
    fig, ax = plt.subplots(figsize=(1.55 * columns + 2.2, 0.62 * (rows + 1) + 0.9))
    shade = plt.get_cmap("Blues")
    top = law.max()

    def cell(x, y, width, text, index):
        value = law[index]
        ax.add_patch(plt.Rectangle((x, y), width, 1, facecolor=shade(0.08 + 0.8 * value / top),
                                   edgecolor="white", linewidth=2))
        dark = value / top > 0.55
        label = f"{text}\n{value:.3f}" + ("" if shares is None else f" · {shares[index]:.3f}")
        ax.text(x + width / 2, y + 0.5, label, ha="center", va="center", fontsize=7,
                color="white" if dark else "black")

    for i, first in enumerate(first_labels):
        y = rows - i
        for j in range(columns):
            text = second_labels[i][j] if j < columns - 1 else "any other"
            cell(j, y, 1, text, i * columns + j)
        first_p = law[i * columns:(i + 1) * columns].sum()
        ax.text(-0.08, y + 0.5, f"{first}\np = {first_p:.3f}", ha="right", va="center",
                fontsize=8)
    cell(0, 0, columns, "any other first token", rows * columns)
    ax.set_xlim(-1.1, columns)
    ax.set_ylim(0, rows + 1)
    ax.axis("off")
    ax.set_title(f"{title}\nrows: the first token; columns: the {columns - 1} most likely second "
                 f"tokens after it, then any other" +
                 ("; in each cell: exact p · share of the runs" if shares is not None else ""),
                 fontsize=9)
    fig.tight_layout()
    return fig
