"""The transposed and swapped CPU paths (`specnb.models.fast_path`, `use_path(model, path)`).

Transposed: every linear keeps its weight Parameter, stored column by column. Swapped: every
linear becomes a `SwappedLinear` over its own weight Parameter, stored row by row as loaded,
that computes x W^T as (W x^T)^T for a few rows (`SWAP_ROWS`, more for a tall weight). On
either, the model gives the dense model's results: logits within float rounding, greedy tokens
equal for our loops and for transformers' generate (plain and assisted), a head on it drafts the
same and saves, and the way back is bitwise dense. test_fast_path.py covers the choice among
the paths and the prepacked one."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import specnb
from specnb.models import fast_path
from specnb.models.fast_path import SWAP_ROWS, TALL, TALL_SWAP_ROWS, SwappedLinear, use_path
from head_fixtures import random_head
from tiny_models import tiny_llama

MAX_NEW = 24
FAST = ["transposed", "swapped"]


def linears(model):
    return [m for m in model.modules() if isinstance(m, nn.Linear)]


@pytest.fixture(scope="module", params=FAST)
def fast_target(request, target):
    return use_path(copy.deepcopy(target), request.param)


def hf_greedy(model, ids, **kwargs):
    return model.generate(ids, max_new_tokens=MAX_NEW, do_sample=False, pad_token_id=0,
                          **kwargs)[0, ids.shape[1]:].tolist()


# --- both paths ---------------------------------------------------------------------------

def test_logits_match_dense(target, fast_target, prompts):
    for ids in prompts:
        with torch.no_grad():
            dense, fast = target(ids).logits, fast_target(ids).logits
        torch.testing.assert_close(fast, dense, rtol=1e-4, atol=1e-4)


def test_greedy_outputs_equal_dense(target, fast_target, drafts, prompts):
    """Our loops' forwards here are 1 to 5 tokens, and the prompts': on the swapped path both
    the swapped product and the plain one."""
    draft = use_path(copy.deepcopy(drafts["perturbed"]), fast_target.specnb_cpu_path)
    batch = [[1, 5, 9, 3, 7, 2], [7, 2], [4, 4, 8]]
    assert specnb.autoregressive(fast_target, batch, max_new_tokens=MAX_NEW).tokens == \
        specnb.autoregressive(target, batch, max_new_tokens=MAX_NEW).tokens  # padded rows
    for ids in prompts:
        expected = hf_greedy(target, ids)
        assert hf_greedy(fast_target, ids) == expected
        assert hf_greedy(fast_target, ids, assistant_model=draft) == expected
        for name, result in {
            "autoregressive": specnb.autoregressive(fast_target, ids, max_new_tokens=MAX_NEW),
            "speculative": specnb.speculative(fast_target, draft, ids, gamma=3,
                                              max_new_tokens=MAX_NEW),
            "jacobi": specnb.jacobi(fast_target, ids, block=4, max_new_tokens=MAX_NEW),
        }.items():
            assert result.tokens == [expected], name


@pytest.mark.parametrize("path", FAST)
def test_tied_embeddings_stay_tied(path):
    model = tiny_llama(5)
    model.config.tie_word_embeddings = True
    model.lm_head.weight = model.model.embed_tokens.weight
    dense = copy.deepcopy(model)
    use_path(model, path)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    # transposed: the embedding reads its rows from the new layout; swapped: as loaded
    assert model.model.embed_tokens.weight.is_contiguous() == (path == "swapped")
    assert set(model.state_dict()) == set(dense.state_dict())
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, dense(ids).logits, rtol=1e-4, atol=1e-4)


def test_a_head_follows_and_saves(target, fast_target, prompts, tmp_path):
    """`follow_path` puts a head on its target's path; it drafts what the dense head drafts,
    and `save_pretrained` writes it (safetensors wants contiguous tensors) so that it loads
    back equal."""
    path = fast_target.specnb_cpu_path
    random_head(target, layers=(0, 1)).save_pretrained(tmp_path / "start")
    dense = specnb.FeatureDrafter.from_pretrained(tmp_path / "start", target)
    fast = specnb.FeatureDrafter.from_pretrained(tmp_path / "start", fast_target)
    assert fast_path.follow_path(fast.head, fast_target).specnb_cpu_path == path
    if path == "transposed":
        assert all(not m.weight.is_contiguous() for m in linears(fast.head) if m.out_features > 1)
    else:
        assert all(type(m) is SwappedLinear for m in linears(fast.head))
    for ids in prompts:
        expected, result = (specnb.speculative(model, head, ids, gamma=3, max_new_tokens=MAX_NEW,
                                               trace=True)
                            for model, head in ((target, dense), (fast_target, fast)))
        assert result.tokens == expected.tokens
        assert [len(it.drafted) for it in result.trace] == \
            [len(it.drafted) for it in expected.trace]
    fast.save_pretrained(tmp_path / "again")
    back = specnb.FeatureDrafter.from_pretrained(tmp_path / "again", target)
    for (name, a), (_, b) in zip(dense.head.state_dict().items(), back.head.state_dict().items()):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("path", FAST)
def test_forcing_a_path_off_float32_raises(path, tmp_path):
    model = tiny_llama(1).to(torch.bfloat16)
    with pytest.raises(ValueError, match=f"cpu_path='{path}'.*float32"):
        fast_path.apply_cpu_path(model, path, cache_file=tmp_path / "c.json")
    with pytest.raises(ValueError, match="path must be one of"):
        use_path(model, "sideways")


@pytest.mark.parametrize("path", FAST)
def test_the_same_parameters_and_back_bitwise(path, target, prompts):
    model = copy.deepcopy(target)
    before = {name: (p, p.detach().clone()) for name, p in model.named_parameters()}
    use_path(model, path)
    assert model.specnb_cpu_path == path
    for name, p in model.named_parameters():
        assert p is before[name][0] and torch.equal(p, before[name][1])  # same object, values
    for m in linears(model):
        if path == "transposed":
            assert m.weight.stride() == (1, m.out_features) and type(m) is nn.Linear
        else:
            assert type(m) is SwappedLinear and m.weight.is_contiguous()
    for other in ("prepacked", "transposed", "swapped", "transposed", "dense"):  # any order
        use_path(model, other)
    assert all(type(m) is nn.Linear and m.weight.is_contiguous() for m in linears(model))
    with torch.no_grad():
        assert torch.equal(model(prompts[1]).logits, target(prompts[1]).logits)


# --- the swapped product ------------------------------------------------------------------

def spied_mm(monkeypatch) -> list:
    """The shapes of the operands of every torch.mm call from here on."""
    calls, mm = [], torch.mm
    monkeypatch.setattr(torch, "mm", lambda a, b: calls.append((a.shape, b.shape)) or mm(a, b))
    return calls


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("out_features, swap_rows", [(40, SWAP_ROWS),
                                                     (24 * TALL, TALL_SWAP_ROWS)])
def test_every_row_count_gives_the_plain_product_and_the_swap_stops_at_its_rows(
        bias, out_features, swap_rows, monkeypatch):
    generator = torch.Generator().manual_seed(0)
    plain = nn.Linear(24, out_features, bias=bias)
    with torch.no_grad():
        for p in plain.parameters():
            p.copy_(torch.randn(p.shape, generator=generator))
    swapped = SwappedLinear(plain)
    assert swapped.weight is plain.weight and swapped.bias is plain.bias
    assert swapped.swap_rows == swap_rows
    calls = spied_mm(monkeypatch)
    for rows in range(1, swap_rows + 3):
        for shape in ((rows, 24), (1, rows, 24)):  # a batch of rows, or one sequence of them
            x = torch.randn(shape, generator=generator)
            with torch.no_grad():
                got = swapped(x)
            assert got.shape == (*shape[:-1], out_features) and got.is_contiguous()
            torch.testing.assert_close(got, F.linear(x, plain.weight, plain.bias),
                                       rtol=1e-5, atol=1e-4)
    # The weight first, times two columns for one row, up to its rows; F.linear (not torch.mm)
    # past them.
    swaps = [x for w, x in calls if w == (out_features, 24)]
    assert swaps == [torch.Size([24, max(rows, 2)])
                     for rows in range(1, swap_rows + 1) for _ in range(2)]


def test_swapped_gradients_and_autocast_are_nn_linears():
    generator = torch.Generator().manual_seed(1)
    plain = nn.Linear(8, 6)
    swapped = SwappedLinear(copy.deepcopy(plain))
    x = torch.randn(3, 8, generator=generator)
    plain(x).square().sum().backward()
    swapped(x).square().sum().backward()
    for a, b in zip(plain.parameters(), swapped.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(swapped(x), plain(x)) and swapped(x).dtype == torch.bfloat16


def test_from_transposed_the_swapped_path_puts_the_weights_back_row_by_row(target):
    model = use_path(copy.deepcopy(target), "transposed")
    use_path(model, "swapped")  # the swapped product wants the weight row by row
    assert all(m.weight.is_contiguous() for m in linears(model))
