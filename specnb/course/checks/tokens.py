"""Checks for assignment 5's reasoning items: E[tokens], a prediction about γ*, a bootstrap of α̂.

    expected_tokens(alpha, gamma) -> float         E[tokens emitted by one iteration], derived
    bootstrap_alpha(overlaps, num_resamples, level, generator) -> (low, high)

`expected_tokens` is compared on a grid with the enumeration Σ_n n P(N = n) of the model
(each draft passes independently with probability α; the iteration stops at the first
rejection; it always emits one token more), so the α = 1 limit is checked too. The bootstrap
is checked for what an interval must do, not for numbers: it contains the mean, repeats with the
same generator, and over many synthetic data sets of known mean covers it about `level` of the
time (its width close to the normal-theory width).
"""

import math

import torch

from .report import call, failure, passed, show, to_float


def enumerated_tokens(alpha: float, gamma: int) -> float:
    """Σ_n n P(N = n): N = n ≤ γ when drafts 1..n−1 pass and draft n fails; γ+1 when all pass."""
    total = sum(n * alpha ** (n - 1) * (1 - alpha) for n in range(1, gamma + 1))
    return total + (gamma + 1) * alpha ** gamma


def check_expected_tokens(expected_tokens) -> None:
    name = "expected_tokens"
    cases = [(a, g) for a in (0.0, 0.2, 0.5, 0.8, 0.95, 0.999, 1.0) for g in (0, 1, 2, 5, 12)]
    for alpha, gamma in cases:
        given = f"alpha = {alpha}, gamma = {gamma}"
        limit = ("at α = 1 the closed form is 0/0: every draft passes, so the iteration emits "
                 "γ + 1 tokens; return that limit")
        got = to_float(call(expected_tokens, alpha, gamma, given=given, name=name,
                            error_hint=limit if alpha == 1 else None), name, given)
        expected = enumerated_tokens(alpha, gamma)
        if abs(got - expected) <= 1e-6 * max(1.0, expected):
            continue
        if alpha == 1 and not math.isfinite(got):
            hint = limit
        elif alpha < 1 and abs(got - (1 - alpha ** gamma) / (1 - alpha)) < 1e-6:
            hint = ("you forgot the token the target adds (a residual draw or the bonus): "
                    "N counts it, so the sum runs over γ + 1 terms")
        elif abs(got - alpha * (1 - alpha ** gamma) / (1 - alpha + 1e-300)) < 1e-6:
            hint = "that counts accepted drafts only; add the one token every iteration emits"
        else:
            hint = ("P(N ≥ n) = α^(n−1) for n = 1..γ+1 (the first n − 1 drafts passed), and "
                    "E[N] = Σ_n P(N ≥ n)")
        raise failure(name, given=given, expected=show(expected), got=show(got), hint=hint)
    passed(name, len(cases), "including α = 1")


def _interval(fn, overlaps, num_resamples, level, generator, name, given):
    got = call(fn, overlaps, num_resamples, level, generator, given=given, name=name)
    try:
        low, high = (float(x) for x in got)
    except (TypeError, ValueError):
        raise failure(name, given=given, got=repr(got)[:80],
                      hint="return two numbers, (low, high)") from None
    return low, high


def check_bootstrap(bootstrap_alpha, seed: int = 0, num_datasets: int = 200,
                    size: int = 40, num_resamples: int = 400, level: float = 0.9) -> None:
    """Coverage over synthetic data sets: overlaps ~ Beta(2, 1) (mean 2/3), `size` each."""
    name = "bootstrap_alpha"
    generator = torch.Generator().manual_seed(seed)  # the student's resampling
    data = torch.Generator().manual_seed(seed + 1)  # the synthetic overlaps
    true_mean, covered, widths = 2 / 3, 0, []
    for i in range(num_datasets):
        overlaps = torch.rand(size, generator=data, dtype=torch.float64).sqrt()  # Beta(2, 1)
        given = (f"{size} overlaps drawn from Beta(2, 1) (data set {i}), "
                 f"num_resamples = {num_resamples}, level = {level}")
        low, high = _interval(bootstrap_alpha, overlaps.clone(), num_resamples, level,
                              generator, name, given)
        mean = float(overlaps.mean())
        if not low - 1e-9 <= mean <= high + 1e-9:
            raise failure(name, given=given, expected=f"an interval around the mean {mean:.4f}",
                          got=f"({low:.4f}, {high:.4f})",
                          hint="resample the overlaps with replacement, take the mean of each "
                               "resample, and cut the (1 − level)/2 and (1 + level)/2 quantiles "
                               "of those means")
        if i == 0:
            again = _interval(bootstrap_alpha, overlaps.clone(), num_resamples, level,
                              torch.Generator().manual_seed(5), name, given)
            twice = _interval(bootstrap_alpha, overlaps.clone(), num_resamples, level,
                              torch.Generator().manual_seed(5), name, given)
            if again != twice:
                raise failure(name, given=given + ", twice with generators seeded 5",
                              got=f"{again} then {twice}",
                              hint="draw the resampling indices from the `generator` argument "
                                   "(torch.randint(..., generator=generator))")
        covered += low <= true_mean <= high
        widths.append(high - low)
    coverage = covered / num_datasets
    from scipy.stats import norm  # here: scipy.stats takes a second to import

    normal_width = 2 * norm.ppf((1 + level) / 2) * math.sqrt(1 / 18 / size)  # Var Beta(2,1) = 1/18
    width = sorted(widths)[len(widths) // 2]
    if not (level - 0.08 <= coverage <= min(1.0, level + 0.06)) or \
            not 0.7 * normal_width <= width <= 1.3 * normal_width:
        if width > 1.3 * normal_width:
            hint = ("too wide: the interval is for the *mean* of the overlaps, so use the "
                    "quantiles of the resampled means, not of the overlaps themselves")
        elif width < 0.7 * normal_width:
            hint = ("too narrow: resample `len(overlaps)` values *with* replacement "
                    "(torch.randint indices), one mean per resample")
        else:
            hint = "cut the quantiles at (1 − level)/2 and (1 + level)/2 of the resampled means"
        raise failure(name, given=f"{num_datasets} synthetic data sets of {size} overlaps, true "
                      f"mean 2/3, level {level}",
                      expected=f"coverage near {level} and median width near "
                               f"{normal_width:.3f}",
                      got=f"coverage {coverage:.3f}, median width {width:.3f}", hint=hint)
    passed(name, num_datasets, f"coverage {coverage:.2f} at level {level}, median width "
           f"{width:.3f} (normal theory {normal_width:.3f})")


__all__ = ["check_bootstrap", "check_expected_tokens", "enumerated_tokens"]
