"""Token trees through the one loop: greedy equals transformers, sampling keeps the target's joint.

The same χ² on the joint law of the first three tokens as `test_speculative_exact`, with drafters
that propose trees (deterministic top-k branches; siblings drawn independently from q); broken
variants (a rejected sibling left in r; a rejected branch left in the target's cache) must fail.
"""

import importlib
from functools import partial

import pytest
import torch

import specnb
from specnb.core.batch_kv import BatchedCachedLM
from specnb.core.tree_verify import tree_verify
from specnb.stats import chi2_pvalue
from test_speculative_exact import P_MIN, PROMPT, ROWS, VOCAB, exact_joint
from tiny_models import perturbed, tiny_llama
from head_fixtures import random_head
from tree_drafters import SampledSiblings, TopKTree

loop_module = importlib.import_module("specnb.methods.speculative")
MAX_NEW = 30


def hf_greedy(model, ids, max_new_tokens):
    out = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=0)
    return out[0, ids.shape[1]:].tolist()


@pytest.mark.parametrize("k, depth", [(1, 1), (2, 1), (3, 2), (2, 4)])
@pytest.mark.parametrize("draft_name", ["perturbed", "same"])
def test_trees_equal_hf_greedy_alone_and_in_a_ragged_batch(target, drafts, prompts, k, depth,
                                                           draft_name):
    expected = [hf_greedy(target, ids, MAX_NEW) for ids in prompts]
    drafter = TopKTree(drafts[draft_name], k, depth)
    for ids, want in zip(prompts, expected):
        result = specnb.speculative(target, drafter, ids, gamma=depth, max_new_tokens=MAX_NEW)
        assert result.tokens == [want]
    batch = specnb.speculative(target, drafter, [ids[0].tolist() for ids in prompts],
                               gamma=depth, max_new_tokens=MAX_NEW)
    assert batch.tokens == expected
    stats = batch.stats
    assert stats.accepted > 0
    if draft_name == "same":  # the target's own argmax is always the first branch
        assert stats.target_forwards < MAX_NEW * len(prompts) / min(depth + 1, 2) + 3


def test_a_tree_beats_its_first_branch_alone(target, drafts, prompts):
    """More branches, same depth: more tokens per target forward (the point of trees)."""
    ids = [p[0].tolist() for p in prompts]
    chain = specnb.speculative(target, TopKTree(drafts["perturbed"], 1, 2), ids, gamma=2,
                               max_new_tokens=MAX_NEW)
    tree = specnb.speculative(target, TopKTree(drafts["perturbed"], 3, 2), ids, gamma=2,
                              max_new_tokens=MAX_NEW)
    assert tree.tokens == chain.tokens
    assert tree.stats.target_forwards < chain.stats.target_forwards


def test_the_trace_names_each_nodes_parent_and_fate(target, drafts, prompts):
    result = specnb.speculative(target, TopKTree(drafts["perturbed"], 2, 2), prompts[0],
                                gamma=2, max_new_tokens=12, trace=True)
    statuses = {d.status for it in result.trace for d in it.drafted}
    assert {"accepted", "rejected"} <= statuses  # both fates below are exercised
    for it in result.trace:
        if not it.drafted:
            continue
        # two branches of two, or of one where the budget leaves one level
        assert [d.parent for d in it.drafted] in ([-1, 0, -1, 2], [-1, -1])
        accepted = [j for j, d in enumerate(it.drafted) if d.status == "accepted"]
        assert len(accepted) == len(it.emitted) - 1
        # an accepted node's parent is the pending token or an accepted node
        assert all(it.drafted[j].parent in [-1] + accepted for j in accepted)
        assert all(d.status in ("accepted", "rejected", "unverified") for d in it.drafted)
        # the last token: drawn after a rejected child ("resampled") or below a kept leaf
        last = accepted[-1] if accepted else -1
        tried_children = any(d.parent == last and d.status == "rejected" for d in it.drafted)
        assert it.emitted[-1].kind == ("resampled" if tried_children else "bonus")


def test_typical_acceptance_refuses_a_tree(target, drafts, prompts):
    with pytest.raises(ValueError, match="token trees are verified by the exact rule only"):
        specnb.speculative(target, TopKTree(drafts["perturbed"], 2, 1), prompts[0], gamma=1,
                           max_new_tokens=4, acceptance="typical", temperature=0.7,
                           generator=torch.Generator().manual_seed(0))


# ---- sampling: the joint law of three tokens -----------------------------------------------

@pytest.fixture(scope="module")
def pair():
    return tiny_llama(11, vocab=VOCAB, std=0.5), tiny_llama(13, vocab=VOCAB, std=0.3, hidden=16,
                                                            layers=1)


def tree_codes(pair, drafter_name, temperature, seed=5):
    target, draft = pair
    drafter = TopKTree(draft, 2, 2) if drafter_name == "top-k tree" else SampledSiblings(draft, 3)
    result = specnb.speculative(target, drafter, [PROMPT] * ROWS, gamma=2, max_new_tokens=5,
                                temperature=temperature,
                                generator=torch.Generator().manual_seed(seed))
    tokens = torch.tensor(result.tokens)[:, :3]
    assert result.stats.drafted > 0 and 0 < result.stats.accepted < result.stats.drafted
    return tokens[:, 0] * VOCAB ** 2 + tokens[:, 1] * VOCAB + tokens[:, 2]


@pytest.mark.parametrize("drafter_name", ["top-k tree", "sampled siblings"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_trees_sample_the_target_joint(pair, drafter_name, temperature):
    codes = tree_codes(pair, drafter_name, temperature)
    assert chi2_pvalue(codes, exact_joint(pair[0], temperature)) > P_MIN


original_keep_only = BatchedCachedLM.keep_only


def keep_one_rejected_node(self, kept, **counts):
    """Broken: also keep the first fed node that was not kept (a rejected sibling); the loop's
    host counts no longer describe what is kept, so they are not passed on."""
    extra = (~kept).long().cumsum(1) == 1
    return original_keep_only(self, kept | (extra & ~kept))


@pytest.mark.parametrize("broken", ["sibling left in r", "stale cache"])
def test_broken_tree_loops_are_caught(pair, monkeypatch, broken):
    if broken == "sibling left in r":
        monkeypatch.setattr(loop_module, "tree_verify", partial(tree_verify, renormalize=False))
    else:
        monkeypatch.setattr(BatchedCachedLM, "keep_only", keep_one_rejected_node)
    codes = tree_codes(pair, "top-k tree", 1.0)
    assert chi2_pvalue(codes, exact_joint(pair[0], 1.0)) < P_MIN


# ---- the feature head's tree -----------------------------------------------------------------

@pytest.mark.parametrize("tree, gamma, stop", [((3,), 1, None), ((3, 2), 2, None),
                                               ((2, 2, 1), 3, None), ((4, 2), 4, 0.2)])
def test_head_trees_equal_hf_greedy_alone_and_in_a_ragged_batch(target, prompts, tree, gamma,
                                                                stop):
    head = random_head(target, std=0.05)
    drafter = specnb.drafters.FeatureDrafter(head.head, tree=tree, stop_below=stop)
    batch = greedy_equals_hf(target, prompts, drafter, gamma)
    sizes = {len(it.drafted) for it in batch.trace if it.drafted}
    assert max(sizes) <= sum(tree[:gamma])  # the shape, cut to γ levels


def greedy_equals_hf(target, prompts, drafter, gamma):
    """Assert the drafter's greedy tokens equal transformers' for each prompt alone and for all
    of them as one ragged batch; return the batch's result."""
    expected = [hf_greedy(target, ids, MAX_NEW) for ids in prompts]
    for ids, want in zip(prompts, expected):
        assert specnb.speculative(target, drafter, ids, gamma=gamma,
                                  max_new_tokens=MAX_NEW).tokens == [want]
    batch = specnb.speculative(target, drafter, [p[0].tolist() for p in prompts], gamma=gamma,
                               max_new_tokens=MAX_NEW, trace=True)
    assert batch.tokens == expected
    return batch


def joint_pvalue(target, drafter, temperature, gamma: int = 2) -> float:
    """χ² p-value of the first three sampled tokens against the target's exact joint law."""
    result = specnb.speculative(target, drafter, [PROMPT] * ROWS, gamma=gamma, max_new_tokens=5,
                                temperature=temperature,
                                generator=torch.Generator().manual_seed(6))
    tokens = torch.tensor(result.tokens)[:, :3]
    assert 0 < result.stats.accepted < result.stats.drafted
    codes = tokens[:, 0] * VOCAB ** 2 + tokens[:, 1] * VOCAB + tokens[:, 2]
    return chi2_pvalue(codes, exact_joint(target, temperature))


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_head_trees_sample_the_target_joint(pair, temperature):
    target, _ = pair
    drafter = specnb.drafters.FeatureDrafter(random_head(target, draft_vocab=4).head, tree=(2, 2))
    assert joint_pvalue(target, drafter, temperature) > P_MIN


@pytest.mark.parametrize("tree", [0, (), (2, 0), (2.0,), True, "4,2"])
def test_bad_tree_widths_are_refused(target, tree):
    with pytest.raises(ValueError, match="tree must be None"):
        specnb.drafters.FeatureDrafter(random_head(target).head, tree=tree)


# ---- n-gram branches and the mixed drafter ---------------------------------------------------

def repetitive_prompts():
    g = torch.Generator().manual_seed(9)
    pieces = [torch.randint(1, 96, (4,), generator=g).tolist() for _ in range(3)]
    return [pieces[0] + pieces[1] + pieces[0] + pieces[2] + pieces[0],
            pieces[1] + pieces[0] + pieces[1], pieces[2] * 3 + pieces[0]]


@pytest.mark.parametrize("make", ["ngram branches", "mixed", "mixed with a chain head"])
def test_ngram_trees_and_the_mixed_drafter_equal_hf_greedy(target, make):
    """At T = 0 a chain head joins a mixed drafter too: its guesses are its argmax."""
    prompts = repetitive_prompts()
    expected = [hf_greedy(target, torch.tensor([p]), MAX_NEW) for p in prompts]
    ngram = specnb.drafters.NgramDrafter(3, 1, branches=3)
    tree = None if make == "mixed with a chain head" else (2, 1)
    drafter = ngram if make == "ngram branches" else specnb.drafters.MixedDrafter(
        specnb.drafters.FeatureDrafter(random_head(target, std=0.05).head, tree=tree), ngram)
    for prompt, want in zip(prompts, expected):
        assert specnb.speculative(target, drafter, prompt, gamma=3,
                                  max_new_tokens=MAX_NEW, trace=True).tokens == [want]
    batch = specnb.speculative(target, drafter, prompts, gamma=3, max_new_tokens=MAX_NEW,
                               trace=True)
    assert batch.tokens == expected
    trees = [it for it in batch.trace if sum(d.parent == -1 for d in it.drafted) > 1]
    assert trees  # some iterations did propose several branches
    if make.startswith("mixed"):
        sources = {tuple(s) for it in batch.trace for s in it.info.get("sources", [])}
        assert {(0,), (1,)} <= sources  # nodes from each part


def test_the_mixed_drafter_samples_the_target_joint(pair):
    target, _ = pair
    drafter = specnb.drafters.MixedDrafter(
        specnb.drafters.FeatureDrafter(random_head(target, draft_vocab=4).head, tree=(2,)),
        specnb.drafters.NgramDrafter(2, 1, branches=2))
    result = specnb.speculative(target, drafter, [PROMPT] * ROWS, gamma=2, max_new_tokens=5,
                                temperature=1.0, generator=torch.Generator().manual_seed(8))
    tokens = torch.tensor(result.tokens)[:, :3]
    assert 0 < result.stats.accepted < result.stats.drafted
    codes = tokens[:, 0] * VOCAB ** 2 + tokens[:, 1] * VOCAB + tokens[:, 2]
    assert chi2_pvalue(codes, exact_joint(target, 1.0)) > P_MIN


def test_the_mixed_drafter_refuses_what_it_cannot_merge(target, drafts, prompts):
    head = random_head(target)
    ngram = specnb.drafters.NgramDrafter()
    with pytest.raises(ValueError, match="two drafters or more"):
        specnb.drafters.MixedDrafter(ngram)
    with pytest.raises(ValueError, match="ModelDrafter cannot be part"):
        specnb.drafters.MixedDrafter(ngram, specnb.drafters.ModelDrafter(drafts["perturbed"]))
    with pytest.raises(ValueError, match="Drafter objects"):
        specnb.drafters.MixedDrafter(ngram, drafts["perturbed"])
    chain = specnb.drafters.MixedDrafter(specnb.drafters.FeatureDrafter(head.head), ngram)
    with pytest.raises(ValueError, match="drawn from a law q"):
        specnb.speculative(target, chain, prompts[0], gamma=2, max_new_tokens=4,
                           temperature=0.7, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="branches must be"):
        specnb.drafters.NgramDrafter(branches=0)
