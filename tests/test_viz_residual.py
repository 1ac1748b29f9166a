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


def test_typical_view_at_temperature_zero_is_greedy_and_costs_nothing():
    view = residual.typical_view(TARGET, DRAFT, 0.0, 0.09, 0.3, top_k=2)
    assert np.allclose(view["typical"], view["target"]) and view["tv"] == 0.0
    assert view["cleared"] == 1 and view["bar"] == pytest.approx(0.09)


def test_typical_view_moves_with_the_threshold():
    # T = 1, p = (0.64, 0.24, 0.09, 0.03, 0.004): a bar of 0.01 lets four tokens through, 0.3 one.
    loose = residual.typical_view(TARGET, DRAFT, 1.0, 0.01, 0.3, top_k=2)
    strict = residual.typical_view(TARGET, DRAFT, 1.0, 0.3, 1.0, top_k=2)
    p, q = torch.softmax(TARGET.double(), 0), torch.softmax(DRAFT.double(), 0)
    assert loose["cleared"] == 4 and strict["cleared"] == 1
    assert np.allclose(strict["typical"], [1.0, 0.0, 0.0])  # only the argmax can come out
    assert strict["tv"] == pytest.approx(1 - float(p[0]))
    law = torch.where(p > 0.01, q, torch.zeros_like(q))
    law[0] += q[p <= 0.01].sum()
    assert loose["tv"] == pytest.approx(0.5 * float((law - p).abs().sum()))


def test_plot_typical_law_says_what_it_draws():
    text, fig = residual.plot_typical_law(TARGET, DRAFT, 1.0, 0.3, 1.0, top_k=2)
    assert "1 token(s) clear it" in text and "TV(typical law, p)" in fig.axes[0].get_title()
    assert len(fig.axes[0].patches) == 3 * 3  # three laws over two tokens and "other"
    plt.close(fig)


def test_typical_text_shows_both_sides_of_the_min():
    p = torch.softmax(TARGET.double(), 0)
    scaled = 0.3 * math.exp(float((p * p.log()).sum()))
    text, fig = residual.plot_typical_law(TARGET, DRAFT, 1.0, 0.09, 0.3, top_k=2)
    assert f"min(0.09, {scaled:.3f}) = {min(0.09, scaled):.3f}" in text
    plt.close(fig)
