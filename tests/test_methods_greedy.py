"""Greedy decoding by every method equals transformers' `generate(do_sample=False)`."""

import pytest
import torch

import specnb
from tiny_models import tiny_llama

GAMMAS = [1, 2, 3, 4, 5, 8, 63]
MAX_NEW = 40


def hf_greedy(model, input_ids, max_new_tokens, eos_token_id=None):
    out = model.generate(input_ids, max_new_tokens=max_new_tokens, do_sample=False,
                         eos_token_id=eos_token_id, pad_token_id=0)
    return out[0, input_ids.shape[1]:].tolist()


@pytest.fixture(scope="module")
def references(target, prompts):
    return [hf_greedy(target, ids, MAX_NEW) for ids in prompts]


@pytest.mark.parametrize("draft_name", ["random", "perturbed", "same"])
@pytest.mark.parametrize("gamma", GAMMAS)
def test_speculative_equals_hf_greedy(target, drafts, prompts, references, draft_name, gamma):
    for ids, expected in zip(prompts, references):
        result = specnb.speculative(target, drafts[draft_name], ids, gamma=gamma,
                                    max_new_tokens=MAX_NEW)
        assert result.tokens == [expected]
        assert result.stats.new_tokens == MAX_NEW
    if draft_name == "same":  # a draft equal to the target is always right
        assert result.stats.accepted == result.stats.drafted > 0


def test_autoregressive_equals_hf_greedy(target, prompts, references):
    for ids, expected in zip(prompts, references):
        result = specnb.autoregressive(target, ids, max_new_tokens=MAX_NEW)
        assert result.tokens == [expected]
        assert result.stats.target_forwards == MAX_NEW


@pytest.mark.parametrize("num_pred", [1, 3, 10])
@pytest.mark.parametrize("ngram_max,ngram_min", [(3, 1), (2, 2)])
def test_prompt_lookup_equals_hf_greedy(target, prompts, references, num_pred, ngram_max,
                                        ngram_min):
    for ids, expected in zip(prompts, references):
        result = specnb.prompt_lookup(target, ids, num_pred=num_pred, max_new_tokens=MAX_NEW,
                                      ngram_max=ngram_max, ngram_min=ngram_min)
        assert result.tokens == [expected]


@pytest.mark.parametrize("block", [1, 2, 4, 7, 64])
def test_jacobi_equals_hf_greedy(target, prompts, references, block):
    for ids, expected in zip(prompts, references):
        result = specnb.jacobi(target, ids, block=block, max_new_tokens=MAX_NEW)
        assert result.tokens == [expected]
        assert result.stats.target_forwards <= MAX_NEW


def test_repetitive_prompt_lets_prompt_lookup_skip_forwards():
    """A repetitive prompt: some lookup drafts are accepted (this seeded model accepts 3), and
    each accepted draft saves exactly one target forward."""
    model = tiny_llama(5)
    ids = torch.tensor([[7, 8, 9, 10, 11, 12] * 6])
    expected = hf_greedy(model, ids, MAX_NEW)
    result = specnb.prompt_lookup(model, ids, num_pred=8, max_new_tokens=MAX_NEW)
    assert result.tokens == [expected]
    assert result.stats.accepted > 0
    assert result.stats.target_forwards == MAX_NEW - result.stats.accepted


@pytest.fixture(scope="module")
def mid_output_eos(target, prompts):
    """An EOS id that greedy decoding of prompts[0] emits at position 9 and not before."""
    free_run = hf_greedy(target, prompts[0], MAX_NEW)
    position = next(i for i in range(9, MAX_NEW) if free_run[i] not in free_run[:i])
    return free_run[position], free_run[:position + 1]


def run_method(method, model, input_ids, **kwargs):
    """Each method with a perfect draft (the model itself) or a block of 8 guesses."""
    if method == "speculative":
        return specnb.speculative(model, model, input_ids, gamma=8, **kwargs)
    extra = {"autoregressive": {}, "prompt_lookup": {"num_pred": 8}, "jacobi": {"block": 8}}
    return getattr(specnb, method)(model, input_ids, **extra[method], **kwargs)


@pytest.mark.parametrize("method", ["autoregressive", "speculative", "prompt_lookup", "jacobi"])
def test_eos_mid_draft_stops_and_is_kept(target, prompts, mid_output_eos, method):
    eos, expected = mid_output_eos
    assert hf_greedy(target, prompts[0], MAX_NEW, eos_token_id=eos) == expected
    result = run_method(method, target, prompts[0], max_new_tokens=MAX_NEW, eos_token_id=eos)
    assert result.tokens == [expected]
    assert result.tokens[0][-1] == eos


@pytest.mark.parametrize("max_new", [1, 2, 7, 11])
def test_max_new_tokens_cuts_a_draft(target, prompts, max_new):
    """γ = 4 with a perfect draft emits 5 per iteration; the last iteration must be cut."""
    expected = hf_greedy(target, prompts[1], max_new)
    result = specnb.speculative(target, target, prompts[1], gamma=4, max_new_tokens=max_new)
    assert result.tokens == [expected]
    assert len(result.tokens[0]) == max_new
    assert result.stats.accepted == result.stats.drafted  # cut by planning, not by rejection
