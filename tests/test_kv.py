"""The KV-cache wrapper: prefix reuse, rollback, logits equal to a fresh full forward."""

import pytest
import torch
from specnb.core import CachedLM, common_prefix_len, crop_cache


def full_logits(model, sequence, keep):
    with torch.no_grad():
        return model(torch.tensor([sequence])).logits[:, -keep:]


def test_common_prefix_len():
    assert common_prefix_len([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix_len([], [1]) == 0
    assert common_prefix_len([1, 2], [1, 2]) == 2


def test_runs_only_new_tokens_and_matches_full_forward(target):
    lm = CachedLM(target)
    sequence = [3, 14, 15, 92, 65, 35]
    torch.testing.assert_close(lm.logits(sequence), full_logits(target, sequence, 1))
    assert lm.log.num_tokens == [6]
    extended = sequence + [89, 79, 32]
    torch.testing.assert_close(lm.logits(extended, keep=3), full_logits(target, extended, 3),
                               rtol=1e-4, atol=1e-4)
    assert lm.log.num_tokens == [6, 3]
    assert lm.num_forwards == 2 and len(lm.log.seconds) == 2 and lm.forward_seconds > 0


def test_rolls_back_rejected_tokens(target):
    lm = CachedLM(target)
    lm.logits([5, 6, 7, 8, 9])
    diverged = [5, 6, 40, 41]
    torch.testing.assert_close(lm.logits(diverged, keep=2), full_logits(target, diverged, 2),
                               rtol=1e-4, atol=1e-4)
    assert lm.log.num_tokens[-1] == 2  # crop to [5, 6], run [40, 41]
    assert lm.cache.get_seq_length() == 4


def test_shrinking_and_repeated_calls_rerun_at_least_keep(target):
    lm = CachedLM(target)
    lm.logits([5, 6, 7, 8, 9])
    torch.testing.assert_close(lm.logits([5, 6, 7], keep=1), full_logits(target, [5, 6, 7], 1),
                               rtol=1e-4, atol=1e-4)
    assert lm.log.num_tokens[-1] == 1
    lm.logits([5, 6, 7], keep=3)
    assert lm.log.num_tokens[-1] == 3 and lm.cache.get_seq_length() == 3


def test_keep_out_of_range(target):
    with pytest.raises(ValueError, match="keep"):
        CachedLM(target).logits([1, 2], keep=3)


def test_context_limit(target):
    too_long = [1] * (target.config.max_position_embeddings + 1)
    with pytest.raises(ValueError, match="context"):
        CachedLM(target).logits(too_long)


def test_crop_cache_semantics_of_this_transformers(target):
    """crop_cache removes exactly the count asked for, and 0 removes nothing."""
    lm = CachedLM(target)
    lm.logits([1, 2, 3, 4, 5])
    cache = lm.cache
    crop_cache(cache, 0)
    assert cache.get_seq_length() == 5
    crop_cache(cache, 2)
    assert cache.get_seq_length() == 3
    with pytest.raises(ValueError):
        crop_cache(cache, -1)


def test_reset_forgets(target):
    lm = CachedLM(target)
    lm.logits([1, 2, 3])
    lm.reset()
    assert lm.num_forwards == 0 and lm.cached_ids == [] and lm.cache.get_seq_length() == 0
