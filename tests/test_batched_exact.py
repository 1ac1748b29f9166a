"""The batched loops sample from the target: joint law of the first three tokens, by χ².

Thousands of rows of one prompt run in a single call, so the whole-loop test is fast. Rows
accept different numbers of drafts and roll back by different amounts, so a row that saw
another row's state, or a cache that kept a rejected draft, would shift the law. Broken
variants must fail the same test.
"""

import importlib

import pytest
import torch

import specnb
from specnb.core import sample, verify_detailed
from stats import chi2_pvalue
from tiny_models import tiny_llama

batched_module = importlib.import_module("specnb.methods.batched")

VOCAB, ROWS, P_MIN = 6, 6000, 1e-3
PROMPT = [1, 4, 2, 1, 4]  # repeats, so prompt lookup finds n-grams to copy


@pytest.fixture(scope="module")
def pair():
    target = tiny_llama(11, vocab=VOCAB, std=0.5)
    draft = tiny_llama(13, vocab=VOCAB, std=0.3, hidden=16, layers=1)
    return target, draft


def exact_joint(model, temperature):
    """`[V³]` table of p(t1) p(t2 | t1) p(t3 | t1, t2), flattened as t1·V² + t2·V + t3."""
    ids = torch.tensor([PROMPT])
    with torch.no_grad():
        first = torch.softmax(model(ids).logits[0, -1] / temperature, -1)
        pairs = torch.cartesian_prod(torch.arange(VOCAB), torch.arange(VOCAB))  # [V², 2]
        singles = torch.arange(VOCAB)[:, None]
        seconds = torch.softmax(model(torch.cat([ids.expand(VOCAB, -1), singles], 1))
                                .logits[:, -1] / temperature, -1)  # [V, V]
        thirds = torch.softmax(model(torch.cat([ids.expand(VOCAB ** 2, -1), pairs], 1))
                               .logits[:, -1] / temperature, -1)  # [V², V]
    return (first[:, None, None] * seconds[:, :, None] * thirds.view(VOCAB, VOCAB, VOCAB)).flatten()


def sampled_codes(pair, method, temperature, seed=5):
    target, draft = pair
    generator = torch.Generator().manual_seed(seed)
    prompts = [PROMPT] * ROWS
    if method == "speculative":
        result = specnb.speculative(target, draft, prompts, gamma=2, max_new_tokens=3,
                                    temperature=temperature, generator=generator)
    else:
        result = specnb.prompt_lookup(target, prompts, num_pred=2, ngram_max=2,
                                      max_new_tokens=3, temperature=temperature,
                                      generator=generator)
    tokens = torch.tensor(result.tokens)  # [ROWS, 3]
    assert result.stats.drafted > 0 and 0 < result.stats.accepted < result.stats.drafted
    return tokens[:, 0] * VOCAB ** 2 + tokens[:, 1] * VOCAB + tokens[:, 2]


@pytest.mark.parametrize("method", ["speculative", "prompt_lookup"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_batched_loops_sample_the_target_joint(pair, method, temperature):
    codes = sampled_codes(pair, method, temperature)
    assert chi2_pvalue(codes, exact_joint(pair[0], temperature)) > P_MIN


def verify_without_residual(target_probs, draft_probs, draft_ids, bonus_ids, *, num_drafts=None,
                            generator=None, **_):
    """Broken: at a rejection, resample from p instead of (p − q)+."""
    verdict = verify_detailed(target_probs, draft_probs, draft_ids, bonus_ids,
                              num_drafts=num_drafts, generator=generator)
    rows = torch.arange(draft_ids.shape[0])
    n = verdict.num_accepted
    rejected = n < num_drafts
    naive = sample(target_probs[rows, n.clamp(max=draft_ids.shape[1] - 1)], generator=generator)
    verdict.tokens[rows, n] = torch.where(rejected, naive, verdict.tokens[rows, n])
    return verdict


def rollback_one_short(self, num_tokens):
    """Broken: keep the last rejected draft of every row in the target's cache."""
    return original_rollback(self, (num_tokens - 1).clamp_min(0))


original_rollback = batched_module.BatchedCachedLM.rollback


@pytest.mark.parametrize("broken", ["no_residual", "stale_cache"])
def test_broken_batched_loops_are_caught(pair, monkeypatch, broken):
    if broken == "no_residual":
        monkeypatch.setattr(batched_module, "verify_detailed", verify_without_residual)
    else:
        monkeypatch.setattr(batched_module.BatchedCachedLM, "rollback", rollback_one_short)
    codes = sampled_codes(pair, "speculative", 1.0)
    assert chi2_pvalue(codes, exact_joint(pair[0], 1.0)) < P_MIN
