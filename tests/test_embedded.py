"""The embedded SmolLM2-135M-Instruct: offline loading, chat template, greedy equality with HF."""

import hashlib
import json

import pytest
from safetensors.torch import load_file

import specnb
import specnb.models.loading
import specnb.models.pairs
from specnb.models.loading import (cache_dir, chat_ids, early_exit_draft, embedded_checkpoint,
                                   load_model)

MAX_NEW = 32


@pytest.fixture(scope="module")
def cases(embedded):
    model, tokenizer = embedded
    prompts = specnb.load_prompts("eval")[:3]
    cases = []
    for prompt in prompts:
        ids = chat_ids(tokenizer, prompt["prompt"])
        expected = model.generate(ids, max_new_tokens=MAX_NEW, do_sample=False)[0, ids.shape[1]:]
        cases.append((ids, expected.tolist()))
    return cases


def test_loads_offline_from_the_cache_and_is_the_135m_instruct(embedded, monkeypatch):
    """A second load reads the cached checkpoint: no download, no second dequantization."""
    def refetch():
        raise AssertionError("the cached checkpoint was not used: the GGUF was fetched again")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(specnb.models.loading, "fetch_embedded_gguf", refetch)
    model, tokenizer = load_model(device="cpu")
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert model.config.vocab_size == len(tokenizer) == 49152
    assert (cache_dir() / "smollm2-135m-instruct" / "model.safetensors").exists()


# The dequantized checkpoint, as the pinned transformers and gguf make it from the GGUF: every
# tensor's name, dtype, shape and bytes, and the vocabulary. The feature head and the draft were
# trained on exactly these weights, and the notebooks' outputs come from them.
WEIGHTS_SHA256 = "faf714ce5e44852b956c3b9adba96ebb99ce3341ac494296ed6d8b0939fab337"
VOCABULARY_SHA256 = "ebab3b7e903b792df4c4d66cbede555f50fd0f40694ef4faf3d483ed2a8ce3e5"


def test_the_prepared_checkpoint_is_the_ggufs_dequantization(embedded):
    """What `python -m specnb --prepare` wrote (specnb.models.loading.embedded_checkpoint, which
    keeps gguf's parse between transformers' three reads of the file) is bit for bit what
    transformers' own GGUF loading gives."""
    _, tokenizer = embedded
    weights = load_file(embedded_checkpoint() / "model.safetensors")
    digest = hashlib.sha256()
    for name in sorted(weights):
        tensor = weights[name]
        digest.update(f"{name} {tensor.dtype} {tuple(tensor.shape)}\n".encode())
        digest.update(tensor.numpy().tobytes())
    assert (len(weights), digest.hexdigest()) == (272, WEIGHTS_SHA256)
    vocabulary = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    assert hashlib.sha256(json.dumps(vocabulary, ensure_ascii=False).encode()).hexdigest() \
        == VOCABULARY_SHA256
    # The merges, through one encoding: a wrong or missing merge splits a word differently.
    assert tokenizer.encode("Speculative decoding drafts cheaply, then verifies: exactness "
                            "first!", add_special_tokens=False) == \
        [10281, 11398, 30081, 30028, 44838, 28, 965, 2303, 5638, 42, 3018, 924, 808, 17]


def test_chat_template(embedded):
    _, tokenizer = embedded
    ids = chat_ids(tokenizer, "What is 2 + 2?")
    text = tokenizer.decode(ids[0])
    assert text.startswith("<|im_start|>system") and "<|im_start|>user\nWhat is 2 + 2?<|im_end|>" \
        in text and text.endswith("<|im_start|>assistant\n")


def test_first_answer_is_sensible(embedded):
    model, tokenizer = embedded
    ids = chat_ids(tokenizer, "What is the capital of France?")
    answer = specnb.autoregressive(model, ids, max_new_tokens=12).text(tokenizer)
    assert "Paris" in answer


@pytest.fixture(scope="module")
def embedded_head(embedded):
    return specnb.models.pairs.load_embedded_head(embedded[0])


# γ = 1 (the best on a CPU) and a longer block; tests/test_feature_head.py covers γ up to 8 on
# tiny models in a fraction of the time.
@pytest.mark.parametrize("gamma", [1, 3])
def test_shipped_head_greedy_equals_hf_generate(embedded, embedded_head, cases, gamma):
    """The shipped feature head, alone and as a ragged batch of the three held-out prompts."""
    model, _ = embedded
    for ids, expected in cases:
        assert specnb.speculative(model, embedded_head, ids, gamma=gamma,
                                  max_new_tokens=MAX_NEW).tokens == [expected]
    batch = specnb.speculative(model, embedded_head, [ids for ids, _ in cases], gamma=gamma,
                               max_new_tokens=MAX_NEW)
    assert batch.tokens == [expected for _, expected in cases]
    assert batch.stats.accepted > 0


@pytest.mark.parametrize("method", ["speculative", "early_exit", "prompt_lookup", "jacobi"])
def test_greedy_equals_hf_generate(embedded, embedded_draft, cases, method):
    """On held-out prompts (eval split): the shipped draft, and the early-exit stand-in."""
    model, _ = embedded
    for ids, expected in cases:
        if method == "speculative":
            result = specnb.speculative(model, embedded_draft, ids, gamma=4, max_new_tokens=MAX_NEW)
        elif method == "early_exit":
            result = specnb.speculative(model, early_exit_draft(model, 8), ids, gamma=2,
                                        max_new_tokens=MAX_NEW)
        elif method == "prompt_lookup":
            result = specnb.prompt_lookup(model, ids, num_pred=8, max_new_tokens=MAX_NEW)
        else:
            result = specnb.jacobi(model, ids, block=6, max_new_tokens=MAX_NEW)
        assert result.tokens == [expected]


def test_unknown_model_points_to_the_default(offline_hub):
    with pytest.raises(ValueError, match="load_model\\(\\) with no argument"):
        load_model("no-such-org/no-such-model")
