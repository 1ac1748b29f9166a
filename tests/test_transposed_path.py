"""The transposed CPU path (`specnb.models.fast_path`, `use_path(model, "transposed")`): every
linear keeps its weight Parameter, stored column by column, and the model gives the dense
model's results: logits within float rounding, greedy tokens equal for our loops and for
transformers' generate (plain and assisted), a head on it drafts the same, and the way back is
bitwise dense. test_fast_path.py covers the choice among the paths and the prepacked one."""

import copy

import pytest
import torch
from torch import nn

import specnb
from specnb.models import fast_path
from specnb.models.fast_path import use_path
from head_fixtures import random_head
from tiny_models import tiny_llama

MAX_NEW = 24


def linears(model):
    return [m for m in model.modules() if isinstance(m, nn.Linear)]


@pytest.fixture(scope="module")
def transposed_target(target):
    return use_path(copy.deepcopy(target), "transposed")


def hf_greedy(model, ids, **kwargs):
    return model.generate(ids, max_new_tokens=MAX_NEW, do_sample=False, pad_token_id=0,
                          **kwargs)[0, ids.shape[1]:].tolist()


def test_the_same_parameters_stored_transposed_and_back_bitwise(target, prompts):
    model = copy.deepcopy(target)
    before = {name: (p, p.detach().clone()) for name, p in model.named_parameters()}
    use_path(model, "transposed")
    assert model.specnb_cpu_path == "transposed"
    for name, p in model.named_parameters():
        assert p is before[name][0] and torch.equal(p, before[name][1])  # same object, values
    for m in linears(model):
        assert m.weight.stride() == (1, m.out_features) and type(m) is nn.Linear
    for path in ("prepacked", "transposed", "dense"):  # any order of paths, then dense
        use_path(model, path)
    assert all(m.weight.is_contiguous() for m in linears(model))
    with torch.no_grad():
        assert torch.equal(model(prompts[1]).logits, target(prompts[1]).logits)


def test_logits_match_dense(target, transposed_target, prompts):
    for ids in prompts:
        with torch.no_grad():
            dense, fast = target(ids).logits, transposed_target(ids).logits
        torch.testing.assert_close(fast, dense, rtol=1e-4, atol=1e-4)


def test_greedy_outputs_equal_dense(target, transposed_target, drafts, prompts):
    draft = use_path(copy.deepcopy(drafts["perturbed"]), "transposed")
    batch = [[1, 5, 9, 3, 7, 2], [7, 2], [4, 4, 8]]
    assert specnb.autoregressive(transposed_target, batch, max_new_tokens=MAX_NEW).tokens == \
        specnb.autoregressive(target, batch, max_new_tokens=MAX_NEW).tokens  # padded rows
    for ids in prompts:
        expected = hf_greedy(target, ids)
        assert hf_greedy(transposed_target, ids) == expected
        assert hf_greedy(transposed_target, ids, assistant_model=draft) == expected
        for name, result in {
            "autoregressive": specnb.autoregressive(transposed_target, ids,
                                                    max_new_tokens=MAX_NEW),
            "speculative": specnb.speculative(transposed_target, draft, ids, gamma=3,
                                              max_new_tokens=MAX_NEW),
            "jacobi": specnb.jacobi(transposed_target, ids, block=4, max_new_tokens=MAX_NEW),
        }.items():
            assert result.tokens == [expected], name


def test_tied_embeddings_stay_tied_and_read_the_new_layout():
    model = tiny_llama(5)
    model.config.tie_word_embeddings = True
    model.lm_head.weight = model.model.embed_tokens.weight
    dense = copy.deepcopy(model)
    use_path(model, "transposed")
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert not model.model.embed_tokens.weight.is_contiguous()
    assert set(model.state_dict()) == set(dense.state_dict())
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, dense(ids).logits, rtol=1e-4, atol=1e-4)


def test_a_head_follows_and_saves(target, transposed_target, prompts, tmp_path):
    """`follow_path` puts a head on its target's transposed path; it drafts what the dense head
    drafts, and `save_pretrained` writes it (safetensors wants contiguous tensors) so that it
    loads back equal."""
    random_head(target, layers=(0, 1)).save_pretrained(tmp_path / "start")
    dense = specnb.FeatureDrafter.from_pretrained(tmp_path / "start", target)
    fast = specnb.FeatureDrafter.from_pretrained(tmp_path / "start", transposed_target)
    assert fast_path.follow_path(fast.head, transposed_target).specnb_cpu_path == "transposed"
    assert all(not m.weight.is_contiguous() for m in linears(fast.head) if m.out_features > 1)
    for ids in prompts:
        expected, result = (specnb.speculative(model, head, ids, gamma=3, max_new_tokens=MAX_NEW,
                                               trace=True)
                            for model, head in ((target, dense), (transposed_target, fast)))
        assert result.tokens == expected.tokens
        assert [len(it.drafted) for it in result.trace] == [len(it.drafted) for it in expected.trace]
    fast.save_pretrained(tmp_path / "again")
    back = specnb.FeatureDrafter.from_pretrained(tmp_path / "again", target)
    for (name, a), (_, b) in zip(dense.head.state_dict().items(), back.head.state_dict().items()):
        assert torch.equal(a, b), name


def test_forcing_transposed_off_float32_raises(tmp_path):
    model = tiny_llama(1).to(torch.bfloat16)
    with pytest.raises(ValueError, match="cpu_path='transposed'.*float32"):
        fast_path.apply_cpu_path(model, "transposed", cache_file=tmp_path / "c.json")
    with pytest.raises(ValueError, match="path must be one of"):
        use_path(model, "sideways")
