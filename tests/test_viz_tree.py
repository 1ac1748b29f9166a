"""specnb.viz.tree: a tree and its mask as pictures (notebook 13), and their bad input."""

import pytest
import torch
from matplotlib.patches import FancyBboxPatch

import specnb
from specnb.viz.tree import (iteration_tree, plot_predicted_speedups, plot_tree, plot_tree_mask,
                              tree_layout)
from tree_drafters import TopKTree


def test_layout_spreads_leaves_and_centres_parents():
    assert tree_layout([-1, 0, 0]) == ([1, 2, 2], [0.5, 0, 1], 0.5)
    xs, ys, root = tree_layout([-1, -1, -1, 0, 0])  # (3, 2): children under the best guess
    assert xs == [1, 1, 1, 2, 2] and ys == [0.5, 2, 3, 0, 1] and root == pytest.approx(5.5 / 3)


def test_plot_tree_draws_a_box_per_node_the_root_and_the_emitted_token():
    fig = plot_tree(["a", "b", "c"], [-1, 0, -1], ["accepted", "rejected", "unverified"],
                    emitted=("d", "resampled"), title="t")
    boxes = [p for p in fig.axes[0].patches if isinstance(p, FancyBboxPatch)]
    assert len(boxes) == 3 + 2
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()][-1] == \
        "the target's token (resampled)"


def test_plot_tree_mask_fills_ancestors_only():
    fig = plot_tree_mask(["a", "b", "c"], [-1, 0, -1])
    shown = fig.axes[0].images[0].get_array()
    # columns: prefix, x, a, b, c; row "b" sees the prefix, x, a (its parent) and itself
    assert shown[2].tolist() == [1, 1, 1, 1, 0]
    assert shown[3].tolist() == [1, 1, 0, 0, 1]


@pytest.mark.parametrize("call, fragment", [
    (lambda: plot_tree([], []), "non-empty"),
    (lambda: plot_tree(["a", "b"], [-1]), "one length"),
    (lambda: plot_tree(["a", "b"], [-1, 1]), "not an earlier node"),
    (lambda: plot_tree(["a"], [-1], ["kept"]), "statuses"),
    (lambda: plot_tree(["a"], [-1], ["accepted", "accepted"]), "statuses"),
    (lambda: plot_tree_mask(["a", "b"], [0, -1]), "not an earlier node"),
])
def test_bad_input(call, fragment):
    with pytest.raises(ValueError, match=fragment):
        call()


def test_iteration_tree_reads_a_traced_tree(target, drafts, prompts):
    result = specnb.speculative(target, TopKTree(drafts["random"], 2, 2), prompts[0], gamma=2,
                                max_new_tokens=8, trace=True)
    iteration = next(it for it in result.trace if it.drafted)
    parts = iteration_tree(iteration, str)
    assert parts["parents"] == [d.parent for d in iteration.drafted]
    assert parts["emitted"] == (str(iteration.emitted[-1].token), iteration.emitted[-1].kind)
    plot_tree(**parts)
    chain = specnb.speculative(target, drafts["random"], prompts[0], gamma=2, max_new_tokens=4,
                               trace=True)
    with pytest.raises(ValueError, match="token tree"):
        iteration_tree(next(it for it in chain.trace if it.drafted), str)


def test_predicted_speedups_draw_a_bar_per_shape_and_curve_and_outline_each_best():
    predictions = {"this machine": {"(1,)": 0.9, "(2,)": 1.2, "(4, 2)": 1.1},
                   "free checking": {"(1,)": 1.3, "(2,)": 1.4, "(4, 2)": 1.7}}
    ax = plot_predicted_speedups(predictions, title="t").axes[0]
    bars = ax.patches
    assert [round(b.get_width(), 2) for b in bars] == [0.9, 1.2, 1.1, 1.3, 1.4, 1.7]
    outlined = [round(b.get_width(), 2) for b in bars if b.get_linewidth() == 2]
    assert outlined == [1.2, 1.7]  # (2,) on this machine, (4, 2) with free checking
    assert [t.get_text() for t in ax.get_yticklabels()] == ["(1,)", "(2,)", "(4, 2)"]


@pytest.mark.parametrize("bad, message", [
    ({}, "at least one"),
    ({"a": {"(1,)": 1.0}, "b": {"(2,)": 1.0}}, "names shapes"),
    ({"a": {"(1,)": float("nan")}}, "finite"),
])
def test_predicted_speedups_refuse_bad_input(bad, message):
    with pytest.raises(ValueError, match=message):
        plot_predicted_speedups(bad)


ACCEPTANCE = [[0.34, 0.46, 0.53, 0.58], [0.34, 0.43]]
FLAT = {"token_counts": [1, 9], "median_ms": [1.0, 1.0]}


def test_plot_tree_shape_prints_the_quotient_and_draws_each_node():
    from specnb import theory
    from specnb.viz.tree import plot_tree_shape

    text, fig = plot_tree_shape((4, 2), ACCEPTANCE, 0.1, FLAT)
    speedup = theory.predicted_tree_speedup(ACCEPTANCE, (4, 2), 0.1, FLAT)
    assert f"predicted speedup {speedup:.2f}×" in text and "E[accepted] = 0.726" in text
    left, right = fig.axes
    assert len(left.collections) == 1 + 6  # the pending token and six nodes
    labels = [t.get_text() for t in left.texts]
    assert "rank 2: 0.12" in labels and "rank 4: 0.05" in labels  # 0.46 − 0.34, 0.58 − 0.53
    assert [b.get_width() for b in right.patches] == pytest.approx([1.7262, 1.2, speedup])
    # A width of 0 ends the tree.
    assert plot_tree_shape((4, 0), ACCEPTANCE, 0.1, FLAT)[0].startswith("shape (4,):")
    with pytest.raises(ValueError, match="tree shape"):
        plot_tree_shape((0, 2), ACCEPTANCE, 0.1, FLAT)
