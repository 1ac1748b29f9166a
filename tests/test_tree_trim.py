"""Trimming a static tree each iteration (`specnb.drafters.trim`): the choice, and exactness.

`best_widths` is checked against a brute force written from the formula; a trimmed tree keeps
every emitted token what the target would emit (greedy equality with transformers, alone and in
a ragged batch; the χ² on the joint law when sampling); the advisor's record becomes a
`TreeCost` and `speculative(..., gamma=None)` drafts the trimmed tree.
"""

import itertools

import pytest
import torch

import specnb
from specnb.drafters import FeatureDrafter, TreeCost
from specnb.drafters.feature import Advice
from specnb.drafters.trim import best_widths, sub_shapes
from specnb.models import tree_shape
from head_fixtures import random_head
from test_speculative_exact import P_MIN, PROMPT, ROWS
from test_tree_loop import greedy_equals_hf, joint_pvalue, pair  # noqa: F401 (a fixture)


@pytest.mark.parametrize("checking, per_depth, match", [
    ((1.0,), 0.1, "at least two"), ((1.0, 0.0), 0.1, "at least two"),
    ([1.0, "2"], 0.1, "at least two"), ((1.0, 1.3, 1.2), 0.1, "non-decreasing"),
    ((1.0, 1.2), -0.1, "per_depth"), ((1.0, 1.2), True, "per_depth"), (None, 0.1, "at least")])
def test_a_bad_tree_cost_is_refused(checking, per_depth, match):
    with pytest.raises(ValueError, match=match):
        TreeCost(checking, per_depth)


def test_the_cost_of_a_forward_continues_past_the_curve():
    cost = TreeCost([1, 1.2, 1.5], 0.05)
    assert cost.checking == (1.0, 1.2, 1.5)
    assert [cost.forward(k) for k in (1, 3, 4, 6)] == pytest.approx([1.0, 1.5, 1.8, 2.4])


def test_sub_shapes_keep_the_best_nodes_of_each_depth():
    assert sub_shapes((2, 1)) == [(), (1,), (1, 1), (2,), (2, 1)]
    assert len(sub_shapes((4, 2, 1))) == 1 + 4 + 4 * 2 + 4 * 2 * 1


def brute_force(probs, cost):
    """The sub-shape of the largest Σ_rows E / (D c + t(A (1 + nodes)) / t(1)), term by term."""
    rows, widths = len(probs[0]), tuple(len(p[0]) for p in probs)

    def value(shape):
        tokens = 0.0
        for row in range(rows):
            reach, expected = 1.0, 1.0
            for d, kept in enumerate(shape):
                expected += reach * sum(probs[d][row][:kept])
                reach *= probs[d][row][0]
            tokens += expected
        return tokens / (len(widths) * cost.per_depth + cost.forward(rows * (1 + sum(shape))))

    shapes = [()] + [s for depth in range(1, len(widths) + 1)
                     for s in itertools.product(*(range(1, w + 1) for w in widths[:depth]))]
    return max(shapes, key=value)


@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("seed", range(6))
def test_best_widths_is_the_brute_force_choice(rows, seed):
    generator = torch.Generator().manual_seed(seed)
    widths = (4, 2, 1)
    probs = []
    for width in widths:  # a law's best `width` probabilities, best first
        law = torch.softmax(3 * torch.randn(rows, 50, generator=generator), -1)
        probs.append(law.topk(width, -1).values)
    steps = 0.3 * torch.rand(12, generator=generator)
    cost = TreeCost((1.0, *(1.0 + steps.cumsum(0)).tolist()), 0.05 * seed)
    want = brute_force([p.tolist() for p in probs], cost)
    assert best_widths(probs, cost) == want


def test_best_widths_follows_the_head_and_the_machine():
    sure = [torch.tensor([[0.9, 0.05]]), torch.tensor([[0.8]])]
    assert best_widths(sure, TreeCost((1, 1.2, 1.2, 1.4), 0)) == (1, 1)  # the docstring's
    assert best_widths(sure, TreeCost((1, 1, 1, 1), 0)) == (2, 1)  # free checking: keep all
    unsure = [torch.tensor([[0.1, 0.05]]), torch.tensor([[0.1]])]
    assert best_widths(unsure, TreeCost((1, 1.5, 2, 2.5), 0.1)) == ()  # nothing pays
    assert best_widths([], TreeCost((1, 2), 0)) == ()


def test_trim_needs_a_static_tree_and_a_tree_cost(target):
    head = random_head(target).head
    with pytest.raises(ValueError, match="trim cuts a static tree"):
        FeatureDrafter(head, trim=TreeCost((1, 1.2), 0.1))
    with pytest.raises(ValueError, match="trim cuts a static tree"):
        FeatureDrafter(head, tree=(2, 1), trim=(1, 1.2))


# A machine where each token added to a forward costs 0.03 of a one-token forward: a random
# head's (std 0.3: best guesses at q ~ 0.1-0.5) runners-up sometimes pay, sometimes not.
STEEP = TreeCost(tuple(1 + 0.03 * k for k in range(12)), 0.05)


@pytest.mark.parametrize("tree, gamma", [((3, 2), 2), ((4, 2, 1), 3)])
def test_trimmed_trees_equal_hf_greedy_alone_and_in_a_ragged_batch(target, prompts, tree,
                                                                   gamma):
    head = random_head(target, std=0.3)
    drafter = FeatureDrafter(head.head, tree=tree, trim=STEEP)
    batch = greedy_equals_hf(target, prompts, drafter, gamma)
    alone = specnb.speculative(target, drafter, prompts[0], gamma=gamma, max_new_tokens=30,
                               trace=True)
    sizes = {len(it.drafted) for it in alone.trace}
    assert max(sizes) <= sum(tree) and len(sizes) > 1  # trimmed, and not always alike
    assert min(len(it.drafted) for it in batch.trace) < sum(tree)


def test_a_free_forward_trims_nothing_and_a_dear_one_everything(target, prompts):
    head = random_head(target, std=0.05).head
    plain = specnb.speculative(target, FeatureDrafter(head, tree=(3, 2)), prompts[0], gamma=2,
                               max_new_tokens=20, trace=True)
    free = specnb.speculative(target, FeatureDrafter(head, tree=(3, 2), trim=TreeCost(
        (1.0,) * 8, 0.0)), prompts[0], gamma=2, max_new_tokens=20, trace=True)
    assert [it.drafted for it in free.trace] == [it.drafted for it in plain.trace]
    dear = specnb.speculative(target, FeatureDrafter(head, tree=(3, 2), trim=TreeCost(
        (1.0, 5.0), 0.0)), prompts[0], gamma=2, max_new_tokens=20, trace=True)
    assert dear.tokens == plain.tokens and dear.stats.drafted == 0


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_trimmed_trees_sample_the_target_joint(pair, temperature):
    target, _ = pair
    head = random_head(target, draft_vocab=4).head
    # The χ² batch's 6 000 rows share each forward: at 1e-4 of a forward per token, the tree
    # the batch keeps changes from one iteration to the next (none, one node, a branch).
    drafter = FeatureDrafter(head, tree=(2, 2), trim=TreeCost(
        tuple(1 + 1e-4 * k for k in range(6)), 0.0))
    assert joint_pvalue(target, drafter, temperature) > P_MIN
    drafted = [specnb.speculative(target, d, [PROMPT] * ROWS, gamma=2, max_new_tokens=5,
                                  temperature=temperature,
                                  generator=torch.Generator().manual_seed(0)).stats.drafted
               for d in (drafter, FeatureDrafter(head, tree=(2, 2)))]
    assert 0 < drafted[0] < 0.8 * drafted[1]  # trimmed: fewer nodes, still some


def test_the_advice_trims_static_trees_only(target, prompts):
    head = random_head(target, std=0.05)
    plain = specnb.autoregressive(target, prompts[0], max_new_tokens=12)
    for shape in [(2, 1), (1, 1)]:
        head.advisor = lambda temperature, shape=shape: Advice(shape, trim=STEEP)
        drafter, gamma = head.recommended(0.0)
        if shape == (2, 1):
            assert drafter.trim is STEEP and drafter.shape_text(gamma) == "tree (2, 1), trimmed"
            assert "trimmed" in repr(drafter)
        else:  # a chain is drafted by `propose`: nothing to trim
            assert drafter.trim is None and drafter.shape_text(gamma) == "γ=2"
        assert specnb.speculative(target, head, prompts[0], max_new_tokens=12).tokens == \
            plain.tokens


def test_a_recorded_shape_becomes_the_cost_of_its_head():
    latencies = [{"token_counts": [1, 2, 3], "median_ms": [10.0, 13.0, 12.0]},
                 {"token_counts": [1, 2, 3], "median_ms": [10.0, 11.0, 12.4]},
                 {"token_counts": [1, 2, 3], "median_ms": [12.0, 12.0, 13.0]}]
    curve = tree_shape.pooled_checking_cost(latencies)  # medians 10, 12, 12.4 over t(1) 10
    assert curve == {1: 1.0, 2: 1.2, 3: 1.24}
    dipped = tree_shape.pooled_checking_cost(latencies[:1])  # 1.3 then 1.2: made 1.3, 1.3
    assert dipped == {1: 1.0, 2: 1.3, 3: 1.3}
    record = {"choice": "int8 (2, 1)", "shape": (2, 1), "dynamic": None, "int8": True,
              "c": 0.06, "c_int8": 0.03, "checking_cost": {"1": 1.0, "2": 1.2, "3": 1.24},
              "predicted": {"(1,)": 1.30, "(1, 1)": 1.5, "int8 (1, 1)": 1.36,
                            "int8 (2, 1)": 1.40}}
    assert tree_shape.tree_cost(record, int8=True) == TreeCost((1.0, 1.2, 1.24), 0.03)
    assert tree_shape.tree_cost(record).per_depth == 0.06
