"""Autoregressive decoding: one target forward per new token. The baseline everything beats.

It is the speculative loop with nothing to draft (γ = 0): each step scores the pending token
and emits one token of the target's own, so it shares every check, the cache and the trace.
"""

from ..drafters import NoDrafter
from .results import GenerationResult
from .speculative import generate


def autoregressive(target, input_ids, *, max_new_tokens, temperature=0.0, generator=None,
                   eos_token_id=None, attention_mask=None, trace=False) -> GenerationResult:
    """Greedy (temperature 0) or sampled decoding with the KV cache, one token per forward.

    `input_ids` is one prompt or a batch (a list of prompts, or [B, L] with attention_mask).
    """
    return generate(target, NoDrafter(), input_ids, gamma=0, max_new_tokens=max_new_tokens,
                    temperature=temperature, generator=generator, eos_token_id=eos_token_id,
                    attention_mask=attention_mask, method="autoregressive", trace=trace)
