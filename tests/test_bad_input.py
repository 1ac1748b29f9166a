"""Bad input fails early with a ValueError that says what is wrong."""

import pytest
import torch

import specnb
from tiny_models import tiny_llama
from specnb.core import verify


def test_negative_gamma(target, prompts):
    with pytest.raises(ValueError, match="gamma"):
        specnb.speculative(target, target, prompts[0], gamma=-1, max_new_tokens=4)


@pytest.mark.parametrize("temperature", [-0.5, float("nan"), float("inf")])
def test_bad_temperature(target, prompts, temperature):
    with pytest.raises(ValueError, match="temperature"):
        specnb.speculative(target, target, prompts[0], gamma=2, max_new_tokens=4,
                           temperature=temperature)
    with pytest.raises(ValueError, match="temperature"):
        specnb.autoregressive(target, prompts[0], max_new_tokens=4, temperature=temperature)


def test_nan_probabilities_rejected_by_strict_verify():
    probs = torch.full((1, 2, 4), 0.25)
    bad = probs.clone()
    bad[0, 1, 2] = float("nan")
    ids, bonus = torch.zeros(1, 2, dtype=torch.long), torch.zeros(1, 1, dtype=torch.long)
    with pytest.raises(ValueError, match="target_probs"):
        verify(bad, probs, ids, bonus, check=True)
    with pytest.raises(ValueError, match="draft_probs"):
        verify(probs, bad, ids, bonus, check=True)


def test_draft_vocabulary_must_match(target, prompts):
    other = tiny_llama(2, vocab=64)
    with pytest.raises(ValueError, match="vocabulary"):
        specnb.speculative(target, other, prompts[0], gamma=2, max_new_tokens=4)


@pytest.mark.parametrize("method", ["autoregressive", "speculative", "prompt_lookup", "jacobi"])
def test_empty_prompt(target, method):
    empty = torch.zeros(1, 0, dtype=torch.long)
    with pytest.raises(ValueError, match="empty"):
        call(method, target, empty, max_new_tokens=4)


@pytest.mark.parametrize("method", ["autoregressive", "speculative", "prompt_lookup", "jacobi"])
def test_prompt_longer_than_context(target, method):
    too_long = torch.ones(1, target.config.max_position_embeddings + 1, dtype=torch.long)
    with pytest.raises(ValueError, match="context"):
        call(method, target, too_long, max_new_tokens=4)
    fits_alone = torch.ones(1, target.config.max_position_embeddings - 2, dtype=torch.long)
    with pytest.raises(ValueError, match="max_new_tokens"):
        call(method, target, fits_alone, max_new_tokens=4)


@pytest.mark.parametrize("bad_ids,message", [
    (torch.ones(1, 3), "LongTensor"),
    (torch.ones(1, 1, 3, dtype=torch.long), "LongTensor"),
    (torch.full((1, 3), 10_000, dtype=torch.long), "vocabulary"),
])
def test_malformed_input_ids(target, bad_ids, message):
    with pytest.raises(ValueError, match=message):
        specnb.autoregressive(target, bad_ids, max_new_tokens=4)


@pytest.mark.parametrize("batch", [torch.ones(2, 3, dtype=torch.long), [[1, 2, 3], [4, 5]]])
def test_jacobi_refuses_batches(target, batch):
    """Batches go to autoregressive, speculative and prompt_lookup; Jacobi runs one prompt."""
    with pytest.raises(ValueError, match="one prompt at a time"):
        specnb.jacobi(target, batch, block=4, max_new_tokens=4)


@pytest.mark.parametrize("method", ["autoregressive", "speculative", "prompt_lookup", "jacobi"])
def test_prompts_in_the_shapes_people_have(target, method):
    """[1, L], [L], a flat list of ids (what tokenizer.encode returns) and a batch of one."""
    ids = [5, 9, 3, 7]
    expected = call(method, target, torch.tensor([ids]), max_new_tokens=6).tokens
    for shape in (torch.tensor(ids), ids, [ids], [torch.tensor(ids)]):
        assert call(method, target, shape, max_new_tokens=6).tokens == expected


@pytest.mark.parametrize("max_new", [0, -3, 2.5])
def test_bad_max_new_tokens(target, prompts, max_new):
    with pytest.raises(ValueError, match="max_new_tokens"):
        specnb.autoregressive(target, prompts[0], max_new_tokens=max_new)


def test_bad_block_and_num_pred(target, prompts):
    with pytest.raises(ValueError, match="block"):
        specnb.jacobi(target, prompts[0], block=0, max_new_tokens=4)
    with pytest.raises(ValueError, match="num_pred"):
        specnb.prompt_lookup(target, prompts[0], num_pred=-1, max_new_tokens=4)
    with pytest.raises(ValueError, match="ngram_max"):
        specnb.prompt_lookup(target, prompts[0], num_pred=2, max_new_tokens=4, ngram_max=1,
                             ngram_min=2)


def call(method, model, input_ids, **kwargs):
    if method == "speculative":
        return specnb.speculative(model, model, input_ids, gamma=2, **kwargs)
    extra = {"autoregressive": {}, "prompt_lookup": {"num_pred": 2}, "jacobi": {"block": 2}}
    return getattr(specnb, method)(model, input_ids, **extra[method], **kwargs)
