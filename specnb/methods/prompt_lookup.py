"""Prompt lookup decoding (Saxena 2023): drafts copied from the text itself, no draft model.

Each iteration looks up the tail n-gram of the sequence earlier in the prompt or output
(`ngram_lookup`), proposes what followed it, and verifies the copy with one target forward.
A copied draft is deterministic (q is one-hot), so `verify` accepts it with probability p(x):
exact under sampling too, and plain "does it equal the argmax" when greedy.
"""

import time

import torch

from ..core import CachedLM, check_temperature, ngram_lookup
from .batch_common import is_batch
from .batched import prompt_lookup_batched
from .common import GenerationResult, Iteration, Output, Stats, check_positive_int, \
    eos_token_ids, finish_stats, prompt_tokens
from .speculative import score_and_verify


def one_hot_rows(draft_ids, target_probs) -> torch.Tensor:
    """q for a copied draft: `[1, g, V]` one-hot rows, on the target's device and dtype."""
    index = torch.tensor(draft_ids, dtype=torch.long, device=target_probs.device).view(1, -1, 1)
    return torch.zeros_like(target_probs[:, :len(draft_ids)]).scatter_(-1, index, 1.0)


def prompt_lookup(target, input_ids, *, num_pred, max_new_tokens, ngram_max=3, ngram_min=1,
                  temperature=0.0, generator=None, eos_token_id=None,
                  attention_mask=None) -> GenerationResult:
    """Decode with up to `num_pred` tokens per iteration copied from an earlier n-gram match.

    A batch (a list of prompts, or input_ids [B, L] with attention_mask) runs all rows at once.
    """
    num_pred = check_positive_int("num_pred", num_pred, 0)
    ngram_min = check_positive_int("ngram_min", ngram_min, 1)
    ngram_max = check_positive_int("ngram_max", ngram_max, ngram_min)
    if is_batch(input_ids, attention_mask):
        return prompt_lookup_batched(target, input_ids, num_pred=num_pred,
                                     max_new_tokens=max_new_tokens, attention_mask=attention_mask,
                                     ngram_max=ngram_max, ngram_min=ngram_min,
                                     temperature=temperature, generator=generator,
                                     eos_token_id=eos_token_id)
    temperature = check_temperature(temperature)
    prompt = prompt_tokens(target, input_ids, max_new_tokens)
    target_lm = CachedLM(target)
    out = Output(prompt, max_new_tokens, eos_token_ids(target, eos_token_id))
    stats, trace = Stats(), []
    start = time.perf_counter()
    while not out.done:
        iteration, lookup_start = Iteration(), time.perf_counter()
        found = ngram_lookup(out.sequence, n_max=ngram_max, n_min=ngram_min,
                             k=min(num_pred, out.remaining - 1))
        draft_ids = found.draft
        for j, token in enumerate(draft_ids):  # nothing after an EOS could be emitted
            if token in out.eos_ids:
                draft_ids = draft_ids[:j + 1]
                break
        iteration.info = {"ngram_size": found.ngram_size, "match_start": found.match_start,
                          "source_start": found.source_start}
        iteration.draft_s = time.perf_counter() - lookup_start

        score_and_verify(target_lm, out, draft_ids, lambda target_probs: one_hot_rows(
            draft_ids, target_probs), temperature, generator, iteration, stats)
        trace.append(iteration)
    finish_stats(stats, start, out, trace, target_lm)
    return GenerationResult("prompt_lookup", [out.new_tokens], stats, trace)
