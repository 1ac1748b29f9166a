"""specnb.viz.residual: p, q and the residual under one temperature, and the acceptance curve."""

import math

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from specnb.viz import residual

TARGET = torch.tensor([2.0, 1.0, 0.0, -1.0, -3.0])
DRAFT = torch.tensor([1.0, 2.0, 0.0, -1.0, -3.0])


def test_hand_case_at_temperature_one():
    view = residual.residual_view(TARGET, DRAFT, 1.0, top_k=2)
    p, q = torch.softmax(TARGET.double(), 0), torch.softmax(DRAFT.double(), 0)
    assert view.token_ids == [0, 1]  # max(p, q) picks tokens 0 and 1; p orders them
    assert np.allclose(view.target_probs, [p[0], p[1], 1 - p[0] - p[1]])
    assert np.allclose(view.draft_probs, [q[0], q[1], 1 - q[0] - q[1]])
    # Only token 0 has p > q (tokens 2..4 are equal): the whole residual sits on it.
    assert np.allclose(view.residual, [1.0, 0.0, 0.0])
    assert math.isclose(view.acceptance, float(torch.minimum(p, q).sum()), rel_tol=1e-6)
    for law in (view.target_probs, view.draft_probs, view.residual):
        assert math.isclose(law.sum(), 1.0, rel_tol=1e-6)


def test_equal_logits_mean_no_residual_and_acceptance_one():
    view = residual.residual_view(TARGET, TARGET, 0.7, top_k=3)
    assert np.all(view.residual == 0) and math.isclose(view.acceptance, 1.0, rel_tol=1e-6)
    assert np.allclose(residual.acceptance_curve(TARGET, TARGET, [0.0, 0.5, 2.0]), 1.0)


def test_temperature_zero_is_greedy():
    # The argmaxes differ (0 vs 1): one-hot p and q, acceptance 0, the residual is p's argmax.
    view = residual.residual_view(TARGET, DRAFT, 0.0, top_k=2)
    assert view.acceptance == 0.0
    assert view.target_probs.tolist() == [1.0, 0.0, 0.0]
    assert view.residual.tolist() == [1.0, 0.0, 0.0]


def test_the_shown_tokens_do_not_move_with_temperature():
    ids = {tuple(residual.residual_view(TARGET, DRAFT, t, top_k=3).token_ids)
           for t in (0.0, 0.3, 1.0, 2.0)}
    assert len(ids) == 1


def test_acceptance_grows_towards_one_at_high_temperature():
    curve = residual.acceptance_curve(TARGET, DRAFT, [0.5, 1.0, 2.0, 50.0])
    assert np.all(np.diff(curve) > 0) and curve[-1] > 0.95


@pytest.mark.parametrize("target, draft, top_k, fragment", [
    (TARGET, DRAFT[:4], 2, "one vocabulary"),
    (TARGET[:1], DRAFT[:1], 1, "at least 2"),
    (TARGET, DRAFT, 0, "top_k"),
    (TARGET, DRAFT, 5, "top_k"),
])
def test_bad_arguments(target, draft, top_k, fragment):
    with pytest.raises(ValueError, match=fragment):
        residual.residual_view(target, draft, 1.0, top_k=top_k)


def test_plot_draws_bars_and_the_curve():
    fig = residual.plot_residual(TARGET, DRAFT, 0.8, top_k=3, decode=lambda t: f"t{t}")
    bars, line = fig.axes
    assert "T = 0.8" in bars.get_title() and len(bars.patches) == 3 * 4
    assert [t.get_text() for t in bars.get_xticklabels()] == ["'t0'", "'t1'", "'t2'", "other"]
    assert line.get_xlabel().startswith("temperature") and len(line.lines) == 2
    plt.close(fig)
