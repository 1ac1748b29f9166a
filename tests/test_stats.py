"""specnb.stats: χ² with one pooling rule, equal-mass bins and binomial tolerances, by hand."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from specnb.stats import binomial_tolerance, chi2_goodness_of_fit, chi2_pvalue, \
    equal_mass_bins, merge_small_cells


def test_chi2_hand_computed():
    assert chi2_goodness_of_fit([50, 50], [0.5, 0.5]) == (0.0, 1.0)
    statistic, pvalue = chi2_goodness_of_fit([90, 10], [0.5, 0.5])
    assert statistic == pytest.approx(64.0)  # (40² + 40²) / 50
    assert pvalue == pytest.approx(math.erfc(8 / math.sqrt(2)))  # 1 dof: P(|Z| > 8)
    # probs need not sum to one, and any shape is flattened: [[30, 10], [10, 30]] vs [3, 1, 1, 3]
    statistic, _ = chi2_goodness_of_fit(torch.tensor([[30, 10], [10, 30]]), [3, 1, 1, 3])
    assert statistic == 0.0


def test_chi2_impossible_cells():
    assert chi2_goodness_of_fit([1, 99], [0.0, 1.0]) == (math.inf, 0.0)  # one impossible draw
    # zero-probability cells that stay empty are dropped: [0, 50, 50] vs [0, 0.5, 0.5] is a fit
    assert chi2_goodness_of_fit([0, 50, 50], [0.0, 0.5, 0.5]) == (0.0, 1.0)
    assert chi2_pvalue(torch.tensor([2]), torch.tensor([0.5, 0.5, 0.0])) == 0.0
    assert chi2_pvalue(torch.tensor([0, 3]), torch.tensor([0.5, 0.5, 0.0])) == 0.0  # off vocab
    assert chi2_pvalue(torch.tensor([-1, 0]), torch.tensor([0.5, 0.5])) == 0.0  # a -1 pad


def test_merge_small_cells_worked_example():
    # sorted by expected: 3 + 3 = 6 >= 5 closes a cell; 3 + 3 = 6 closes another; the last 3
    # never reaches 5 and joins the last cell.
    observed, expected = merge_small_cells([1, 2, 3, 4, 5], [3, 3, 3, 3, 3])
    assert observed.tolist() == [3.0, 12.0] and expected.tolist() == [6.0, 9.0]
    observed, expected = merge_small_cells([0, 2, 1, 47], [1, 2, 3, 50])
    assert observed.tolist() == [3.0, 47.0] and expected.tolist() == [6.0, 50.0]
    # the χ² test pools the same way: [1 + 2 + 3, 94] vs [6, 94] fits exactly
    assert chi2_goodness_of_fit([1, 2, 3, 94], [0.01, 0.02, 0.03, 0.94]) == (0.0, 1.0)


def test_one_pooled_cell_leaves_nothing_to_test():
    # ids [0, 0, 1] with p = [0.5, 0.5]: expected [1.5, 1.5] pool into one cell -> p-value 1
    assert chi2_pvalue(torch.tensor([0, 0, 1]), torch.tensor([0.5, 0.5, 0.0])) == 1.0


def test_chi2_pvalue_counts_ids_and_bins():
    ids = torch.tensor([0] * 30 + [1] * 10 + [2] * 10 + [3] * 50)
    probs = torch.tensor([0.3, 0.1, 0.1, 0.5])
    assert chi2_pvalue(ids, probs) == pytest.approx(1.0)  # counts equal the expected counts
    bins = torch.tensor([0, 1, 1, 0])  # cells [0 + 3, 1 + 2]: 80 and 20 vs expected 80 and 20
    assert chi2_pvalue(ids, probs, bins) == pytest.approx(1.0)
    skewed = torch.tensor([0] * 60 + [1] * 40)
    # χ² = (10² + 10²) / 50 = 4 with 1 dof: P(|Z| > 2) = erfc(2 / √2) ≈ 0.0455
    assert chi2_pvalue(skewed, torch.tensor([0.5, 0.5])) == pytest.approx(
        math.erfc(2 / math.sqrt(2)))
    # the bins pool ids: [0, 1, 2, 3] -> cells [0 + 3, 1 + 2] = 70 and 30 vs 80 and 20
    shifted = torch.tensor([0] * 20 + [1] * 20 + [2] * 10 + [3] * 50)
    statistic = 10 ** 2 / 80 + 10 ** 2 / 20
    assert chi2_pvalue(shifted, probs, bins) == pytest.approx(
        math.erfc(math.sqrt(statistic) / math.sqrt(2)))


def test_a_portability_run_logs_every_pvalue(tmp_path):
    """`make test-portability` sets SPECNB_PVALUE_LOG; each χ² a test computes is logged there
    (tests/conftest.py), which scripts/pvalue_margins.py reads."""
    log = tmp_path / "pvalues.jsonl"
    env = {**os.environ, "SPECNB_PVALUE_LOG": str(log), "OMP_NUM_THREADS": "1"}
    test = "tests/test_stats.py::test_chi2_hand_computed"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                    "no:xdist", "-p", "no:nbval", "-o", "addopts=", test],
                   cwd=Path(__file__).resolve().parents[1], env=env, check=True,
                   capture_output=True)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [node for node, _ in lines] == [test] * 3  # its three χ² calls
    assert lines[1][1] == pytest.approx(math.erfc(8 / math.sqrt(2)))


def test_chi2_accepts_exact_samples_and_rejects_a_wrong_law():
    generator = torch.Generator().manual_seed(0)
    probs = torch.tensor([0.4, 0.3, 0.2, 0.1])
    ids = torch.multinomial(probs, 20_000, replacement=True, generator=generator)
    assert chi2_pvalue(ids, probs) > 1e-3
    assert chi2_pvalue(ids, torch.tensor([0.38, 0.32, 0.2, 0.1])) < 1e-3


def test_equal_mass_bins():
    assert equal_mass_bins(torch.tensor([0.5, 0.2, 0.2, 0.1]), 2).tolist() == [0, 1, 1, 1]
    assert equal_mass_bins([0.25] * 4, 4).tolist() == [0, 1, 2, 3]
    # a token heavier than 1/num_bins fills its own bin, so fewer bins come out
    assert equal_mass_bins([0.1, 0.9], 4).tolist() == [1, 0]
    assert equal_mass_bins([0.7, 0.3], 1).tolist() == [0, 0]


def test_binomial_tolerance():
    # N = 4, rate 0.5, 1 standard error (tails of 0.159): quantiles 1 and 3 successes -> 1/4
    assert binomial_tolerance(0.5, 4, num_se=1) == pytest.approx(0.25 + 1e-6)
    assert binomial_tolerance(0.5, 100, num_se=4) == pytest.approx(0.2 + 1e-6)  # 4 × sqrt(.25 / 100)
    # large N: the normal approximation num_se × sqrt(a (1 − a) / N), to within 1/N + slack
    assert abs(binomial_tolerance(0.3, 1_000_000, num_se=4) - 4 * math.sqrt(0.21 / 1e6)) < 3e-6
    assert binomial_tolerance(0.0, 50) == binomial_tolerance(1.0, 50) == 1e-6  # no spread
    assert binomial_tolerance(1.00001, 50) == 1e-6  # float overshoot of a probability sum
    # near 0 the binomial tail is longer than the normal one: 7 successes of 100 at 1 %
    assert binomial_tolerance(0.01, 100, num_se=4) == pytest.approx(0.06 + 1e-6)
    assert binomial_tolerance(0.01, 100, num_se=4) > 4 * math.sqrt(0.01 * 0.99 / 100)


def test_binomial_tolerance_holds_for_seeded_draws():
    generator = torch.Generator().manual_seed(1)
    for rate in (0.05, 0.5, 0.9):
        draws = torch.rand(100, 1000, generator=generator) < rate  # 100 experiments of N = 1000
        frequencies = draws.double().mean(dim=1)
        assert ((frequencies - rate).abs() <= binomial_tolerance(rate, 1000)).all()


@pytest.mark.parametrize("call, name", [
    (lambda: chi2_goodness_of_fit([1, 2], [0.2, 0.3, 0.5]), "counts"),
    (lambda: chi2_goodness_of_fit([1, 2], [0.5, -0.5]), "probs"),
    (lambda: chi2_goodness_of_fit([1, -2], [0.5, 0.5]), "counts"),
    (lambda: chi2_goodness_of_fit([1, 2], [float("nan"), 0.5]), "probs"),
    (lambda: chi2_goodness_of_fit([1, 2], [0.0, 0.0]), "probs"),
    (lambda: chi2_goodness_of_fit([0, 0], [0.5, 0.5]), "counts"),
    (lambda: chi2_goodness_of_fit([], []), "counts"),
    (lambda: chi2_pvalue(torch.tensor([], dtype=torch.long), torch.tensor([0.5, 0.5])), "samples"),
    (lambda: chi2_pvalue(torch.tensor([0, 1]), torch.tensor([0.5, 0.5]), torch.tensor([0])),
     "bins"),
    (lambda: merge_small_cells([1, 2], [3.0]), "observed"),
    (lambda: equal_mass_bins([0.5, -0.1], 2), "probs"),
    (lambda: equal_mass_bins([0.5, 0.5], 0), "num_bins"),
    (lambda: equal_mass_bins([0.5, 0.5], 1.5), "num_bins"),
    (lambda: binomial_tolerance(1.5, 10), "rate"),
    (lambda: binomial_tolerance(-0.2, 10), "rate"),
    (lambda: binomial_tolerance(0.5, 0), "num_trials"),
    (lambda: binomial_tolerance(0.5, 2.5), "num_trials"),
    (lambda: binomial_tolerance(0.5, 10, num_se=0), "num_se"),
])
def test_bad_input(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()


def test_inputs_may_be_lists_arrays_or_tensors():
    expected = chi2_goodness_of_fit([60, 40], [0.5, 0.5])
    assert chi2_goodness_of_fit(np.array([60, 40]), np.array([0.5, 0.5])) == expected
    assert chi2_goodness_of_fit(torch.tensor([60.0, 40.0]), torch.tensor([0.5, 0.5])) == expected
