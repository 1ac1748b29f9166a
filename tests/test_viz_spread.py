"""specnb.viz.spread and specnb.viz.jacobi_grid: hand-computed summaries, plots, bad input."""

import matplotlib
import pytest

from specnb.methods.results import EmittedToken, GenerationResult, Iteration, Stats
from specnb.viz.jacobi_grid import plot_jacobi_grid
from specnb.viz.spread import paired_ratios, plot_ratio_bars, summarize

matplotlib.use("Agg")


def test_summarize_and_pair_by_hand():
    assert summarize([1.2, 0.9, 1.1]) == (1.1, 0.9, 1.2, 3)
    assert paired_ratios([2, 3], [1, 2]) == [2.0, 1.5]


def test_bars_carry_median_and_n():
    fig = plot_ratio_bars({"a": [1.0, 2.0, 3.0, 4.0, 5.0], "b": [0.5] * 5}, title="t",
                          xlabel="x", ylabel="y")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["3.00\nn = 5", "0.50\nn = 5"]
    assert fig.axes[0].get_title() == "t"


@pytest.mark.parametrize("call, match", [
    (lambda: summarize([]), "at least one"),
    (lambda: paired_ratios([1, 2], [1]), "paired"),
    (lambda: plot_ratio_bars({}, title="", xlabel="", ylabel=""), "nonempty"),
    (lambda: plot_ratio_bars({"a": []}, title="", xlabel="", ylabel=""), "nonempty"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_jacobi_grid_plot_has_one_panel():
    trace = [Iteration(emitted=[EmittedToken(7, "target")], step=s,
                       info={"refreshed": [7, 8], "num_converged": 1}) for s in (1, 2)]
    result = GenerationResult("jacobi", [[7, 8]], Stats(), trace)
    fig = plot_jacobi_grid(result)
    assert len(fig.axes) == 1 and "2 steps" in fig.axes[0].get_title()
