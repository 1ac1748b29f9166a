"""The whole speculative loop samples from the target: first two tokens' joint law, by χ².

The exact joint p(t1, t2 | prompt) of a tiny target is enumerated (V + 1 forwards); the
empirical joint of many `speculative` runs (γ = 1, so drafts, rejections, resamples and bonus
tokens all occur) must fit it. Broken loops must not.
"""

import importlib

import pytest
import torch
from scipy.stats import chisquare

import specnb
from tiny_models import tiny_llama
from specnb.core import sample, verify_detailed

# The package re-exports the function `speculative`, which hides the module of the same name.
speculative_module = importlib.import_module("specnb.methods.speculative")

VOCAB, RUNS, P_MIN = 6, 2500, 1e-3


def exact_joint(model, ids, temperature):
    """[V, V] table of p(t1) p(t2 | t1) at the given temperature."""
    with torch.no_grad():
        first = torch.softmax(model(ids).logits[0, -1] / temperature, -1)
        followups = torch.cat([ids.expand(VOCAB, -1), torch.arange(VOCAB)[:, None]], dim=1)
        second = torch.softmax(model(followups).logits[:, -1] / temperature, -1)
    return first[:, None] * second


def empirical_joint(target, draft, ids, temperature, seed):
    generator = torch.Generator().manual_seed(seed)
    counts = torch.zeros(VOCAB, VOCAB)
    for _ in range(RUNS):
        result = specnb.speculative(target, draft, ids, gamma=1, max_new_tokens=2,
                                    temperature=temperature, generator=generator)
        first, second = result.tokens[0]
        counts[first, second] += 1
    return counts


def chi2_pvalue(counts, probs):
    expected = probs.flatten().double() * counts.sum()
    observed = counts.flatten().double()
    keep = expected >= 5  # pool the rare cells into one so the χ² approximation holds
    observed = torch.cat([observed[keep], observed[~keep].sum().view(1)])
    expected = torch.cat([expected[keep], expected[~keep].sum().view(1)])
    return chisquare(observed.numpy(), expected.numpy() * observed.sum().item() /
                     expected.sum().item()).pvalue


@pytest.fixture(scope="module")
def pair():
    target = tiny_llama(11, vocab=VOCAB, std=0.5)
    draft = tiny_llama(13, vocab=VOCAB, std=0.3, hidden=16, layers=1)  # α ≈ 0.4
    return target, draft, torch.tensor([[1, 4, 2]])


def verify_without_residual(target_probs, draft_probs, draft_ids, bonus_ids, *, generator=None,
                            **_):
    """Broken: at a rejection, resample from p instead of (p − q)+."""
    verdict = verify_detailed(target_probs, draft_probs, draft_ids, bonus_ids, generator=generator)
    batch, gamma = draft_ids.shape
    if gamma == 0:  # only a bonus token: nothing to resample
        return verdict
    n = verdict.num_accepted
    rejected = n < gamma
    row = n.clamp(max=gamma - 1)
    naive = sample(target_probs[torch.arange(batch), row], generator=generator)
    verdict.tokens[torch.arange(batch), n] = torch.where(rejected, naive,
                                                         verdict.tokens[torch.arange(batch), n])
    return verdict


def greedy_draws(probs, temperature, *, generator=None):
    """Broken: the draft and bonus take the argmax although the target samples."""
    return probs.argmax(dim=-1)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_speculative_samples_the_target_joint(pair, temperature):
    target, draft, ids = pair
    counts = empirical_joint(target, draft, ids, temperature, seed=20)
    result = specnb.speculative(target, draft, ids, gamma=1, max_new_tokens=2,
                                temperature=temperature, generator=torch.Generator().manual_seed(0))
    assert result.stats.draft_forwards >= 1
    assert chi2_pvalue(counts, exact_joint(target, ids, temperature)) > P_MIN


@pytest.mark.parametrize("broken", ["no_residual", "greedy_draws"])
def test_broken_loops_are_caught(pair, monkeypatch, broken):
    target, draft, ids = pair
    if broken == "no_residual":
        monkeypatch.setattr(speculative_module, "verify_detailed", verify_without_residual)
    else:
        monkeypatch.setattr(speculative_module, "draw", greedy_draws)
    counts = empirical_joint(target, draft, ids, 1.0, seed=20)
    assert chi2_pvalue(counts, exact_joint(target, ids, 1.0)) < P_MIN
