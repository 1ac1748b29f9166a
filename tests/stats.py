"""χ² goodness-of-fit helpers shared by the statistical tests (not a test module).

`chi2_pvalue(samples, probs)` asks: were these token ids drawn from `probs`? It counts the ids,
optionally groups tokens into bins (for a large vocabulary), drops cells that can never occur,
merges cells whose expected count is below 5 (the usual validity rule for χ²) and returns
scipy's p-value. An id drawn where `probs` is zero returns 0.0: that event is impossible.
"""

import math

import numpy as np
import torch
from scipy.stats import chisquare

MIN_EXPECTED = 5.0


def binomial_tolerance(rate: float, num_trials: int, num_se: float = 4.0) -> float:
    """`num_se` standard errors sqrt(a (1 − a) / N) of an observed frequency, plus float slack."""
    rate = min(max(rate, 0.0), 1.0)
    return num_se * math.sqrt(rate * (1.0 - rate) / num_trials) + 1e-6


def equal_mass_bins(probs: torch.Tensor, num_bins: int) -> torch.Tensor:
    """`[V]` -> `[V]` bin index: tokens sorted by p (largest first), cut at every 1/num_bins of mass.

    Example: p = [0.5, 0.2, 0.2, 0.1] with 2 bins -> [0, 1, 1, 1]. A token heavier than
    1/num_bins fills its own bin (so fewer non-empty bins come out); bins are fixed by p alone.
    """
    probs = probs.double().flatten()
    order = torch.argsort(probs, descending=True)
    sorted_probs = probs[order]
    mass_before = (torch.cumsum(sorted_probs, 0) - sorted_probs) / sorted_probs.sum()
    sorted_bins = (mass_before * num_bins).floor().long().clamp(0, num_bins - 1)
    bins = torch.empty_like(sorted_bins)
    bins[order] = sorted_bins
    return torch.unique(bins, return_inverse=True)[1]  # renumber 0..K-1 without gaps


def merge_small_cells(observed, expected, min_expected: float = MIN_EXPECTED):
    """Pool cells (smallest expected first) until every pooled cell expects >= min_expected.

    Example: expected [1, 2, 3, 50] -> [6, 50] with the observed counts pooled the same way.
    """
    observed, expected = np.asarray(observed, float), np.asarray(expected, float)
    order = np.argsort(expected, kind="stable")
    merged_obs, merged_exp = [], []
    acc_obs = acc_exp = 0.0
    for i in order:
        acc_obs += observed[i]
        acc_exp += expected[i]
        if acc_exp >= min_expected:
            merged_obs.append(acc_obs)
            merged_exp.append(acc_exp)
            acc_obs = acc_exp = 0.0
    if acc_exp > 0 or acc_obs > 0:  # a small remainder joins the last (largest) pooled cell
        if merged_exp:
            merged_obs[-1] += acc_obs
            merged_exp[-1] += acc_exp
        else:
            merged_obs.append(acc_obs)
            merged_exp.append(acc_exp)
    return np.array(merged_obs), np.array(merged_exp)


def chi2_pvalue(samples: torch.Tensor, probs: torch.Tensor, bins: torch.Tensor | None = None) -> float:
    """p-value of "`samples` (1-D ids) are i.i.d. draws from `probs` (`[V]`)"; 0.0 if impossible.

    `bins` (`[V]` -> bin index, e.g. from `equal_mass_bins`) groups tokens before counting.
    """
    samples = samples.flatten().long().cpu()
    probs = probs.double().flatten().cpu()
    num_samples = samples.numel()
    if num_samples == 0:
        raise ValueError("no samples to test")
    if samples.min() < 0 or samples.max() >= probs.numel():
        return 0.0  # an id outside the vocabulary (e.g. a -1 pad) cannot come from probs
    observed = torch.bincount(samples, minlength=probs.numel()).double()
    expected = probs / probs.sum() * num_samples
    if bins is not None:
        num_bins = int(bins.max()) + 1
        observed = torch.zeros(num_bins, dtype=torch.double).index_add_(0, bins, observed)
        expected = torch.zeros(num_bins, dtype=torch.double).index_add_(0, bins, expected)
    impossible = expected == 0
    if observed[impossible].sum() > 0:
        return 0.0
    obs, exp = merge_small_cells(observed[~impossible].numpy(), expected[~impossible].numpy())
    if len(exp) < 2:
        return 1.0  # one possible cell and every sample in it: nothing left to test
    exp = exp * (obs.sum() / exp.sum())  # exact totals for scipy
    return float(chisquare(obs, exp).pvalue)
