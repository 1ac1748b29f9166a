"""The int8 draft head (`specnb.models.int8_draft`) and its place in the recommended shape.

The int8 copy shares the head's parameters and leaves the head untouched; its linears are
close to the float ones (per-row scales); drafting with it changes what is proposed, never what
is emitted (greedy equality through chains and trees, batched); `tree_shape` weighs it against
the float head with its own ranks and cost, and `speculative(..., gamma=None)` drafts with the
head it picked. Tiny models; the clock is replaced where the choice is tested.
"""

import pytest
import torch
from torch import nn

import specnb
from specnb.drafters import FeatureDrafter
from specnb.drafters.feature import Advice
from specnb.models import tree_shape
from specnb.models.int8_draft import Int8Linear, int8_copy, quantize_rows, why_not_int8
from head_fixtures import random_head

pytestmark = pytest.mark.skipif(why_not_int8(nn.Linear(2, 2)) is not None,
                                reason="this torch has no dynamic quantized linear")


@pytest.mark.parametrize("bias", [False, True])
def test_int8_linear_is_close_to_the_float_one_and_shares_its_weight(bias):
    generator = torch.Generator().manual_seed(0)
    dense = nn.Linear(64, 96, bias=bias)
    with torch.no_grad():
        dense.weight.normal_(0, 0.2, generator=generator)
    layer = Int8Linear(dense)
    assert layer.weight is dense.weight and layer.bias is dense.bias
    for shape in [(1, 64), (5, 64), (2, 3, 64)]:
        x = torch.randn(*shape, generator=generator)
        with torch.no_grad():
            out, want = layer(x), dense(x)
        assert out.shape == want.shape and out.dtype == torch.float32
        # 7-bit activations and 8-bit weights: within a few percent of the output's scale
        assert (out - want).abs().max() <= 0.03 * want.abs().max()
        assert not torch.equal(out, want)  # the int8 kernel ran, not the float one
    with torch.no_grad():
        dense.weight.mul_(2.0)  # a changed weight is packed again
        assert (layer(x) - dense(x)).abs().max() <= 0.03 * dense(x).abs().max()


def test_int8_linear_runs_the_float_kernel_where_int8_does_not_apply():
    dense = nn.Linear(16, 8)
    layer = Int8Linear(dense)
    x = torch.randn(3, 16, requires_grad=True)
    assert torch.equal(layer(x), dense(x))  # gradients wanted: float, exact
    layer(x).sum().backward()
    assert dense.weight.grad is not None
    with torch.no_grad():
        assert torch.equal(layer(x[:0]), dense(x[:0]))  # nothing to quantize


def test_quantize_rows_has_one_scale_per_row_and_survives_a_zero_row():
    weight = torch.tensor([[0.0, 0.0], [1.0, -0.5], [0.02, 0.01]])
    q = quantize_rows(weight)
    assert q.q_per_channel_scales().tolist() == pytest.approx([1.0, 1 / 127, 0.02 / 127])
    assert torch.allclose(q.dequantize(), weight, atol=0.5 / 127)


def test_int8_copy_shares_the_parameters_and_leaves_the_head_alone(target):
    head = random_head(target)
    twin = int8_copy(head.head)
    assert twin is not head.head and twin.specnb_cpu_path == "int8"
    assert all(type(m) is not Int8Linear for m in head.head.modules())
    linears = [m for m in twin.modules() if isinstance(m, nn.Linear)]
    assert linears and all(type(m) is Int8Linear for m in linears)
    original = dict(head.head.named_parameters())
    assert {n: p for n, p in twin.named_parameters()}.keys() == original.keys()
    assert all(p is original[n] for n, p in twin.named_parameters())
    assert twin.embed[0] is target.get_input_embeddings()  # shared, not copied
    assert twin.draft_to_target is head.head.draft_to_target


def test_why_not_int8_and_a_clear_error():
    assert why_not_int8(nn.Linear(4, 4)) is None
    half = nn.Linear(4, 4).to(torch.bfloat16)
    assert "bfloat16" in why_not_int8(half)
    with pytest.raises(ValueError, match="int8 drafting cannot apply"):
        int8_copy(half)


@pytest.mark.parametrize("shape", [None, (3, 2)])
def test_drafting_with_the_int8_head_emits_what_the_target_would(target, prompts, shape):
    """Greedy: the same tokens as autoregressive decoding, one prompt and a ragged batch, and the
    int8 head proposes (some drafts accepted), differently from the float head somewhere."""
    head = random_head(target, std=0.05)
    twin = FeatureDrafter(int8_copy(head.head), tree=shape)
    gamma = 2 if shape is None else len(shape)
    plain = specnb.autoregressive(target, list(prompts), max_new_tokens=16)
    ours = specnb.speculative(target, twin, list(prompts), gamma=gamma, max_new_tokens=16)
    assert ours.tokens == plain.tokens
    assert ours.stats.accepted > 0
    sampled = specnb.speculative(target, FeatureDrafter(twin.head), prompts[0], gamma=2,
                                 max_new_tokens=12, temperature=0.8,
                                 generator=torch.Generator().manual_seed(0))
    assert len(sampled.tokens[0]) == 12


RANKS = {"shape_measured": [2, 1], "acceptance": [[0.3, 0.6], [0.5]],
         "int8": {"shape_measured": [2, 1], "acceptance": [[0.28, 0.58], [0.5]]}}
FLAT = [1.0, 1.0, 1.0, 1.0]


def fake_clock(monkeypatch, c, c_int8, rounds=2):
    """Every round: a flat checking cost; the float head costs c, the int8 one c_int8."""
    monkeypatch.setattr(tree_shape, "measure_forward_latency",
                        lambda model, prefix_len, token_counts, repeats: {
                            "token_counts": list(token_counts),
                            "median_ms": FLAT[:len(list(token_counts))]})
    costs = iter([c, c_int8] * rounds)
    monkeypatch.setattr(tree_shape, "_head_cost", lambda *args: next(costs))


@pytest.mark.parametrize("c_int8, int8", [(0.01, True), (0.2, False)])
def test_the_int8_head_competes_for_the_shape_with_its_own_ranks_and_cost(
        target, monkeypatch, tmp_path, c_int8, int8):
    head = random_head(target)
    twin = FeatureDrafter(int8_copy(head.head))
    fake_clock(monkeypatch, 0.1, c_int8)
    cache = tmp_path / "tree-shape.json"
    record = tree_shape.recommend_shape(target, head, ranks=RANKS, cache_file=cache,
                                        int8_head=twin)
    assert record["int8"] is int8 and record["shape"] == (2, 1)
    assert record["choice"] == ("int8 (2, 1)" if int8 else "(2, 1)")
    assert record["predicted"]["int8 (2, 1)"] == pytest.approx(
        (1 + 0.58 + 0.28 * 0.5) / (2 * c_int8 + 1.0), abs=1e-4)
    assert record["predicted"]["(2, 1)"] == pytest.approx((1 + 0.6 + 0.3 * 0.5) / 1.2, abs=1e-4)
    assert record["c_int8"] == c_int8
    assert tree_shape.int8_for(record, 0.0) is int8
    # cached under a key that says the int8 head was weighed; the float-only key measures anew
    again = tree_shape.recommend_shape(target, head, ranks=RANKS, cache_file=cache,
                                       int8_head=twin)
    assert again["cached"] and again["int8"] is int8
    monkeypatch.setattr(tree_shape, "_head_cost", lambda *args: 0.1)
    alone = tree_shape.recommend_shape(target, head, ranks=RANKS, cache_file=cache)
    assert not alone["cached"] and not alone["int8"]
    assert not any(label.startswith("int8") for label in alone["predicted"])


def test_without_int8_ranks_the_int8_head_is_not_weighed(target, monkeypatch, tmp_path):
    head = random_head(target)
    fake_clock(monkeypatch, 0.1, 0.0)
    monkeypatch.setattr(tree_shape, "_head_cost", lambda *args: 0.1)
    ranks = {k: v for k, v in RANKS.items() if k != "int8"}
    record = tree_shape.recommend_shape(target, head, ranks=ranks,
                                        cache_file=tmp_path / "shape.json",
                                        int8_head=FeatureDrafter(int8_copy(head.head)))
    assert not record["int8"] and "c_int8" not in record


def test_sampling_takes_the_best_chain_of_either_head():
    record = {"choice": "int8 (2, 1)", "shape": (2, 1), "dynamic": None, "int8": True,
              "predicted": {"(1,)": 1.30, "(1, 1)": 1.33, "int8 (1,)": 1.31,
                            "int8 (1, 1)": 1.36, "(2, 1)": 1.35, "int8 (2, 1)": 1.40}}
    assert tree_shape.shape_for(record, 0.0) == (2, 1) and tree_shape.int8_for(record, 0.0)
    assert tree_shape.shape_for(record, 0.7) == (1, 1) and tree_shape.int8_for(record, 0.7)
    record["predicted"]["(1, 1)"] = 1.5
    assert tree_shape.shape_for(record, 0.7) == (1, 1) and not tree_shape.int8_for(record, 0.7)


@pytest.mark.parametrize("shape", [(2, 1), (1, 1)])
def test_an_advice_naming_the_int8_head_drafts_with_it(target, prompts, shape):
    head = random_head(target, std=0.05)
    twin = int8_copy(head.head)
    head.advisor = lambda temperature: Advice(shape, twin)
    drafter, gamma = head.recommended(0.0)
    assert drafter.head is twin and gamma == 2
    assert drafter.shape_text(gamma) == ("tree (2, 1)" if shape == (2, 1) else "γ=2") + \
        ", int8 head"
    assert (drafter.tree is None) == (shape == (1, 1))
    head.advisor = lambda temperature: Advice(shape)  # no head named: the drafter's own
    assert head.recommended(0.0)[0].head is head.head
    plain = specnb.autoregressive(target, prompts[0], max_new_tokens=12)
    head.advisor = lambda temperature: Advice(shape, twin)
    assert specnb.speculative(target, head, prompts[0], max_new_tokens=12).tokens == plain.tokens
