"""Batched decoding: each row equals decoding it alone, and transformers' batched `generate`.

Ragged prompts, rows that hit EOS at different iterations, γ ∈ {1, 4, 8}, B ∈ {2, 4, 8}.
"""

import pytest
import torch

import specnb
from tiny_models import VOCAB, perturbed, tiny_llama

MAX_NEW = 24


@pytest.fixture(scope="module")
def models():
    target = tiny_llama(31)
    return target, {"perturbed": perturbed(target, 32, 0.1), "random": tiny_llama(33, hidden=16),
                    "same": target}


def ragged_prompts(batch, seed):
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 20, (batch,), generator=generator).tolist()
    return [torch.randint(1, VOCAB, (1, n), generator=generator) for n in lengths]


def hf_batched_greedy(model, prompts, max_new_tokens, eos_token_id=None):
    """transformers' batched greedy generate, left-padded, cut after each row's EOS."""
    width = max(p.shape[1] for p in prompts)
    ids = torch.zeros(len(prompts), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, prompt in enumerate(prompts):
        ids[row, width - prompt.shape[1]:], mask[row, width - prompt.shape[1]:] = prompt[0], 1
    out = model.generate(ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=False,
                         pad_token_id=0, eos_token_id=eos_token_id)[:, width:].tolist()
    if eos_token_id is None:
        return out
    return [row[:row.index(eos_token_id) + 1] if eos_token_id in row else row for row in out]


def eos_hit_at_different_iterations(model, prompts):
    """A token that the rows' free greedy runs first emit at (mostly) different positions."""
    runs = hf_batched_greedy(model, prompts, MAX_NEW)
    best, best_spread = None, 0
    for token in range(1, VOCAB):
        firsts = {run.index(token) for run in runs if token in run}
        if len(firsts) > best_spread:
            best, best_spread = token, len(firsts)
    assert best_spread >= 2
    return best


@pytest.mark.parametrize("batch", [2, 4, 8])
def test_autoregressive_rows_equal_alone_and_hf(models, batch):
    target, _ = models
    prompts = ragged_prompts(batch, batch)
    result = specnb.autoregressive(target, prompts, max_new_tokens=MAX_NEW)
    alone = [specnb.autoregressive(target, p, max_new_tokens=MAX_NEW).tokens[0] for p in prompts]
    assert result.tokens == alone == hf_batched_greedy(target, prompts, MAX_NEW)
    assert result.stats.new_tokens == batch * MAX_NEW


@pytest.mark.parametrize("draft_name", ["perturbed", "random", "same"])
@pytest.mark.parametrize("gamma", [1, 4, 8])
@pytest.mark.parametrize("batch", [2, 4, 8])
def test_speculative_rows_equal_hf_batched_greedy(models, batch, gamma, draft_name):
    target, drafts = models
    prompts = ragged_prompts(batch, 100 + batch)
    expected = hf_batched_greedy(target, prompts, MAX_NEW)
    result = specnb.speculative(target, drafts[draft_name], prompts, gamma=gamma,
                                max_new_tokens=MAX_NEW)
    assert result.tokens == expected
    if draft_name == "same":
        assert result.stats.accepted == result.stats.drafted > 0
        # One prefill, then each forward emits up to γ+1 tokens per row.
        assert result.stats.target_forwards <= 2 + (MAX_NEW - 1 + gamma) // (gamma + 1)


@pytest.mark.parametrize("gamma", [1, 4, 8])
@pytest.mark.parametrize("method", ["autoregressive", "speculative", "prompt_lookup"])
def test_rows_stop_at_their_own_eos(models, method, gamma):
    target, drafts = models
    prompts = ragged_prompts(8, 7)
    eos = eos_hit_at_different_iterations(target, prompts)
    expected = hf_batched_greedy(target, prompts, MAX_NEW, eos_token_id=eos)
    kwargs = {"speculative": {"draft": drafts["perturbed"], "gamma": gamma},
              "prompt_lookup": {"num_pred": gamma}, "autoregressive": {}}[method]
    if method == "speculative":
        result = specnb.speculative(target, kwargs.pop("draft"), prompts, max_new_tokens=MAX_NEW,
                                    eos_token_id=eos, **kwargs, trace=True)
    else:
        result = getattr(specnb, method)(target, prompts, max_new_tokens=MAX_NEW,
                                         eos_token_id=eos, **kwargs, trace=True)
    assert result.tokens == expected
    lengths = {len(row) for row in result.tokens}
    assert len(lengths) >= 2  # rows really finished at different times
    # Finished rows leave the batch: rows take different numbers of loop steps.
    assert len({max(it.step for it in result.row(b).trace) for b in range(len(prompts))}) >= 2


def test_prompt_lookup_with_ragged_drafts(models):
    """Repetitive prompts give rows drafts of different lengths, many accepted."""
    target = tiny_llama(5)
    prompts = [torch.tensor([[7, 8, 9, 10, 11, 12] * 6]), torch.tensor([[3, 4] * 9]),
               torch.tensor([[40]]), torch.tensor([[20, 21, 22, 23] * 3])]
    result = specnb.prompt_lookup(target, prompts, num_pred=6, max_new_tokens=MAX_NEW, trace=True)
    assert result.tokens == hf_batched_greedy(target, prompts, MAX_NEW)
    drafted = {len(it.drafted) for it in result.trace if it.step > 0}
    assert len(drafted) >= 2  # rows drafted different numbers of tokens


def test_attention_mask_input_equals_list_input(models):
    target, drafts = models
    prompts = ragged_prompts(4, 9)
    width = max(p.shape[1] for p in prompts)
    for side in ("left", "right"):
        ids = torch.zeros(4, width, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, prompt in enumerate(prompts):
            n = prompt.shape[1]
            cols = slice(width - n, width) if side == "left" else slice(0, n)
            ids[row, cols], mask[row, cols] = prompt[0], 1
        from_mask = specnb.speculative(target, drafts["perturbed"], ids, attention_mask=mask,
                                       gamma=3, max_new_tokens=MAX_NEW)
        from_list = specnb.speculative(target, drafts["perturbed"], prompts, gamma=3,
                                       max_new_tokens=MAX_NEW)
        assert from_mask.tokens == from_list.tokens


@pytest.mark.parametrize("bad, message", [
    ([], "empty"),
    ([torch.tensor([[1, 2]]), torch.tensor([[]], dtype=torch.long)], "prompt 1 is empty"),
    ([[1, 2], [3, VOCAB]], "prompt 1 must hold ids"),
    ([[1, 2], ["a"]], "list of int ids"),
    ([torch.tensor([[1, 2], [3, 4]])], "prompt 0 must be a LongTensor"),
])
def test_bad_batches_fail_with_clear_errors(models, bad, message):
    target, _ = models
    with pytest.raises(ValueError, match=message):
        specnb.autoregressive(target, bad, max_new_tokens=4)


def test_bad_attention_masks_fail_with_clear_errors(models):
    target, drafts = models
    ids = torch.ones(2, 5, dtype=torch.long)
    with pytest.raises(ValueError, match="shape of input_ids"):
        specnb.autoregressive(target, ids, attention_mask=torch.ones(2, 4), max_new_tokens=4)
    with pytest.raises(ValueError, match="only 0"):
        specnb.autoregressive(target, ids, attention_mask=torch.full((2, 5), 2), max_new_tokens=4)
    with pytest.raises(ValueError, match="context"):
        specnb.speculative(target, drafts["same"], ids, gamma=8, max_new_tokens=252)
    # The limit is the prompt plus max_new_tokens, whatever γ (drafts stop at the budget).
    result = specnb.speculative(target, drafts["same"], ids, gamma=8, max_new_tokens=251)
    assert [len(row) for row in result.tokens] == [251, 251]
