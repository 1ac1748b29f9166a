"""specnb.viz.breakeven: break-even α, the panel's numbers, and its two figures."""

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from specnb import expected_tokens_per_iteration, predicted_speedup  # noqa: E402
from specnb.viz import breakeven  # noqa: E402


@pytest.mark.parametrize("gamma, cost_ratio, checking_cost, expected", [
    (1, 0.1, 1.6, 0.7),        # 1 + α = 0.1 + 1.6
    (2, 0.0, 1.75, 0.5),       # 1 + α + α² = 1.75
    (1, 0.0, 1.0, 0.0),        # a free draft and a free check: any α pays
    (3, 0.05, 0.5, 0.0),       # an iteration cheaper than one forward
])
def test_break_even_alpha_by_hand(gamma, cost_ratio, checking_cost, expected):
    assert breakeven.break_even_alpha(gamma, cost_ratio, checking_cost) == pytest.approx(
        expected, abs=1e-9)


def test_break_even_alpha_is_where_the_speedup_is_one():
    for gamma in (1, 2, 4, 8):
        for c, k in ((0.05, 1.0), (0.1, 1.6), (0.2, 2.0)):
            alpha = breakeven.break_even_alpha(gamma, c, k)
            if math.isnan(alpha):
                continue
            speedup = expected_tokens_per_iteration(alpha, gamma) / (gamma * c + k)
            assert speedup == pytest.approx(1.0, abs=1e-9)


def test_break_even_alpha_is_nan_when_nothing_pays():
    # γ = 1 emits at most 2 tokens per iteration; an iteration costing 2.5 never pays
    assert math.isnan(breakeven.break_even_alpha(1, 0.5, 2.0))


def test_break_even_grows_with_the_checking_cost():
    alphas = [breakeven.break_even_alpha(2, 0.1, k) for k in (1.0, 1.3, 1.6, 2.0)]
    assert alphas == sorted(alphas) and alphas[0] < alphas[-1]


@pytest.mark.parametrize("call, message", [
    (lambda: breakeven.break_even_alpha(0, 0.1, 1.0), "gamma"),
    (lambda: breakeven.break_even_alpha(1.5, 0.1, 1.0), "gamma"),
    (lambda: breakeven.break_even_alpha(1, -0.1, 1.0), "cost_ratio"),
    (lambda: breakeven.break_even_alpha(1, 0.1, 0.0), "checking_cost"),
    (lambda: breakeven.speedup_numbers(0.5, 0.1, 2, -1.0), "checking_cost"),
    (lambda: breakeven.plot_break_even([1, 2], [1.5], {}), "equal length"),
])
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_speedup_numbers_by_hand():
    numbers = breakeven.speedup_numbers(0.5, 0.1, 2, 1.25)
    assert numbers["expected_tokens"] == pytest.approx(1.75)
    assert numbers["iteration_cost"] == pytest.approx(1.45)
    assert numbers["speedup"] == pytest.approx(1.75 / 1.45)
    assert numbers["theorem_speedup"] == pytest.approx(predicted_speedup(0.5, 2, 0.1))
    # checking cost 1 is Thm 3.8
    assert breakeven.speedup_numbers(0.5, 0.1, 2, 1.0)["speedup"] == pytest.approx(
        predicted_speedup(0.5, 2, 0.1))


def test_format_numbers_changes_with_every_setting():
    base = dict(alpha=0.7, cost_ratio=0.1, gamma=4, checking_cost=1.6)
    text = breakeven.format_numbers(breakeven.speedup_numbers(**base))
    assert "speedup" in text and "break-even α" in text
    for key, value in (("alpha", 0.8), ("cost_ratio", 0.2), ("gamma", 5), ("checking_cost", 2.0)):
        other = breakeven.format_numbers(breakeven.speedup_numbers(**{**base, key: value}))
        assert other != text, key


def test_plot_break_even():
    fig = breakeven.plot_break_even(
        [1, 2, 3], [1.6, 1.9, 1.7],
        {"head": {"cost_ratio": 0.07, "alpha": 0.27, "gamma": 1},
         "draft": {"cost_ratio": 0.12, "alpha": 0.2, "gamma": 3}},
        reference={"T5-small (EnDe, T=0)": 0.75})
    ax = fig.axes[0]
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    assert len(ax.get_legend().get_texts()) == 6  # two curves and a star per draft
    plt.close(fig)


def test_plot_speedup_panel_marks_the_setting():
    fig = breakeven.plot_speedup_panel(0.6, 0.1, 3, 1.5)
    left, right = fig.axes
    for ax in (left, right):
        assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    expected = breakeven.speedup_numbers(0.6, 0.1, 3, 1.5)["speedup"]
    marker = [line for line in left.get_lines() if line.get_marker() == "o"][0]
    assert marker.get_ydata()[0] == pytest.approx(expected)
    plt.close(fig)


def test_plot_tokens_per_iteration():
    points = [{"alpha_hat": 0.5, "counts": [1, 2, 2, 3]}, {"alpha_hat": 0.9, "counts": [5, 4, 5]}]
    fig = breakeven.plot_tokens_per_iteration(points, 3, drafts={"head": {
        "alpha": 0.3, "tokens_per_iteration": 1.4}})
    ax = fig.axes[0]
    assert {"n=4", "n=3"} <= {t.get_text() for t in ax.texts}
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    plt.close(fig)
