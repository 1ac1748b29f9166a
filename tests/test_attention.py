"""Grouped-query attention without cache copies (`specnb.models.attention`): the same logits.

The tiny models have 4 query heads and 2 key/value heads, so every masked multi-token chunk
(ragged rows, a tree, drafts after a prefix) takes the new path; its logits must equal
transformers' own SDPA attention (which copies the heads) and an eager reference, and greedy
generation must not change, for our loop and for `generate`.
"""

import copy
from types import SimpleNamespace

import pytest
import torch

from specnb.core.batch_kv import BatchedCachedLM
from specnb.methods import autoregressive, speculative
from specnb.models import attention
from specnb.models.attention import NAME, gqa_sdpa_attention, use_gqa_attention
from tiny_models import VOCAB, perturbed, tiny_llama


def with_attention(model, name):
    model = copy.deepcopy(model)
    if name == NAME:
        return use_gqa_attention(model)
    model.set_attn_implementation(name)
    return model


def chunk_logits(model):
    """Ragged prompts, then a chain of 4 and a tree of 5 on every row."""
    generator = torch.Generator().manual_seed(3)
    prompts = [torch.randint(1, VOCAB, (n,), generator=generator).tolist() for n in (6, 13, 9)]
    lm = BatchedCachedLM(model, 0)
    with torch.inference_mode():
        lm.fill(prompts)
        chain = lm.forward(torch.randint(1, VOCAB, (3, 4), generator=generator))
        tree = torch.tensor([[-1, 0, 0, 1, 2]] * 3)
        branches = lm.forward(torch.randint(1, VOCAB, (3, 5), generator=generator), tree=tree)
    return chain, branches


@pytest.fixture(scope="module")
def model():
    return tiny_llama(7)


def test_switches_sdpa_models_and_leaves_others(model):
    assert model.config._attn_implementation == "sdpa"
    assert use_gqa_attention(copy.deepcopy(model)).specnb_attention == NAME
    eager = with_attention(model, "eager")
    assert use_gqa_attention(eager).specnb_attention == "eager"


@pytest.mark.parametrize("reference", ["sdpa", "eager"])
def test_masked_chunks_give_the_same_logits(model, reference):
    ours, theirs = chunk_logits(with_attention(model, NAME)), chunk_logits(
        with_attention(model, reference))
    for a, b in zip(ours, theirs):
        if reference == "sdpa":  # the same kernel, reading the shared heads in place
            torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
        else:
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_the_new_path_is_taken(model, monkeypatch):
    """Masked chunks of several tokens go through torch's kernel with enable_gqa (no copy);
    one-token steps stay on transformers' function."""
    calls = []
    real = torch.nn.functional.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append((args[0].shape[2], kwargs.get("enable_gqa", False), args[1].shape[1]))
        return real(*args, **kwargs)
    monkeypatch.setattr(attention, "F", SimpleNamespace(scaled_dot_product_attention=spy))
    ours = with_attention(model, NAME)
    chunk_logits(ours)
    layers = model.config.num_hidden_layers
    heads = model.config.num_key_value_heads
    # the ragged fill (13 columns, padded), the chain, the tree
    assert calls == [(13, True, heads)] * layers + [(4, True, heads)] * layers + \
        [(5, True, heads)] * layers
    calls.clear()
    lm = BatchedCachedLM(ours, 0)
    with torch.inference_mode():
        lm.fill([[3, 4, 5]])
        lm.forward(torch.tensor([[6]]))  # one token: transformers' own function
    assert all(query_length > 1 for query_length, _, _ in calls)


def test_a_broken_variant_is_caught(model, monkeypatch):
    """Sharing the wrong heads (keys of head 0 for all) changes the logits: the equality
    test above can fail."""
    real = torch.nn.functional.scaled_dot_product_attention

    def wrong_heads(query, key, value, **kwargs):
        return real(query, key[:, :1].expand_as(key).contiguous(), value, **kwargs)
    # (ours only: torch.nn.functional itself stays whole for transformers' function)
    monkeypatch.setattr(attention, "F", SimpleNamespace(scaled_dot_product_attention=wrong_heads))
    ours = chunk_logits(with_attention(model, NAME))
    theirs = chunk_logits(with_attention(model, "sdpa"))
    assert not torch.allclose(ours[0], theirs[0], atol=1e-3)


def test_one_token_and_unmasked_calls_are_transformers_own(model):
    """A one-token step (masked or not) and an unmasked chunk: the very same output."""
    layer = model.model.layers[0].self_attn
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(1, 4, 1, 8, generator=generator)
    key, value = torch.randn(1, 2, 5, 8, generator=generator), torch.randn(1, 2, 5, 8,
                                                                            generator=generator)
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    mask = torch.tensor([True, True, False, True, True]).view(1, 1, 1, 5)
    for q, mask in ((query, None), (query, mask), (query.expand(1, 4, 3, 8).contiguous(), None)):
        ours, _ = gqa_sdpa_attention(layer, q, key, value, mask, scaling=0.3)
        theirs, _ = sdpa_attention_forward(layer, q, key, value, mask, scaling=0.3)
        assert torch.equal(ours, theirs)


def test_greedy_generation_unchanged(model):
    prompt = torch.randint(1, VOCAB, (1, 7), generator=torch.Generator().manual_seed(5))
    draft = perturbed(model, 11, 0.05)
    ours, theirs = with_attention(model, NAME), with_attention(model, "sdpa")
    assert torch.equal(ours.generate(prompt, max_new_tokens=16, do_sample=False),
                       theirs.generate(prompt, max_new_tokens=16, do_sample=False))
    assert torch.equal(ours.generate(prompt, max_new_tokens=16, do_sample=False,
                                     assistant_model=draft),
                       theirs.generate(prompt, max_new_tokens=16, do_sample=False))
    reference = autoregressive(theirs, prompt, max_new_tokens=16).tokens
    assert speculative(ours, draft, prompt, gamma=3, max_new_tokens=16).tokens == reference


@pytest.mark.embedded
def test_the_embedded_model_runs_it(embedded):
    model, _ = embedded
    assert model.specnb_attention == NAME
