"""specnb.viz.distributions: the toy pair, distances, χ² pooling, buckets and the figures."""

import math

import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import specnb.stats  # noqa: E402
from specnb.core import sample, verify  # noqa: E402
from specnb.viz import distributions as dist  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("shape, temperature", [(1.0, 1.0), (2.5, 0.5), (-1.0, 3.0), (0.7, 0.0)])
def test_toy_pair_laws(shape, temperature):
    pair = dist.toy_pair(shape, temperature)
    p, q = pair.target_probs, pair.draft_probs
    assert p.shape == q.shape == (len(dist.TOY_TOKENS),) and p.dtype == torch.float32
    assert torch.allclose(p.sum(), torch.tensor(1.0)) and torch.allclose(q.sum(), torch.tensor(1.0))
    assert torch.equal(pair.overlap, torch.minimum(p, q))
    assert torch.allclose(pair.residual.sum(), torch.tensor(1.0))
    assert (pair.residual[p <= q] == 0).all()
    # Σ min(p, q) = 1 − TV(p, q)
    assert pair.acceptance == pytest.approx(1 - dist.total_variation(p, q), abs=1e-6)


def test_toy_pair_shape_zero_is_p_equals_q_with_no_residual():
    pair = dist.toy_pair(0.0, 0.8)
    assert torch.equal(pair.target_probs, pair.draft_probs)
    assert pair.acceptance == pytest.approx(1.0)
    assert (pair.residual == 0).all()


def test_toy_pair_greedy_is_one_hot():
    pair = dist.toy_pair(1.0, 0.0)
    assert pair.target_probs.tolist() == [1, 0, 0, 0, 0, 0, 0, 0]  # argmax of the target logits
    assert pair.acceptance == 0.0  # the noise moves the draft's argmax to another token


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_toy_pair_bad_shape(bad):
    with pytest.raises(ValueError, match="^shape"):
        dist.toy_pair(bad, 1.0)


def test_plot_toy_pair_bars_title_and_axes():
    fig = dist.plot_toy_pair(1.0, 1.0)
    ax = fig.axes[0]
    assert len(ax.patches) == 4 * len(dist.TOY_TOKENS)
    assert f"{dist.toy_pair(1.0, 1.0).acceptance:.3f}" in ax.get_title()
    assert ax.get_xlabel() == "token" and ax.get_ylabel() == "probability"
    heights = [bar.get_height() for bar in ax.patches[:len(dist.TOY_TOKENS)]]
    assert np.allclose(heights, dist.toy_pair(1.0, 1.0).target_probs.numpy())


def test_empirical_law_and_total_variation():
    assert dist.empirical_law(torch.tensor([0, 2, 2, 2]), 3).tolist() == [0.25, 0.0, 0.75]
    assert dist.total_variation([0.5, 0.5, 0.0], [0.25, 0.25, 0.5]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="^token_ids"):
        dist.empirical_law(torch.tensor([0, 3]), 3)


def test_tv_threshold_and_expected_noise():
    assert dist.tv_threshold(8, 100) > dist.tv_threshold(8, 10_000) > dist.tv_threshold(2, 10_000)
    uniform = np.full(4, 0.25)
    hand = 0.5 * 4 * math.sqrt(2 * 0.25 * 0.75 / (math.pi * 100))
    assert dist.expected_sampling_tv(uniform, 100) == pytest.approx(hand)
    with pytest.raises(ValueError, match="^failure_prob"):
        dist.tv_threshold(8, 100, failure_prob=1.5)


def test_verify_passes_the_tv_threshold_and_a_broken_law_does_not():
    pair, num_rows = dist.toy_pair(1.0, 1.0), 20_000
    g = torch.Generator().manual_seed(0)
    p, q = pair.target_probs, pair.draft_probs
    drafts = sample(q.expand(num_rows, -1), generator=g).view(num_rows, 1)
    bonus = sample(p.expand(num_rows, -1), generator=g).view(num_rows, 1)
    emitted = verify(p.expand(num_rows, 1, -1), q.expand(num_rows, 1, -1), drafts, bonus,
                     generator=g).tokens[:, 0]
    threshold = dist.tv_threshold(len(p), num_rows)
    assert dist.total_variation(dist.empirical_law(emitted, len(p)), p) < threshold
    assert dist.total_variation(dist.empirical_law(drafts, len(p)), p) > threshold  # drafts ~ q
    sizes = [100, 1000, num_rows]
    tvs = dist.tv_versus_samples(emitted, p.numpy(), sizes)
    assert tvs.shape == (3,) and tvs[-1] < threshold
    with pytest.raises(ValueError, match="^sample_sizes"):
        dist.tv_versus_samples(emitted, p.numpy(), [num_rows + 1])


def test_plot_tv_versus_samples_has_curves_and_trend():
    fig = dist.plot_tv_versus_samples([10, 100, 1000], {"a": [0.3, 0.1, 0.03], "b": [0.4] * 3},
                                      np.full(4, 0.25), "TV against N")
    ax = fig.axes[0]
    assert len(ax.get_lines()) == 3 and ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_title() == "TV against N" and "N" in ax.get_xlabel() and ax.get_ylabel()


def test_chi2_goodness_of_fit_is_the_shared_one():
    """Notebook 04 calls it from here; its cases are in test_stats.py."""
    assert dist.chi2_goodness_of_fit is specnb.stats.chi2_goodness_of_fit
    assert dist.chi2_goodness_of_fit([50, 50], [0.5, 0.5]) == (0.0, 1.0)


def test_top_k_buckets():
    ids, law = torch.tensor([1, 2, 0]), torch.tensor([0.1, 0.6, 0.3])
    buckets, probs, top_ids = dist.top_k_buckets(ids, law, 1)
    assert buckets.tolist() == [0, 1, 1] and top_ids.tolist() == [1]
    assert probs.tolist() == pytest.approx([0.6, 0.4])
    with pytest.raises(ValueError, match="^k"):
        dist.top_k_buckets(torch.tensor([0]), torch.tensor([0.5, 0.5]), 2)


def test_plot_law_comparison():
    fig = dist.plot_law_comparison(["x", "y", "z"], {"p": [0.2, 0.3, 0.5], "emp": [0.1, 0.4, 0.5]},
                                   "p against samples")
    ax = fig.axes[0]
    assert len(ax.patches) == 6 and ax.get_title() == "p against samples"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y", "z"]
    assert ax.get_ylabel() == "probability"


def test_pair_cells_are_drawn_one_patch_per_cell_with_their_probabilities():
    import matplotlib.pyplot as plt
    import numpy as np

    from specnb.viz.distributions import plot_pair_cells
    law = np.full(2 * 3 + 1, 1 / 7)  # 2 first tokens, 2 second tokens each, then "any other"
    fig = plot_pair_cells(law, ["'a'", "'b'"], [["'x'", "'y'"], ["'z'", "'w'"]], "cells",
                          observed=law)
    (ax,) = fig.axes
    assert len(ax.patches) == 7
    texts = [t.get_text() for t in ax.texts]
    assert "'y'\n0.143 · 0.143" in texts and "any other first token\n0.143 · 0.143" in texts
    assert "'b'\np = 0.429" in texts  # a first token's row: its three cells
    plt.close(fig)
    with pytest.raises(ValueError, match="K1·\\(K2\\+1\\) \\+ 1 cells"):
        plot_pair_cells(law[:-1], ["'a'", "'b'"], [["'x'", "'y'"], ["'z'", "'w'"]], "cells")
    with pytest.raises(ValueError, match="one share per cell"):
        plot_pair_cells(law, ["'a'", "'b'"], [["'x'", "'y'"], ["'z'", "'w'"]], "cells",
                        observed=law[:3])
