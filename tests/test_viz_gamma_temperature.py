"""specnb.viz.gamma_temperature: the γ / temperature grid by hand, the panel, bad input."""

import math

import matplotlib.pyplot as plt
import pytest

from specnb.viz.gamma_temperature import (gamma_temperature_panel, nearest_temperature_index,
                                          speedup_curves)

LATENCY = {"token_counts": [1, 2, 4], "median_ms": [10.0, 15.0, 20.0]}  # t(2)/t(1) = 1.5


def test_speedup_curves_hand_computed():
    curves = speedup_curves({0.7: 0.25, 0.0: 0.5}, 0.1, LATENCY, gammas=[1, 2, 3])
    assert curves["temperatures"] == [0.0, 0.7] and curves["alpha"] == [0.5, 0.25]
    assert curves["checking"] == pytest.approx([1.5, 1.75, 2.0])  # t(3) interpolated
    # α = 0.5, γ = 1: 1.5 tokens per iteration; / 1.1 and / (0.1 + 1.5)
    assert curves["theorem"][0][0] == pytest.approx(1.5 / 1.1)
    assert curves["with_checking"][0][0] == pytest.approx(1.5 / 1.6)
    # α = 0.5, γ = 2: 1.75 / (0.2 + 1.75)
    assert curves["with_checking"][0][1] == pytest.approx(1.75 / 1.95)
    # α = 0.25, γ = 3: (1 - 0.25^4) / 0.75 / 1.3
    assert curves["theorem"][1][2] == pytest.approx((1 - 0.25 ** 4) / 0.75 / 1.3)


def test_perfect_draft_without_costs_gives_gamma_plus_one():
    free = {"token_counts": [1, 8], "median_ms": [5.0, 5.0]}
    curves = speedup_curves({1.0: 1.0}, 0.0, free, gammas=range(1, 5))
    assert curves["theorem"][0] == curves["with_checking"][0] == [2.0, 3.0, 4.0, 5.0]


@pytest.mark.parametrize("args, message", [
    (({}, 0.1, LATENCY), "at least one"),
    (({0.0: 1.2}, 0.1, LATENCY), "α̂"),
    (({-1.0: 0.5}, 0.1, LATENCY), "T >= 0"),
    (({0.0: 0.5}, -0.1, LATENCY), "cost_ratio"),
    (({0.0: 0.5}, math.nan, LATENCY), "cost_ratio"),
    (({0.0: 0.5}, 0.1, LATENCY, [0]), "gammas"),
    (({0.0: 0.5}, 0.1, LATENCY, [1, 8]), "outside"),  # t(9) not measured
])
def test_speedup_curves_bad_input(args, message):
    with pytest.raises(ValueError, match=message):
        speedup_curves(*args)


def test_panel_reads_the_grid_and_marks_the_point():
    curves = speedup_curves({0.0: 0.5, 0.1: 0.4, 0.2: 0.3}, 0.1, LATENCY, gammas=[1, 2, 3])
    assert nearest_temperature_index(curves, 0.30000000000000004) == 2
    text, fig = gamma_temperature_panel(curves, 1, 0.0, measured={1: (0.9, 0.85, 0.95)})
    assert text.startswith("T = 0.0: α̂ = 0.500; γ = 1:")
    assert "Thm 3.8 1.36×" in text and "with checking cost t(2)/t(1) = 1.50: 0.94×" in text
    left, right = fig.axes
    assert list(left.get_lines()[0].get_xdata()) == [0.0, 0.1, 0.2]
    assert list(left.get_lines()[1].get_ydata()) == [0.5]  # the marked T
    assert list(right.get_lines()[2].get_xdata()) == [1]  # the marked γ
    assert right.get_lines()[2].get_ydata()[0] == pytest.approx(1.5 / 1.6)
    assert left.get_title() and right.get_title() and right.get_xlabel().startswith("γ")
    assert "speedup" in right.get_ylabel() and "T" in left.get_xlabel()
    other_text, other = gamma_temperature_panel(curves, 3, 0.2)
    assert other_text != text and "T = 0.2: α̂ = 0.300; γ = 3" in other_text
    plt.close(fig)
    plt.close(other)
    with pytest.raises(ValueError, match="gamma"):
        gamma_temperature_panel(curves, 9, 0.0)
