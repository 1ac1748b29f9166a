"""Token trees in numbers (notebook 13): E[accepted] of a shape from the head's acceptance by
rank, its predicted speedup under a measured checking curve, and the ranks read off traces."""

import math

import pytest

import specnb
from specnb import theory
from specnb.methods.results import DraftedToken, GenerationResult, Iteration, Stats
from tree_drafters import TopKTree

ACCEPTANCE = [[0.34, 0.46, 0.53, 0.58], [0.34, 0.43]]
STEEP = {"token_counts": [1, 2, 3, 5, 7], "median_ms": [10.0, 10.5, 11.0, 16.0, 20.0]}
FLAT = {"token_counts": [1, 7], "median_ms": [10.0, 10.0]}


def test_expected_accepted_matches_the_docstring_and_the_chain_formula():
    assert theory.expected_accepted_in_tree(ACCEPTANCE, (4, 2)) == pytest.approx(0.58 + 0.34 * 0.43)
    assert theory.expected_accepted_in_tree(ACCEPTANCE, (1, 1)) == pytest.approx(0.34 + 0.34 ** 2)
    # With i.i.d. acceptance α a chain of γ accepts E[tokens per iteration] - 1 (eq. 1).
    alpha = [[0.6]] * 5
    for gamma in range(1, 6):
        assert theory.expected_accepted_in_tree(alpha, (1,) * gamma) == pytest.approx(
            theory.expected_tokens_per_iteration(0.6, gamma) - 1)


def test_widening_a_depth_never_accepts_less():
    for w1 in range(1, 4):
        for w2 in range(1, 2):
            base = theory.expected_accepted_in_tree(ACCEPTANCE, (w1, w2))
            assert theory.expected_accepted_in_tree(ACCEPTANCE, (w1 + 1, w2)) >= base
            assert theory.expected_accepted_in_tree(ACCEPTANCE, (w1, w2 + 1)) >= base


def test_predicted_speedup_and_the_shape_each_curve_picks():
    one = theory.predicted_tree_speedup(ACCEPTANCE, (1,), 0.1, STEEP)
    assert one == pytest.approx(1.34 / (0.1 + 1.05))
    wide = theory.predicted_tree_speedup(ACCEPTANCE, (4, 2), 0.1, FLAT)
    assert wide == pytest.approx((1 + 0.58 + 0.34 * 0.43) / (0.2 + 1.0))
    shapes = [(1,), (2,), (4,), (4, 2)]
    assert theory.best_tree_shape(ACCEPTANCE, 0.1, STEEP, shapes) == (2,)  # checking 5 costs 1.6
    assert theory.best_tree_shape(ACCEPTANCE, 0.1, FLAT, shapes) == (4, 2)  # checking is free


def test_predicted_from_accepted_is_the_tree_formula_with_a_measured_acceptance():
    # The docstring's example, and a static shape through either door.
    curve = {"token_counts": [1, 3], "median_ms": [10.0, 11.7]}
    assert theory.predicted_from_accepted(0.66, 2, 2, 0.06, curve) == pytest.approx(1.66 / 1.29)
    expected = theory.expected_accepted_in_tree(ACCEPTANCE, (4, 2))
    assert theory.predicted_from_accepted(expected, 2, 6, 0.1, STEEP) == pytest.approx(
        theory.predicted_tree_speedup(ACCEPTANCE, (4, 2), 0.1, STEEP))


@pytest.mark.parametrize("call, fragment", [
    (lambda: theory.predicted_from_accepted(-0.1, 1, 1, 0.1, FLAT), "accepted must be"),
    (lambda: theory.predicted_from_accepted(0.5, 0, 1, 0.1, FLAT), "depth, nodes ints"),
    (lambda: theory.predicted_from_accepted(0.5, 1, 1.5, 0.1, FLAT), "depth, nodes ints"),
    (lambda: theory.predicted_from_accepted(0.5, 1, 1, -1, FLAT), "cost_ratio"),
    (lambda: theory.expected_accepted_in_tree(ACCEPTANCE, ()), "widths per depth"),
    (lambda: theory.expected_accepted_in_tree(ACCEPTANCE, (0,)), "widths per depth"),
    (lambda: theory.expected_accepted_in_tree(ACCEPTANCE, (1.5,)), "widths per depth"),
    (lambda: theory.expected_accepted_in_tree(ACCEPTANCE, (True,)), "widths per depth"),
    (lambda: theory.expected_accepted_in_tree(ACCEPTANCE, (5,)), "needs more"),
    (lambda: theory.expected_accepted_in_tree(ACCEPTANCE, (1, 1, 1)), "needs more"),
    (lambda: theory.expected_accepted_in_tree([[0.5, 0.4]], (2,)), "non-decreasing"),
    (lambda: theory.expected_accepted_in_tree([[0.5, 1.2]], (2,)), "non-decreasing"),
    (lambda: theory.predicted_tree_speedup(ACCEPTANCE, (1,), -0.1, FLAT), "cost_ratio"),
    (lambda: theory.predicted_tree_speedup(ACCEPTANCE, (4, 2), 0.1, STEEP | {
        "token_counts": [1, 2], "median_ms": [1.0, 1.0]}), "outside the measured"),
    (lambda: theory.best_tree_shape(ACCEPTANCE, 0.1, FLAT, []), "at least one"),
    (lambda: theory.rank_counts([], 0), "max_depth"),
])
def test_bad_input(call, fragment):
    with pytest.raises(ValueError, match=fragment):
        call()


def traced(*iterations):
    return GenerationResult("speculative", [[]], Stats(), [
        Iteration(drafted=[DraftedToken(t, 1.0, 0.0, 0.0, 0.0, s, p) for t, p, s in nodes])
        for nodes in iterations])


def test_rank_counts_read_the_trace_by_hand():
    result = traced(
        # depth 1: the 2nd guess kept (rank 2): no depth-2 observation (it has no children)
        [(5, -1, "rejected"), (6, -1, "accepted"), (7, -1, "unverified"), (8, 0, "unverified")],
        # depth 1: the best guess kept; depth 2: both children rejected
        [(5, -1, "accepted"), (6, -1, "unverified"), (7, 0, "rejected"), (8, 0, "rejected")],
        # depth 1: nothing kept among 2 guesses
        [(5, -1, "rejected"), (6, -1, "rejected")],
        # depth 1 rank 1, depth 2 rank 1
        [(5, -1, "accepted"), (7, 0, "accepted"), (8, 0, "unverified")],
        [])  # the prompt's forward drafts nothing
    hits, reached = theory.rank_counts([result], 2)
    assert hits == [{2: 1, 1: 2}, {1: 1}] and reached == [4, 2]
    assert theory.acceptance_by_rank([result], (2, 1)) == [[0.5, 0.75], [0.5]]
    with pytest.raises(ValueError, match="no position reached depth 3"):
        theory.acceptance_by_rank([result], (2, 1, 1))


def test_rank_counts_refuse_chains():
    chain = GenerationResult("speculative", [[]], Stats(), [
        Iteration(drafted=[DraftedToken(5, 1.0, 1.0, 1.0, 1.0, "accepted")])])
    with pytest.raises(ValueError, match="chains"):
        theory.rank_counts([chain], 1)


def test_ranks_through_the_loop(target, drafts, prompts):
    """The target drafting for itself: its token is always its own best guess (rank 1)."""
    same = specnb.speculative(target, TopKTree(target, 3, 1), prompts[1], gamma=1,
                              max_new_tokens=10, trace=True)
    assert theory.acceptance_by_rank([same], (3,)) == [[1.0, 1.0, 1.0]]
    # An unrelated draft: each rank's share adds up to what the loop accepted.
    other = specnb.speculative(target, TopKTree(drafts["random"], 3, 1), prompts[1], gamma=1,
                               max_new_tokens=24, trace=True)
    hits, reached = theory.rank_counts([other], 1)
    assert sum(hits[0].values()) == other.stats.accepted
    assert reached[0] == sum(1 for it in other.trace if it.drafted)
    assert not math.isnan(theory.expected_accepted_in_tree(
        theory.acceptance_by_rank([other], (3,)), (2,)))
