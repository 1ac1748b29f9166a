"""Autoregressive decoding: one target forward per new token. The baseline everything beats."""

import time

from ..core import CachedLM, check_temperature, draw, logits_to_probs
from .batch_common import is_batch
from .batched import autoregressive_batched
from .common import EmittedToken, GenerationResult, Iteration, Output, Stats, eos_token_ids, \
    finish_stats, prompt_tokens


def autoregressive(target, input_ids, *, max_new_tokens, temperature=0.0, generator=None,
                   eos_token_id=None, attention_mask=None) -> GenerationResult:
    """Greedy (temperature 0) or sampled decoding with the KV cache, one token per forward.

    A batch (a list of prompts, or input_ids [B, L] with attention_mask) runs all rows at once.
    """
    if is_batch(input_ids, attention_mask):
        return autoregressive_batched(target, input_ids, max_new_tokens=max_new_tokens,
                                      attention_mask=attention_mask, temperature=temperature,
                                      generator=generator, eos_token_id=eos_token_id)
    temperature = check_temperature(temperature)
    prompt = prompt_tokens(target, input_ids, max_new_tokens)
    target_lm = CachedLM(target)
    out = Output(prompt, max_new_tokens, eos_token_ids(target, eos_token_id))
    trace = []
    start = time.perf_counter()
    while not out.done:
        logits = target_lm.logits(out.sequence, keep=1)[:, -1]  # [1, V]
        token = draw(logits_to_probs(logits, temperature), temperature, generator=generator)
        out.extend([int(token)])
        trace.append(Iteration(emitted=[EmittedToken(out.new_tokens[-1], "target")],
                               target_s=target_lm.log.seconds[-1]))
    stats = Stats()
    finish_stats(stats, start, out, trace, target_lm)
    return GenerationResult("autoregressive", [out.new_tokens], stats, trace)
