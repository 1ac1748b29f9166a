"""Statistics of sampled tokens: χ² goodness of fit, equal-mass bins, binomial tolerances.

`chi2_goodness_of_fit(counts, probs)` asks: are these counts N draws from `probs`? It applies
one pooling rule, everywhere in specnb (tests, checks, notebooks):

1. cells with zero probability are dropped, and one observation in such a cell makes the answer
   certain: statistic inf, p-value 0.0 (that event is impossible under `probs`);
2. the remaining cells are pooled, smallest expected count first, until every pooled cell
   expects at least 5 (`merge_small_cells`: the usual validity rule of the χ² approximation);
3. scipy's `chisquare` gives the p-value; with fewer than two pooled cells there is nothing
   left to test, and the answer is (0.0, 1.0).

`chi2_pvalue(samples, probs, bins)` counts token ids first (optionally grouped by
`equal_mass_bins`, for a large vocabulary). `binomial_tolerance(rate, num_trials)` is how far an
observed frequency of N trials may stray from `rate` by chance, from binomial quantiles.
`empirical_law(ids, V)` is the frequency of each id. `SIGNIFICANCE` and `NUM_SE` are the one
significance level and tolerance that the tests and the assignment checks use.

It draws no samples.

Example: chi2_goodness_of_fit([50, 50], [0.5, 0.5]) -> (0.0, 1.0).
"""

import math

import numpy as np
import torch

MIN_EXPECTED = 5.0  # the smallest expected count a χ² cell may have after pooling
# The one tolerance of the package, its tests and its checks (seeds are fixed: nothing flakes).
SIGNIFICANCE = 1e-4  # a χ² test fails below this p-value
NUM_SE = 4.5  # a rate may stray this many standard errors (`binomial_tolerance`)


def _as_vector(values, name: str) -> np.ndarray:
    """Any array-like (list, numpy, tensor) -> a 1-D float64 numpy array of finite values >= 0."""
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().double().numpy()
    vector = np.asarray(values, dtype=float).ravel()
    if vector.size == 0:
        raise ValueError(f"{name} must not be empty")
    if not np.isfinite(vector).all() or (vector < 0).any():
        raise ValueError(f"{name} must hold finite values >= 0, got {vector.tolist()[:8]}")
    return vector


def merge_small_cells(observed, expected, min_expected: float = MIN_EXPECTED) -> tuple:
    """Pool cells, smallest expected first, until every pooled cell expects >= `min_expected`.

    A remainder that never reaches `min_expected` joins the last (largest) pooled cell.
    Example: expected [3, 3, 3, 3, 3], observed [1, 2, 3, 4, 5]
    -> observed [3, 12], expected [6, 9]. Returns two 1-D float arrays.
    """
    observed, expected = np.asarray(observed, float).ravel(), np.asarray(expected, float).ravel()
    if observed.shape != expected.shape:
        raise ValueError(f"observed {observed.shape} and expected {expected.shape} must have "
                         f"one length")
    merged_observed, merged_expected = [], []
    pooled_observed = pooled_expected = 0.0
    for i in np.argsort(expected, kind="stable"):
        pooled_observed += observed[i]
        pooled_expected += expected[i]
        if pooled_expected >= min_expected:
            merged_observed.append(pooled_observed)
            merged_expected.append(pooled_expected)
            pooled_observed = pooled_expected = 0.0
    if pooled_expected > 0 or pooled_observed > 0:
        if merged_expected:
            merged_observed[-1] += pooled_observed
            merged_expected[-1] += pooled_expected
        else:
            merged_observed.append(pooled_observed)
            merged_expected.append(pooled_expected)
    return np.array(merged_observed), np.array(merged_expected)


def chi2_goodness_of_fit(counts, probs, min_expected: float = MIN_EXPECTED) -> tuple:
    """(χ² statistic, p-value) of "`counts` are N draws from `probs`"; (inf, 0.0) if impossible.

    `counts` and `probs` have one length (any shape, flattened); `probs` need not sum to one.
    Examples: [50, 50] vs [0.5, 0.5] -> (0.0, 1.0); [1, 99] vs [0, 1] -> (inf, 0.0);
    [90, 10] vs [0.5, 0.5] -> statistic 40² / 50 × 2 = 64.
    """
    counts, probs = _as_vector(counts, "counts"), _as_vector(probs, "probs")
    if counts.shape != probs.shape:
        raise ValueError(f"counts ({counts.size} cells) and probs ({probs.size} cells) must "
                         f"have one length: one count per probability")
    if probs.sum() <= 0:
        raise ValueError("probs must have a positive sum")
    if counts.sum() == 0:
        raise ValueError("counts must hold at least one observation: nothing to test")
    expected = probs / probs.sum() * counts.sum()
    possible = expected > 0
    if counts[~possible].sum() > 0:
        return math.inf, 0.0
    observed, expected = merge_small_cells(counts[possible], expected[possible], min_expected)
    if len(expected) < 2:
        return 0.0, 1.0
    from scipy.stats import chisquare  # here: scipy.stats takes a second to import

    result = chisquare(observed, expected * (observed.sum() / expected.sum()))  # exact totals
    return float(result.statistic), float(result.pvalue)


def chi2_pvalue(samples, probs, bins=None) -> float:
    """p-value of "`samples` (token ids, any shape) are i.i.d. draws from `probs` (`[V]`)".

    An id outside [0, V) (e.g. a -1 pad) or with zero probability gives 0.0. `bins` (`[V]` ->
    bin index, e.g. from `equal_mass_bins`) groups tokens into cells before the test.
    Example: ids [0, 0, 1] with probs [0.5, 0.5, 0.0] -> p-value 1.0 (too few to pool into two
    cells); ids [2] -> 0.0.
    """
    samples = torch.as_tensor(samples).flatten().long().cpu()
    probs = torch.as_tensor(probs).detach().double().flatten().cpu()
    if samples.numel() == 0:
        raise ValueError("samples must hold at least one token id: nothing to test")
    if samples.min() < 0 or samples.max() >= probs.numel():
        return 0.0  # an id outside the vocabulary cannot come from probs
    counts = torch.bincount(samples, minlength=probs.numel()).double()
    if bins is not None:
        bins = torch.as_tensor(bins).long().flatten().cpu()
        if bins.shape != probs.shape or bins.min() < 0:
            raise ValueError(f"bins must map each of the {probs.numel()} tokens to a bin index "
                             f">= 0, got shape {tuple(bins.shape)}")
        num_bins = int(bins.max()) + 1
        counts = torch.zeros(num_bins, dtype=torch.double).index_add_(0, bins, counts)
        probs = torch.zeros(num_bins, dtype=torch.double).index_add_(0, bins, probs)
    return chi2_goodness_of_fit(counts, probs)[1]


def equal_mass_bins(probs, num_bins: int) -> torch.Tensor:
    """`[V]` -> `[V]` bin index: tokens sorted by p, largest first, cut at each 1/num_bins of mass.

    Example: p = [0.5, 0.2, 0.2, 0.1] with 2 bins -> [0, 1, 1, 1]. A token heavier than
    1/num_bins fills its own bin (so fewer non-empty bins come out); bins depend on p alone.
    """
    if isinstance(num_bins, bool) or int(num_bins) != num_bins or num_bins < 1:
        raise ValueError(f"num_bins must be an integer >= 1, got {num_bins}")
    probs = torch.as_tensor(_as_vector(probs, "probs"))
    if probs.sum() <= 0:
        raise ValueError("probs must have a positive sum")
    order = torch.argsort(probs, descending=True, stable=True)
    sorted_probs = probs[order]
    mass_before = (torch.cumsum(sorted_probs, 0) - sorted_probs) / sorted_probs.sum()
    # + 1e-6: a token starting within float32 rounding of a cut starts the next bin, as exactly
    sorted_bins = (mass_before * int(num_bins) + 1e-6).floor().long().clamp(0, int(num_bins) - 1)
    bins = torch.empty_like(sorted_bins)
    bins[order] = sorted_bins
    return torch.unique(bins, return_inverse=True)[1]  # renumber 0..K-1 without gaps


def binomial_tolerance(rate: float, num_trials: int, num_se: float = NUM_SE) -> float:
    """How far the frequency of N Bernoulli(rate) trials may stray from `rate` by chance.

    The binomial quantiles that leave norm.sf(num_se) of the mass in each tail (the tails of
    `num_se` standard errors; 4 -> 3.2e-5 each), divided by N: the larger distance to `rate`,
    plus 1e-6 for float slack. Exact where the normal approximation is not (rates near 0 or 1,
    small N); close to num_se × sqrt(rate (1 − rate) / N) otherwise.
    Example: rate 0.5, N = 4, num_se = 1: the quantiles are 1 and 3 successes -> 0.25 (+ 1e-6).
    """
    if not -1e-4 <= rate <= 1 + 1e-4:  # float sums of probabilities may overshoot a little
        raise ValueError(f"rate must be a probability in [0, 1], got {rate}")
    if isinstance(num_trials, bool) or int(num_trials) != num_trials or num_trials < 1:
        raise ValueError(f"num_trials must be an integer >= 1, got {num_trials}")
    if not num_se > 0:
        raise ValueError(f"num_se must be > 0, got {num_se}")
    rate, num_trials = min(max(float(rate), 0.0), 1.0), int(num_trials)
    from scipy.stats import binom, norm  # here: scipy.stats takes a second to import

    tail = norm.sf(num_se)
    low, high = binom.ppf(tail, num_trials, rate), binom.isf(tail, num_trials, rate)
    return max(rate - low / num_trials, high / num_trials - rate) + 1e-6


def empirical_law(token_ids: torch.Tensor, vocab_size: int) -> np.ndarray:
    """`[N]` ids -> `[V]` frequencies. Example: [0, 2, 2, 2] with V = 3 -> [0.25, 0, 0.75]."""
    token_ids = torch.as_tensor(token_ids).flatten().long().cpu()
    if token_ids.numel() == 0 or token_ids.min() < 0 or token_ids.max() >= vocab_size:
        raise ValueError(f"token_ids must be a non-empty set of ids in [0, {vocab_size})")
    return torch.bincount(token_ids, minlength=vocab_size).double().numpy() / token_ids.numel()


PVALUE_BOUNDS = (1e-12, 1e-6)  # the decades a small p-value is reported under


def pvalue_text(pvalue: float, level: float = 1e-3) -> str:
    """A p-value as a statement that float rounding on another CPU does not change.

    The exact p-value of a test against a model's probabilities moves in its last digits from
    one CPU's kernels to another's; which side of the significance level it is on, or under
    which decade a tiny one lies, does not (the level is far from the values the notebooks meet).
    Examples: 0.43 -> "p > 0.001"; 3.07e-08 -> "p < 1e-06"; 0.0 -> "p < 1e-12".
    """
    if not 0 <= pvalue <= 1:
        raise ValueError(f"pvalue must lie in [0, 1], got {pvalue}")
    if pvalue > level:
        return f"p > {level:g}"
    below = [bound for bound in PVALUE_BOUNDS if pvalue < bound <= level]
    return f"p < {min(below, default=level):g}"
