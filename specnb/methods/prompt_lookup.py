"""Prompt lookup decoding (Saxena 2023): drafts copied from the text itself, no draft model.

Each iteration looks up the tail n-gram of the sequence earlier in the prompt or output
(`ngram_lookup`), proposes what followed it, and verifies the copy with one target forward.
A copied draft is deterministic (q is one-hot), so `verify` accepts it with probability p(x):
exact under sampling too, and plain "does it equal the argmax" when greedy.
"""

import time

import torch

from ..core import CachedLM, check_temperature, logits_to_probs, ngram_lookup
from .common import GenerationResult, Iteration, Output, Stats, check_positive_int, \
    eos_token_ids, prompt_tokens
from .speculative import verify_and_record


def prompt_lookup(target, input_ids, *, num_pred, max_new_tokens, ngram_max=3, ngram_min=1,
                  temperature=0.0, generator=None, eos_token_id=None) -> GenerationResult:
    """Decode with up to `num_pred` tokens per iteration copied from an earlier n-gram match."""
    num_pred = check_positive_int("num_pred", num_pred, 0)
    ngram_min = check_positive_int("ngram_min", ngram_min, 1)
    ngram_max = check_positive_int("ngram_max", ngram_max, ngram_min)
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

        logits = target_lm.logits(out.sequence + draft_ids, keep=len(draft_ids) + 1)
        target_probs = logits_to_probs(logits, temperature)  # [1, g+1, V]
        iteration.target_s = target_lm.log.seconds[-1]

        verify_start = time.perf_counter()
        draft_index = torch.tensor(draft_ids, dtype=torch.long, device=target_probs.device)
        draft_probs = torch.zeros_like(target_probs[:, :len(draft_ids)]).scatter_(
            -1, draft_index.view(1, -1, 1), 1.0)  # [1, g, V]: a copy is a one-hot draft
        tokens, num_accepted = verify_and_record(target_probs, draft_probs, draft_ids,
                                                 temperature, generator, iteration)
        out.extend(tokens)
        iteration.verify_s = time.perf_counter() - verify_start

        stats.drafted += len(draft_ids)
        stats.accepted += num_accepted
        trace.append(iteration)
    stats.wall_s = time.perf_counter() - start
    stats.new_tokens, stats.iterations = len(out.new_tokens), len(trace)
    stats.target_forwards, stats.target_s = target_lm.num_forwards, target_lm.forward_seconds
    return GenerationResult("prompt_lookup", [out.new_tokens], stats, trace)
