"""Lookahead decoding through the one loop: greedy equals transformers, sampling keeps the joint.

The window's bookkeeping is checked by hand on a small example (which n-grams a step pools, how
the levels shift); the whole method against transformers' greedy `generate` alone and in a
ragged batch, and against the exact joint law of three tokens by χ² (the candidates are point
masses, so the exact tree rule keeps the target's law); a broken cache must fail that test.
"""

import pytest
import torch

import specnb
from specnb.core.batch_kv import BatchedCachedLM
from specnb.drafters import LookaheadDrafter
from specnb.drafters.base import Step
from specnb.stats import chi2_pvalue
from test_speculative_exact import P_MIN, PROMPT, ROWS, VOCAB, exact_joint, pair  # noqa: F401
from test_tree_loop import hf_greedy, keep_one_rejected_node, repetitive_prompts

MAX_NEW = 30


def test_one_step_pools_each_column_and_shifts_the_levels():
    drafter = LookaheadDrafter(window=3, ngram=3, candidates=2)
    pending = torch.tensor([9])
    drafter.start(None, [[7, 8, 9]], pending, eos_ids={0})
    drafter.windows = [[[11, 12, 13], [21, 22, 23]]]  # level 0, level 1
    proposal = drafter.propose(torch.tensor([4]), width=4, temperature=0.0, generator=None)
    # Nodes: trunk 12 (under 9), 13 (under 12); level 1: 21 under 9, 22 under 12, 23 under 13.
    assert proposal.token_ids.tolist() == [[12, 13, 21, 22, 23]]
    assert proposal.parents.tolist() == [[-1, 0, -1, 0, 1]]
    assert proposal.num_drafts.tolist() == [5] and proposal.probs is None
    # The target's argmax at [pending, 12, 13, 21, 22, 23]: the new level is read at 21, 22, 23.
    argmax = torch.tensor([[40, 41, 42, 31, 32, 33]])
    drafter.update(Step(torch.tensor([[40]]), torch.tensor([0]), [[40]], None, 5, argmax))
    # Column c's n-gram: level 0's token (the pending token at c = 0), level 1's, the new one.
    assert drafter.pools[0] == {9: [(21, 31)], 12: [(22, 32)], 13: [(23, 33)]}
    assert drafter.windows[0] == [[21, 22, 23], [31, 32, 33]]
    assert drafter.sequences[0] == [7, 8, 9, 40]


def test_pooled_ngrams_are_checked_and_the_budget_bounds_depth():
    drafter = LookaheadDrafter(window=2, ngram=3, candidates=2)
    drafter.start(None, [[5, 6]], torch.tensor([6]), eos_ids={0})
    drafter.windows = [[[1, 2], [3, 4]]]
    drafter.pools = [{6: [(7, 8), (7, 9)], 5: [(1, 1)]}]
    proposal = drafter.propose(torch.tensor([1]), width=1, temperature=0.0, generator=None)
    # Budget 1: the pooled chains cut to one token (merged: 7 once), then window nodes of
    # depth 1 (2 under 6, 3 under 6); the depth-2 node 4 (under 2) is fed but not a candidate.
    assert proposal.token_ids.tolist() == [[7, 2, 3, 4]]
    assert proposal.parents.tolist() == [[-1, -1, -1, 1]]
    assert proposal.num_drafts.tolist() == [3]
    assert drafter.columns[0][(1, 1)] == 4  # read back from fed column 4
    nothing = drafter.propose(torch.tensor([0]), width=0, temperature=0.0, generator=None)
    assert nothing.token_ids.shape == (1, 0) and drafter.columns[0] is None


def test_the_carry_is_jacobis_next_block_and_is_checked_first():
    """Nothing accepted: Jacobi would next check the target's argmax at the trunk's nodes
    (41 after 12, 42 after 13), padded with the last; lookahead checks it as a candidate."""
    drafter = LookaheadDrafter(window=3, ngram=3, candidates=2)
    drafter.start(None, [[7, 8, 9]], torch.tensor([9]), eos_ids={0})
    drafter.windows = [[[11, 12, 13], [21, 22, 23]]]
    drafter.propose(torch.tensor([4]), width=4, temperature=0.0, generator=None)
    argmax = torch.tensor([[40, 41, 42, 31, 32, 33]])  # at [pending, 12, 13, 21, 22, 23]
    drafter.update(Step(torch.tensor([[40]]), torch.tensor([0]), [[40]], None, 5, argmax))
    assert drafter.depth == 3 and drafter.carries[0] == [41, 42, 42]
    proposal = drafter.propose(torch.tensor([4]), width=4, temperature=0.0, generator=None)
    # The carry chain first (under the new pending token 40), then the window: trunk 22, 23,
    # the new level 31 (under 40), 32 (under 22), 33 (under 23).
    assert proposal.token_ids.tolist() == [[41, 42, 42, 22, 23, 31, 32, 33]]
    assert proposal.parents.tolist() == [[-1, 0, 1, -1, 3, -1, 3, 4]]


def test_the_carry_follows_the_branch_that_was_accepted():
    """Two trunk tokens accepted (12, 13 under 9, the target's argmax was 12, 13, 50): the carry
    continues past the accepted ones along the trunk (here: nothing left, so the bonus 50)."""
    drafter = LookaheadDrafter(window=4, ngram=2, candidates=2)
    drafter.start(None, [[7, 8, 9]], torch.tensor([9]), eos_ids={0})
    drafter.windows = [[[11, 12, 13, 14]]]
    proposal = drafter.propose(torch.tensor([4]), width=4, temperature=0.0, generator=None)
    assert proposal.token_ids.tolist() == [[12, 13, 14]]  # trunk 12 -> 13 -> 14
    argmax = torch.tensor([[12, 13, 50, 51]])  # 12 and 13 match, 14 does not (50)
    drafter.update(Step(torch.tensor([[12, 13, 50]]), torch.tensor([2]), [[12, 13, 50]], None,
                        3, argmax))
    assert drafter.carries[0] == [51, 51, 51]  # argmax at 14 (past 13), padded to depth 3


def test_a_window_node_repeating_a_sibling_is_that_sibling():
    """A pooled n-gram (12, 99) and the trunk's 12 under the same pending token: one node 12,
    both continuations under it, so neither hides the other from the tree rule."""
    drafter = LookaheadDrafter(window=3, ngram=2, candidates=2)
    drafter.start(None, [[7, 8, 9]], torch.tensor([9]), eos_ids={0})
    drafter.windows = [[[11, 12, 13]]]
    drafter.pools = [{9: [(12, 99)]}]
    proposal = drafter.propose(torch.tensor([4]), width=4, temperature=0.0, generator=None)
    assert proposal.token_ids.tolist() == [[12, 99, 13]]
    assert proposal.parents.tolist() == [[-1, 0, 0]]
    assert drafter.columns[0][(0, 1)] == 1  # the trunk's 12 is read back at the shared node


@pytest.mark.embedded
def test_lookahead_keeps_what_jacobi_keeps(embedded):
    """The prompt where lookahead once made fewer tokens per forward than Jacobi (block 8): with
    Jacobi's own next block among its candidates it makes at least as many, greedy-exact."""
    model, tokenizer = embedded
    ids = specnb.chat_ids(tokenizer, "Explain in three sentences why the sky is blue.")
    jacobi = specnb.jacobi(model, ids, block=8, max_new_tokens=64)
    lookahead = specnb.lookahead(model, ids, window=5, ngram=3, candidates=5, max_new_tokens=64)
    assert lookahead.tokens == jacobi.tokens
    assert lookahead.stats.target_forwards <= jacobi.stats.target_forwards


def test_the_pool_keeps_the_newest_distinct_ngrams():
    drafter = LookaheadDrafter(window=1, ngram=2, candidates=2)
    drafter.start(None, [[3]], torch.tensor([3]), eos_ids=set())
    for new in (5, 5, 6, 7):
        drafter._refine(0, [new])
    assert drafter.pools[0] == {3: [(6,), (7,)]} and drafter.ngrams_pooled == 3


@pytest.mark.parametrize("window, ngram, candidates", [(1, 2, 1), (4, 3, 2), (5, 4, 3),
                                                       (3, 2, 5)])
def test_greedy_equals_hf_alone_and_in_a_ragged_batch(target, prompts, window, ngram,
                                                      candidates):
    expected = [hf_greedy(target, p, MAX_NEW) for p in prompts]
    for prompt, want in zip(prompts, expected):
        result = specnb.lookahead(target, prompt, window=window, ngram=ngram,
                                  candidates=candidates, max_new_tokens=MAX_NEW)
        assert result.tokens == [want] and result.method == "lookahead"
    batch = specnb.lookahead(target, [p[0].tolist() for p in prompts], window=window,
                             ngram=ngram, candidates=candidates, max_new_tokens=MAX_NEW)
    assert batch.tokens == expected


def test_repetitive_text_is_found_in_the_pool(target):
    """On text that repeats, pooled n-grams get accepted: fewer forwards than tokens."""
    for prompt in repetitive_prompts():
        want = hf_greedy(target, torch.tensor([prompt]), MAX_NEW)
        result = specnb.lookahead(target, prompt, window=4, ngram=3, candidates=4,
                                  max_new_tokens=MAX_NEW)
        assert result.tokens == [want]
        assert result.stats.accepted > 0
        assert result.stats.target_forwards < result.stats.new_tokens


def lookahead_codes(target, temperature, seed=5):
    result = specnb.lookahead(target, [PROMPT] * ROWS, window=3, ngram=3, candidates=3,
                              max_new_tokens=5, temperature=temperature,
                              generator=torch.Generator().manual_seed(seed))
    tokens = torch.tensor(result.tokens)[:, :3]
    assert 0 < result.stats.accepted < result.stats.drafted
    return tokens[:, 0] * VOCAB ** 2 + tokens[:, 1] * VOCAB + tokens[:, 2]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_lookahead_samples_the_target_joint(pair, temperature):
    codes = lookahead_codes(pair[0], temperature)
    assert chi2_pvalue(codes, exact_joint(pair[0], temperature)) > P_MIN


def test_a_stale_cache_is_caught(pair, monkeypatch):
    monkeypatch.setattr(BatchedCachedLM, "keep_only", keep_one_rejected_node)
    codes = lookahead_codes(pair[0], 1.0)
    assert chi2_pvalue(codes, exact_joint(pair[0], 1.0)) < P_MIN


@pytest.mark.parametrize("name, value", [("window", 0), ("window", 2.0), ("ngram", 1),
                                         ("ngram", True), ("candidates", 0),
                                         ("candidates", "3")])
def test_bad_parameters_are_refused_by_name(target, prompts, name, value):
    with pytest.raises(ValueError, match=name):
        specnb.lookahead(target, prompts[0], max_new_tokens=4, **{name: value})


def test_a_window_wider_than_the_context_is_refused(target, prompts):
    context = target.config.max_position_embeddings
    with pytest.raises(ValueError, match="choose a smaller window"):
        specnb.lookahead(target, prompts[0], window=context, ngram=2, candidates=1,
                         max_new_tokens=4)
