"""The CPU fast path (`specnb.models.fast_path`): prepacked linears give the dense model's results.

Exactness is shown on tiny models: logits within float tolerance of dense, greedy tokens equal
for our loops, transformers' generate (plain and assisted), padded batches and the head's
training data; a prepacked model stays a normal model (tied weights, state_dict, .to, grads).
The calibration cache is tested with the calibration monkeypatched to be instant; one
embedded test (slow) compares dense and prepacked greedy text of the real target.
"""

import copy
import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import specnb
from specnb.models import fast_path
from specnb.models.fast_path import PrepackedLinear, apply_cpu_path, choose, use_path
from head_fixtures import random_head
from tiny_models import VOCAB, perturbed, tiny_llama

MAX_NEW = 24
pytestmark = pytest.mark.skipif(not torch.backends.mkldnn.is_available() or
                                fast_path.why_not("prepacked", tiny_llama(1)) is not None,
                                reason="prepacking needs oneDNN and float32 on the CPU")


def prepacked(model):
    """A prepacked copy of `model` (the fixtures are shared: never swap them in place)."""
    return use_path(copy.deepcopy(model), "prepacked")


def linears(model):
    return [m for m in model.modules() if isinstance(m, nn.Linear)]


@pytest.fixture(scope="module")
def fast_target(target):
    return prepacked(target)


def test_every_linear_is_prepacked_and_runs_onednn(target, fast_target, prompts):
    assert all(type(m) is PrepackedLinear for m in linears(fast_target))
    assert all(type(m) is nn.Linear for m in linears(target))  # the original is untouched
    with torch.no_grad():
        fast_target(prompts[0])
    assert all(m._packed is not None for m in linears(fast_target))  # oneDNN ran, not dense
    assert fast_target.specnb_cpu_path == "prepacked"


@pytest.mark.skipif(fast_path.POINTWISE is None, reason="this torch has no _linear_pointwise")
def test_the_plain_input_op_is_the_converting_op_bit_for_bit(monkeypatch):
    """`PrepackedLinear` runs oneDNN's linear on plain tensors (`POINTWISE`): the same result,
    bit for bit, as converting the input to oneDNN's layout and back, with and without a bias,
    for one row, a few and many, and a non-contiguous input."""
    generator = torch.Generator().manual_seed(0)
    for bias in (False, True):
        layer = PrepackedLinear(nn.Linear(48, 80, bias=bias))
        for x in (torch.randn(1, 1, 48, generator=generator),
                  torch.randn(3, 5, 48, generator=generator),
                  torch.randn(5, 2, 48, generator=generator).transpose(0, 1)):
            with torch.no_grad():
                plain = layer(x)
                with monkeypatch.context() as patch:
                    patch.setattr(fast_path, "POINTWISE", None)
                    converted = layer(x)
            assert torch.equal(plain, converted)
            torch.testing.assert_close(plain, F.linear(x, layer.weight, layer.bias),
                                       rtol=1e-5, atol=1e-5)


def test_logits_match_dense(target, fast_target, prompts):
    for ids in prompts:
        with torch.no_grad():
            dense, fast = target(ids).logits, fast_target(ids).logits
        torch.testing.assert_close(fast, dense, rtol=1e-4, atol=1e-4)


def test_back_to_dense_is_bitwise_dense(target, prompts):
    model = use_path(prepacked(target), "dense")
    assert all(type(m) is nn.Linear for m in linears(model))
    with torch.no_grad():
        assert torch.equal(model(prompts[1]).logits, target(prompts[1]).logits)


def hf_greedy(model, ids, **kwargs):
    return model.generate(ids, max_new_tokens=MAX_NEW, do_sample=False, pad_token_id=0,
                          **kwargs)[0, ids.shape[1]:].tolist()


def test_greedy_outputs_equal_dense(target, fast_target, drafts, prompts):
    fast_draft = prepacked(drafts["perturbed"])
    for ids in prompts:
        expected = hf_greedy(target, ids)
        assert hf_greedy(fast_target, ids) == expected
        assert hf_greedy(fast_target, ids, assistant_model=fast_draft) == expected
        runs = {
            "autoregressive": specnb.autoregressive(fast_target, ids, max_new_tokens=MAX_NEW),
            "speculative": specnb.speculative(fast_target, drafts["perturbed"], ids, gamma=3,
                                              max_new_tokens=MAX_NEW),
            "speculative, prepacked draft": specnb.speculative(fast_target, fast_draft, ids,
                                                               gamma=4, max_new_tokens=MAX_NEW),
            "prompt_lookup": specnb.prompt_lookup(fast_target, ids, num_pred=3,
                                                  max_new_tokens=MAX_NEW),
        }
        for name, result in runs.items():
            assert result.tokens == [expected], name


def test_feature_drafter_on_prepacked_target(target, fast_target, prompts):
    """The head reads the target's hidden states (`output_hidden_states`): the swap keeps them."""
    for ids in prompts:
        expected = specnb.speculative(target, random_head(target, layers=(0, 1)), ids, gamma=3,
                                      max_new_tokens=MAX_NEW)
        result = specnb.speculative(fast_target, random_head(fast_target, layers=(0, 1)), ids,
                                    gamma=3, max_new_tokens=MAX_NEW)
        assert result.tokens == expected.tokens == [hf_greedy(target, ids)]
        assert result.stats.accepted == expected.stats.accepted  # same drafts, same checks


def test_a_head_follows_its_targets_path(target, fast_target, prompts, tmp_path):
    """`follow_path` (as `load_pair` applies it to the embedded head) prepacks a head's linears
    for a prepacked target (the path measured faster for the target's linears on this CPU) and
    leaves them dense for a dense one; the drafts and the tokens stay those of the dense head."""
    random_head(target, layers=(0, 1)).save_pretrained(tmp_path)
    dense = specnb.FeatureDrafter.from_pretrained(tmp_path, target)
    fast = specnb.FeatureDrafter.from_pretrained(tmp_path, fast_target)
    assert fast_path.follow_path(dense.head, target).specnb_cpu_path == "dense"
    assert fast_path.follow_path(fast.head, fast_target).specnb_cpu_path == "prepacked"
    assert all(type(m) is nn.Linear for m in linears(dense.head))
    assert all(type(m) is PrepackedLinear for m in linears(fast.head))
    for ids in prompts:
        for temperature in (0.0, 0.8):
            expected, result = (
                specnb.speculative(model, head, ids, gamma=3, max_new_tokens=MAX_NEW,
                                   temperature=temperature,
                                   generator=torch.Generator().manual_seed(1), trace=True)
                for model, head in ((target, dense), (fast_target, fast)))
            assert result.tokens == expected.tokens
            assert [len(it.drafted) for it in result.trace] == \
                [len(it.drafted) for it in expected.trace]
    assert all(m._packed is not None for m in linears(fast.head))  # oneDNN ran, not dense


def test_padded_batch_equals_dense(target, fast_target):
    batch = [[1, 5, 9, 3, 7, 2], [7, 2], [4, 4, 8]]
    expected = specnb.autoregressive(target, batch, max_new_tokens=MAX_NEW).tokens
    assert specnb.autoregressive(fast_target, batch, max_new_tokens=MAX_NEW).tokens == expected
    assert specnb.speculative(fast_target, fast_target, batch, gamma=2,
                              max_new_tokens=MAX_NEW).tokens == expected


def test_head_training_data_equals_dense(target, fast_target):
    from specnb.training.head_data import generate_with_features

    def run(model):
        return generate_with_features(model, [[1, 5, 9, 3], [7, 2]], max_new_tokens=8,
                                      temperature=0.0, generator=torch.Generator().manual_seed(0),
                                      eos_id=VOCAB - 1, layers=(0, 1), top_k=4)
    for dense, fast in zip(run(target), run(fast_target)):
        assert torch.equal(dense["ids"] if torch.is_tensor(dense["ids"]) else
                           torch.tensor(dense["ids"]),
                           fast["ids"] if torch.is_tensor(fast["ids"]) else
                           torch.tensor(fast["ids"]))
        torch.testing.assert_close(fast["features"].float(), dense["features"].float(),
                                   rtol=1e-2, atol=1e-2)  # stored as fp16


def test_tied_embeddings_stay_tied_and_fresh():
    model = tiny_llama(5)
    model.config.tie_word_embeddings = True
    model.lm_head.weight = model.model.embed_tokens.weight
    dense_keys = set(model.state_dict())
    fast = use_path(model, "prepacked")
    assert fast.lm_head.weight is fast.model.embed_tokens.weight
    assert set(fast.state_dict()) == dense_keys  # no oneDNN copies in the state_dict
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        fast(ids)
        fast.model.embed_tokens.weight.mul_(0.5)  # in place: the oneDNN copy must follow
        after = fast(ids).logits
        expected = use_path(copy.deepcopy(fast), "dense")(ids).logits
    torch.testing.assert_close(after, expected, rtol=1e-4, atol=1e-4)


def test_still_a_normal_model(fast_target, prompts):
    model = copy.deepcopy(fast_target)
    assert model.dtype == torch.float32 and model.device.type == "cpu"
    logits = model(prompts[0]).logits  # grad enabled: the dense kernel, so gradients flow
    logits.sum().backward()
    assert model.lm_head.weight.grad is not None
    model.to(torch.bfloat16)  # no longer float32: runs dense, no error
    with torch.no_grad():
        assert model(prompts[0]).logits.dtype == torch.bfloat16


def test_forcing_prepacked_where_it_cannot_apply_raises(tmp_path):
    model = tiny_llama(1).to(torch.bfloat16)
    with pytest.raises(ValueError, match="cpu_path='prepacked'.*float32"):
        apply_cpu_path(model, "prepacked", cache_file=tmp_path / "c.json")
    assert apply_cpu_path(model, "auto", cache_file=tmp_path / "c.json").specnb_cpu_path == "dense"
    assert not (tmp_path / "c.json").exists()  # nothing to calibrate off float32
    with pytest.raises(ValueError, match="cpu_path must be one of"):
        apply_cpu_path(model, "fast", cache_file=tmp_path / "c.json")


def test_environment_variable_chooses_when_no_argument(monkeypatch, tmp_path):
    monkeypatch.setenv(fast_path.ENV_VAR, "prepacked")
    assert apply_cpu_path(tiny_llama(1), cache_file=tmp_path / "c.json").specnb_cpu_path \
        == "prepacked"
    assert apply_cpu_path(tiny_llama(1), "dense", cache_file=tmp_path / "c.json") \
        .specnb_cpu_path == "dense"  # the argument wins
    monkeypatch.setenv(fast_path.ENV_VAR, "fastest")
    with pytest.raises(ValueError, match="SPECNB_CPU_PATH"):
        apply_cpu_path(tiny_llama(1), cache_file=tmp_path / "c.json")


@pytest.mark.parametrize("dense,packed,picked", [
    ([58, 94, 91], [53, 59, 61], "prepacked"),  # the EPYC: cheaper everywhere
    ([40, 60, 62], [41, 30, 31], "dense"),      # 1 token slower: never
    ([40, 60, 62], [40, 56, 58], "dense"),      # 7% cheaper checks: within the margin
    ([40, 60, 62], [40, 53, 55], "prepacked"),  # 11%: beyond it
    ([40, 43, 45], [65, 70, 72], "dense"),      # this Xeon
])
def test_choose(dense, packed, picked):
    assert choose({"token_counts": [1, 2, 4], "dense_ms": dense, "prepacked_ms": packed}) == picked


@pytest.mark.parametrize("transposed,packed,picked", [
    ([51, 68, 81], [62, 77, 83], "transposed"),  # one token and two cheaper, four the same
    ([51, 68, 81], [50, 50, 52], "prepacked"),   # both qualify: the lower median wins
    ([59, 60, 62], [62, 77, 83], "dense"),       # 1 token slower: never
    ([55, 85, 77], [62, 77, 83], "dense"),       # 5% cheaper: within the margin
])
def test_choose_among_three(transposed, packed, picked):
    assert choose({"token_counts": [1, 2, 4], "dense_ms": [58, 89, 81],
                   "transposed_ms": transposed, "prepacked_ms": packed}) == picked


def test_rounds_that_disagree_give_dense_and_are_not_cached(monkeypatch, tmp_path):
    """A busy moment in one round (dense timed 15x slower) must not pick, nor cache, a path."""
    busy = {"token_counts": [1, 2, 4], "dense_ms": [1466, 1842, 1840], "prepacked_ms": [95, 135, 151],
            "rounds": [{"dense_ms": [1466, 1842, 1840], "prepacked_ms": [95, 135, 151]},
                       {"dense_ms": [41, 43, 45], "prepacked_ms": [66, 70, 72]},
                       {"dense_ms": [40, 42, 46], "prepacked_ms": [65, 71, 70]}]}
    assert fast_path.decide(busy) == ("dense", False)
    calm = {**busy, "dense_ms": [41, 43, 45], "prepacked_ms": [66, 70, 72],
            "rounds": busy["rounds"][1:]}
    assert fast_path.decide(calm) == ("dense", True)
    monkeypatch.setattr(fast_path, "calibrate", lambda model: busy)
    cache = tmp_path / "cpu-path.json"
    model = apply_cpu_path(tiny_llama(1), "auto", cache_file=cache)
    assert model.specnb_cpu_path == "dense" and not model.specnb_cpu_path_settled
    assert not cache.exists()


def test_on_a_quiet_machine_rounds_that_disagree_are_a_tie_and_are_cached(monkeypatch, tmp_path):
    """`python -m specnb --calibrate` runs alone: there a disagreement is a near tie, and the
    choice is cached so that the test workers do not calibrate at every load."""
    tie = {"token_counts": [1, 2, 4], "dense_ms": [57, 94, 79], "prepacked_ms": [61, 79, 87],
           "rounds": [{"dense_ms": [57, 94, 79], "prepacked_ms": [61, 79, 87]},
                      {"dense_ms": [58, 96, 80], "prepacked_ms": [52, 78, 70]}]}
    assert fast_path.decide(tie)[1] is False
    monkeypatch.setattr(fast_path, "calibrate", lambda model: tie)
    cache = tmp_path / "cpu-path.json"
    with fast_path.quiet_machine():
        model = apply_cpu_path(tiny_llama(1), "auto", cache_file=cache)
    assert model.specnb_cpu_path_settled and not fast_path.on_quiet_machine()
    assert json.loads(cache.read_text())[fast_path.calibration_key(model)]["path"] == \
        model.specnb_cpu_path


def test_calibration_is_cached_per_key(monkeypatch, tmp_path):
    calls = []

    def instant(model):
        calls.append(model.config.hidden_size)
        return {"token_counts": [1, 2, 4], "dense_ms": [58, 94, 91], "prepacked_ms": [53, 59, 61]}
    monkeypatch.setattr(fast_path, "calibrate", instant)
    cache = tmp_path / "cpu-path.json"
    assert apply_cpu_path(tiny_llama(1), "auto", cache_file=cache).specnb_cpu_path == "prepacked"
    assert apply_cpu_path(tiny_llama(2), "auto", cache_file=cache).specnb_cpu_path == "prepacked"
    assert calls == [32]  # same shape, same CPU: reused, weights do not matter
    stored = json.loads(cache.read_text())
    key = fast_path.calibration_key(tiny_llama(1))
    assert list(stored) == [key] and stored[key]["path"] == "prepacked"
    assert fast_path.cpu_identity()["name"] in key and torch.__version__ in key

    apply_cpu_path(tiny_llama(1, hidden=64), "auto", cache_file=cache)  # another model
    monkeypatch.setattr(fast_path, "cpu_identity",
                        lambda: {"name": "Other CPU", "isa": "avx2", "tag": "other-avx2"})
    apply_cpu_path(tiny_llama(1), "auto", cache_file=cache)  # another CPU
    assert calls == [32, 64, 32] and len(json.loads(cache.read_text())) == 3

    stored[key]["path"] = "dense"  # a cached answer is used as it is
    cache.write_text(json.dumps({**json.loads(cache.read_text()), key: stored[key]}))
    monkeypatch.undo()
    assert apply_cpu_path(tiny_llama(1), "auto", cache_file=cache).specnb_cpu_path == "dense"


def test_calibrate_measures_every_path():
    model = tiny_llama(1)
    measured = fast_path.calibrate(model, [1, 2], prefix_len=4, repeats=1, rounds=3)
    assert measured["token_counts"] == [1, 2]
    assert all(len(measured[f"{p}_ms"]) == 2 and min(measured[f"{p}_ms"]) > 0
               for p in fast_path.PATHS)
    assert all(set(one) == {f"{p}_ms" for p in fast_path.PATHS} for one in measured["rounds"])


def test_bench_record_and_plot(tmp_path):
    from specnb.bench.cpu_path import format_table, run
    from specnb.viz.latency import plot_checking_cost

    record = run(tiny_llama(1), [1, 2, 3], prefix_len=4, repeats=2, rounds=2)
    assert all(record["relative"][path][0] == 1.0 for path in fast_path.PATHS)
    assert record["cpu"]["name"] and record["auto_would_pick"] in fast_path.PATHS
    assert "auto would pick" in format_table(record)
    plot_checking_cost(record).savefig(tmp_path / "curve.png")
    with pytest.raises(ValueError, match="record must hold"):
        plot_checking_cost({"token_counts": [1]})
    assert record["attention"] == "sdpa" and record["attention_pass_ms"] is None


def test_the_calibration_key_names_the_attention_and_the_op(monkeypatch):
    """A cache measured on transformers' copying attention is not reused for ours, nor one
    measured with the converting prepacked op for the plain-input one."""
    from specnb.models.attention import use_gqa_attention

    plain, paths = tiny_llama(1), " | dense/transposed/prepacked/swapped"  # the paths compared
    monkeypatch.setattr(fast_path, "POINTWISE", None)
    assert fast_path.calibration_key(plain).endswith(" sdpa" + paths)
    assert fast_path.calibration_key(use_gqa_attention(tiny_llama(1))).endswith(
        " specnb_sdpa" + paths)
    monkeypatch.setattr(fast_path, "POINTWISE", object())
    assert fast_path.calibration_key(plain).endswith(" sdpa plain-input" + paths)


def test_bench_record_times_the_copying_attention_beside_ours():
    """A model on specnb's attention gets one more curve, transformers' copying sdpa, and is
    left on its own attention and the dense path afterwards."""
    from specnb.bench.cpu_path import COPYING, format_table, run
    from specnb.models.attention import NAME, use_gqa_attention

    model = use_gqa_attention(tiny_llama(1))
    record = run(model, [1, 2, 3], prefix_len=4, repeats=2, rounds=2)
    assert list(record["paths"]) == [*fast_path.PATHS, COPYING]
    assert record["attention"] == model.config._attn_implementation == NAME
    assert model.specnb_cpu_path == "dense"
    assert set(record["attention_pass_ms"]) == {NAME, "sdpa"}
    assert all(len(ms) == 3 and min(ms) > 0 for ms in record["paths"].values())
    assert len(record["samples_ms"][COPYING][0]) == 2  # one forward per round, two rounds
    assert COPYING in format_table(record) and "vs sdpa" in format_table(record)


@pytest.mark.embedded
@pytest.mark.slow
def test_embedded_prepacked_greedy_equals_dense():
    from specnb.models.loading import chat_ids, load_model

    model, tokenizer = load_model(device="cpu", cpu_path="dense")
    for prompt in specnb.load_prompts("eval")[:2]:
        ids = chat_ids(tokenizer, prompt["prompt"])
        expected = model.generate(ids, max_new_tokens=32, do_sample=False)[0, ids.shape[1]:]
        use_path(model, "prepacked")
        got = model.generate(ids, max_new_tokens=32, do_sample=False)[0, ids.shape[1]:]
        ours = specnb.autoregressive(model, ids, max_new_tokens=32).tokens[0]
        use_path(model, "dense")
        assert got.tolist() == expected.tolist() == ours


def test_a_write_through_data_is_seen_after_use_path_again():
    """`weight.data` writes bypass the version counter: `use_path(.., "prepacked")` repacks."""
    layer = nn.Sequential(nn.Linear(8, 4))
    use_path(layer, "prepacked")
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        layer(x)  # packs the weight
        layer[0].weight.data.mul_(2.0)
        use_path(layer, "prepacked")
        assert torch.allclose(layer(x), F.linear(x, layer[0].weight, layer[0].bias), atol=1e-5)
