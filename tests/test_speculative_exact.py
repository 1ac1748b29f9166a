"""The whole speculative loop samples from the target: joint law of the first three tokens, χ².

Thousands of rows of one prompt run in a single batched call (B = 1 is a batch of one, so this
covers the one loop). Rows accept different numbers of drafts and roll back by different
amounts, so a row that saw another row's state, or a cache that kept a rejected draft, would
shift the law. The feature head runs with random weights and a draft vocabulary that
leaves out 2 of the 6 tokens (q = 0 there), so the residual must cover them. The exact joint p(t1, t2, t3 | prompt) of a tiny target is enumerated. Each
deliberately broken variant must fail the same test.
"""

import importlib

import pytest
import torch

import specnb
from specnb.core import sample, verify
from specnb.stats import chi2_pvalue
from head_fixtures import random_head
from tiny_models import tiny_llama

# The package re-exports the function `speculative`, which hides the module of the same name.
loop_module = importlib.import_module("specnb.methods.speculative")

VOCAB, ROWS, P_MIN = 6, 6000, 1e-3
PROMPT = [1, 4, 2, 1, 4]  # repeats, so prompt lookup finds n-grams to copy


@pytest.fixture(scope="module")
def pair():
    target = tiny_llama(11, vocab=VOCAB, std=0.5)
    draft = tiny_llama(13, vocab=VOCAB, std=0.3, hidden=16, layers=1)  # α ≈ 0.4
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


def sampled_codes(pair, method, temperature, seed=5, gamma=2):
    target, draft = pair
    generator = torch.Generator().manual_seed(seed)
    prompts = [PROMPT] * ROWS
    if method in ("speculative", "feature head", "early stop", "feature head early stop"):
        # Early stop: rows stop drafting after a token the draft gives q < 0.3, so rows check
        # different numbers of drafts, decided by the draft alone.
        stop = 0.3 if method.endswith("early stop") else None
        drafter = specnb.drafters.ModelDrafter(draft, stop_below=stop) \
            if method in ("speculative", "early stop") else \
            specnb.drafters.FeatureDrafter(random_head(target, draft_vocab=4).head, stop_below=stop)
        result = specnb.speculative(target, drafter, prompts, gamma=gamma, max_new_tokens=5,
                                    temperature=temperature, generator=generator)
    else:
        result = specnb.prompt_lookup(target, prompts, num_pred=gamma, ngram_max=2,
                                      max_new_tokens=5, temperature=temperature,
                                      generator=generator)
    # The prompt's forward gives token 1; the first iteration drafts up to 3 tokens (the budget
    # of 5 allows it), so tokens 2 and 3 come from drafts, rejections, resamples and bonuses.
    tokens = torch.tensor(result.tokens)[:, :3]  # [ROWS, 3]
    assert result.stats.drafted > 0 and 0 < result.stats.accepted < result.stats.drafted
    return tokens[:, 0] * VOCAB ** 2 + tokens[:, 1] * VOCAB + tokens[:, 2]


@pytest.mark.parametrize("method", ["speculative", "prompt_lookup", "feature head", "early stop",
                                    "feature head early stop"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_loop_samples_the_target_joint(pair, method, temperature):
    codes = sampled_codes(pair, method, temperature)
    assert chi2_pvalue(codes, exact_joint(pair[0], temperature)) > P_MIN


def verify_without_residual(target_probs, draft_probs, draft_ids, bonus_ids, *, num_drafts=None,
                            generator=None, **_):
    """Broken: at a rejection, resample from p instead of (p − q)+."""
    verdict = verify(target_probs, draft_probs, draft_ids, bonus_ids, num_drafts=num_drafts,
                     generator=generator, check=False)
    if draft_ids.shape[1] == 0:
        return verdict
    rows = torch.arange(draft_ids.shape[0])
    n = verdict.num_accepted
    rejected = n < num_drafts
    naive = sample(target_probs[rows, n.clamp(max=draft_ids.shape[1] - 1)], generator=generator)
    verdict.tokens[rows, n] = torch.where(rejected, naive, verdict.tokens[rows, n])
    return verdict


def verify_past_rejection(target_probs, draft_probs, draft_ids, bonus_ids, *, num_drafts=None,
                          generator=None, **_):
    """Broken: a rejected draft is dropped but the later drafts are still checked and kept."""
    verdict = verify(target_probs, draft_probs, draft_ids, bonus_ids, num_drafts=num_drafts,
                     generator=generator, check=False)
    width = draft_ids.shape[1]
    for row in range(draft_ids.shape[0]):
        count = int(num_drafts[row])
        passed = [j for j in range(count) if bool(verdict.coin_accepts[row, j])]
        if int(verdict.num_accepted[row]) < count and passed and passed[-1] > \
                int(verdict.num_accepted[row]):
            kept = [int(draft_ids[row, j]) for j in passed] + [int(bonus_ids[row, 0])]
            verdict.tokens[row] = torch.tensor((kept + [-1] * (width + 1))[:width + 1])
            verdict.num_accepted[row] = len(passed)
    return verdict


def greedy_draws(probs, temperature, *, generator=None, **_):
    """Broken: drafts and bonus tokens take the argmax although the target samples."""
    return probs.argmax(dim=-1)


original_rollback = specnb.core.batch_kv.BatchedCachedLM.rollback


def rollback_one_short(self, num_tokens, **options):
    """Broken: keep the last rejected draft of every row in the target's cache."""
    return original_rollback(self, (num_tokens - 1).clamp_min(0), **options)


@pytest.mark.parametrize("method", ["speculative", "feature head", "early stop"])
@pytest.mark.parametrize("broken", ["no_residual", "past_rejection", "greedy_draws",
                                    "stale_cache"])
def test_broken_loops_are_caught(pair, monkeypatch, broken, method):
    if broken == "no_residual":
        monkeypatch.setattr(loop_module, "verify", verify_without_residual)
    elif broken == "past_rejection":
        monkeypatch.setattr(loop_module, "verify", verify_past_rejection)
    elif broken == "greedy_draws":
        for module in ("specnb.methods.speculative", "specnb.drafters.model",
                       "specnb.drafters.feature"):
            monkeypatch.setattr(importlib.import_module(module), "draw", greedy_draws)
    else:
        monkeypatch.setattr(specnb.core.batch_kv.BatchedCachedLM, "rollback", rollback_one_short)
    codes = sampled_codes(pair, method, 1.0, gamma=3)
    assert chi2_pvalue(codes, exact_joint(pair[0], 1.0)) < P_MIN
