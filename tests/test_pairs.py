"""Model pairs: the embedded offline pair, the registry, and vocabulary matching."""

import pytest
import torch

import specnb
from tiny_models import tiny_llama
from specnb.drafters import FeatureDrafter
from specnb.models.pairs import (EMBEDDED_DRAFT, EMBEDDED_ENGINES_HEAD, EMBEDDED_HEAD, PAIRS,
                                 load_head, load_pair, match_vocabularies, output_rows)


class StubTokenizer:
    def __init__(self, vocab):
        self.vocab = vocab

    def get_vocab(self):
        return self.vocab

    def __len__(self):
        return len(self.vocab)


VOCAB = {f"t{i}": i for i in range(90)}


def test_padding_rows_are_cut_to_the_tokenizer():
    target, draft = tiny_llama(1, vocab=96), tiny_llama(2, vocab=128)
    match_vocabularies(target, draft, StubTokenizer(VOCAB), StubTokenizer(dict(VOCAB)))
    assert output_rows(target) == output_rows(draft) == 90
    ids = torch.tensor([[1, 2, 3]])
    result = specnb.speculative(target, draft, ids, gamma=3, max_new_tokens=5)
    assert len(result.tokens[0]) == 5


def test_same_rows_are_left_alone():
    target, draft = tiny_llama(1), tiny_llama(2)
    match_vocabularies(target, draft, StubTokenizer(VOCAB), StubTokenizer(VOCAB))
    assert output_rows(target) == output_rows(draft) == 96


def test_different_tokenizers_are_refused():
    other = {**VOCAB, "t5": 6, "t6": 5}
    with pytest.raises(ValueError, match="tokenizers differ"):
        match_vocabularies(tiny_llama(1), tiny_llama(2), StubTokenizer(VOCAB), StubTokenizer(other))


def test_too_few_rows_are_refused():
    big = {f"t{i}": i for i in range(100)}
    with pytest.raises(ValueError, match="scores 96 ids"):
        match_vocabularies(tiny_llama(1), tiny_llama(2), StubTokenizer(big), StubTokenizer(big))


def test_registry_and_unknown_names():
    assert set(PAIRS) == {"smollm2-1.7b", "smollm2-360m", "qwen2.5-1.5b", "llama-160m"}
    with pytest.raises(ValueError, match="unknown pair"):
        load_pair("gpt-5/gpt-4")


def test_named_pair_offline_points_to_the_default(offline_hub):
    with pytest.raises(ValueError, match="no argument"):
        load_pair("llama-160m")


@pytest.mark.embedded
def test_embedded_pairs_load_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    target, draft, tokenizer = load_pair("embedded-distilled", device="cpu")
    assert output_rows(draft) == output_rows(target) == len(tokenizer)
    assert draft.dtype == target.dtype == torch.float32
    size = sum(f.stat().st_size for f in EMBEDDED_DRAFT.iterdir())
    assert size <= 20 * 2**20, f"the shipped draft must stay within 20 MB, is {size / 2**20:.1f}"
    draft_params = sum(p.numel() for p in draft.parameters())
    assert draft_params < 0.1 * sum(p.numel() for p in target.parameters())
    # The default pair: the same target and the feature head, a drafter reading its features.
    target, head, _ = load_pair(device="cpu")
    assert isinstance(head, FeatureDrafter)
    assert head.head.config.target_vocab_size == len(tokenizer)
    size = sum(f.stat().st_size for f in EMBEDDED_HEAD.iterdir())
    assert size <= 25 * 2**20, f"the shipped head must stay within 25 MB, is {size / 2**20:.1f}"
    with pytest.raises(ValueError, match="embedded-distilled"):
        load_pair("embedded-standalone")


def test_a_folder_without_a_saved_head_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no saved head"):
        load_head(tmp_path, target=None)


@pytest.mark.embedded
def test_the_engines_head_loads_in_the_engines_layout_and_drafts_exactly():
    """data/engines_head: three raw target layers at the engines' default, within the size the
    default head keeps, and greedy decoding with it is the target's own."""
    target, _, tokenizer = load_pair(device="cpu")
    engines = load_head(EMBEDDED_ENGINES_HEAD, target)
    config = engines.head.config
    assert tuple(config.feature_layers) == (2, 15, 27) and not config.feature_norms
    assert config.target_vocab_size == len(tokenizer)
    size = sum(f.stat().st_size for f in EMBEDDED_ENGINES_HEAD.iterdir())
    assert size <= 25 * 2**20, f"the engines head must stay within 25 MB, is {size / 2**20:.1f}"
    ids = specnb.chat_ids(tokenizer, "Give two tips for sleeping well.")
    plain = specnb.autoregressive(target, ids, max_new_tokens=16)
    drafted = specnb.speculative(target, engines, ids, gamma=3, max_new_tokens=16)
    assert drafted.tokens == plain.tokens
    assert drafted.stats.accepted > 0  # it drafts the target's tokens, not noise
