"""EAGLE-2's dynamic tree (`FeatureDrafter(head, dynamic=(nodes, depth, branch))`): one head
forward per depth scores each expanded node exactly as a chain along its branch would, the loop's
greedy output equals transformers' and its samples keep the target's joint law, bad shapes are
refused before any forward."""

import pytest
import torch

import specnb
from specnb.core.batch_kv import BatchedCachedLM
from specnb.drafters.dynamic_tree import DynamicTree
from head_fixtures import random_head
from test_speculative_exact import P_MIN, VOCAB
from test_tree_loop import greedy_equals_hf, joint_pvalue
from tiny_models import tiny_llama

ROOTS = torch.full((1, 2), -1)


def grown_by_depth(model, prefix, first, second, inputs=None):
    """Logits of `second[j]` after `first[j]` (j = 0, 1) fed the dynamic tree's way: both
    first tokens as one chunk, then both second tokens as one chunk, each seeing the prefix and
    its own parent only."""
    inputs = inputs or {}
    lm = BatchedCachedLM(model, 0)
    lm.forward(prefix, **inputs.get("prefix", {}))
    base = lm.num_slots
    lm.forward(first, tree=ROOTS, visible=torch.ones(1, 2, base, dtype=torch.bool),
               **inputs.get("first", {}))
    visible = torch.cat([torch.ones(1, 2, base, dtype=torch.bool),
                         torch.eye(2, dtype=torch.bool).unsqueeze(0)], 2)  # own parent only
    return lm.forward(second, tree=ROOTS, visible=visible, **inputs.get("second", {}))


def chain(model, prefix, tokens, inputs):
    """Logits of the last of `tokens` fed one by one after the prefix."""
    lm = BatchedCachedLM(model, 0)
    lm.forward(prefix, **inputs["prefix"])
    for token, extra in zip(tokens, inputs["steps"]):
        logits = lm.forward(torch.tensor([[token]]), **extra)
    return logits[:, -1]


def test_a_depth_chunk_sees_the_prefix_and_its_own_ancestors_only(target):
    prefix = torch.randint(1, VOCAB, (1, 7), generator=torch.Generator().manual_seed(1))
    first, second = torch.tensor([[5, 9]]), torch.tensor([[17, 23]])
    grown = grown_by_depth(target, prefix, first, second)
    for j in range(2):
        expected = chain(target, prefix, [first[0, j], second[0, j]],
                         {"prefix": {}, "steps": [{}, {}]})
        torch.testing.assert_close(grown[:, j], expected, atol=2e-5, rtol=1e-4)


def test_the_heads_tree_chunks_equal_its_chains(target):
    head = random_head(target).head
    g = torch.Generator().manual_seed(2)
    layers, width = len(head.config.feature_layers), head.config.hidden_size
    prefix = torch.randint(1, VOCAB, (1, 6), generator=g)
    features = torch.randn(1, 6, layers, width, generator=g)
    first, second = torch.tensor([[3, 8]]), torch.tensor([[11, 4]])
    h_first = torch.randn(1, 2, width, generator=g)
    h_second = torch.randn(1, 2, width, generator=g)
    grown = grown_by_depth(head, prefix, first, second, {"prefix": {"features": features},
                                                         "first": {"hidden": h_first},
                                                         "second": {"hidden": h_second}})
    for j in range(2):
        expected = chain(head, prefix, [first[0, j], second[0, j]], {
            "prefix": {"features": features},
            "steps": [{"hidden": h_first[:, j:j + 1]}, {"hidden": h_second[:, j:j + 1]}]})
        torch.testing.assert_close(grown[:, j], expected, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("shape, gamma", [((3, 2, 2), 2), ((6, 3, 3), 3), ((5, 4, 2), 4),
                                          ((6, 3, 3), 2)])
def test_dynamic_trees_equal_hf_greedy_alone_and_in_a_ragged_batch(target, prompts, shape,
                                                                   gamma):
    drafter = specnb.drafters.FeatureDrafter(random_head(target, std=0.05).head, dynamic=shape)
    batch = greedy_equals_hf(target, prompts, drafter, gamma)
    drafted = [it for it in batch.trace if it.drafted]
    assert max(len(it.drafted) for it in drafted) <= shape[0]  # the node budget
    assert batch.stats.accepted > 0


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_dynamic_trees_sample_the_target_joint(temperature):
    target = tiny_llama(11, vocab=VOCAB, std=0.5)
    drafter = specnb.drafters.FeatureDrafter(random_head(target, draft_vocab=4).head,
                                             dynamic=(4, 2, 2))
    assert joint_pvalue(target, drafter, temperature) > P_MIN


@pytest.mark.parametrize("dynamic, fragment", [
    ((0, 2, 2), "nodes must be an int >= 1"), ((4, 2, 1.5), "branch must be an int >= 1"),
    ((4, True, 2), "depth must be an int >= 1"), ((7, 2, 2), "grows only 6"),
    ((4, 2), "(nodes, depth, branch)"), ("8,4,4", "(nodes, depth, branch)")])
def test_bad_dynamic_shapes_are_refused(target, dynamic, fragment):
    with pytest.raises(ValueError) as info:
        specnb.drafters.FeatureDrafter(random_head(target).head, dynamic=dynamic)
    assert fragment in str(info.value)


def test_dynamic_excludes_a_static_tree_and_an_early_stop(target):
    head = random_head(target).head
    for extra in ({"tree": (2,)}, {"stop_below": 0.3}):
        with pytest.raises(ValueError, match="without tree or stop_below"):
            specnb.drafters.FeatureDrafter(head, dynamic=(4, 2, 2), **extra)
    assert DynamicTree(8, 4, 4).grown == 4 + 3 * 16


def test_visible_needs_a_tree_and_the_caches_shape(target):
    lm = BatchedCachedLM(target, 0)
    lm.forward(torch.tensor([[1, 2, 3]]))
    with pytest.raises(ValueError, match="pass tree too"):
        lm.forward(torch.tensor([[4]]), visible=torch.ones(1, 1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"visible must be a bool tensor \[B, T, S\]"):
        lm.forward(torch.tensor([[4, 5]]), tree=ROOTS, visible=torch.ones(1, 2, 2,
                                                                          dtype=torch.bool))
