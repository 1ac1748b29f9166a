"""Prompt lookup decoding (Saxena 2023): drafts copied from the text itself, no draft model.

`prompt_lookup` is the speculative loop with an `NgramDrafter`: each iteration copies what
followed the tail n-gram earlier in the prompt or output and verifies the copy with one target
forward. A copy is deterministic (q is one-hot), so `verify` keeps a copied token x with
probability p(x): exact under sampling too, and "does it equal the argmax" when greedy.
"""

from ..drafters import NgramDrafter
from ..core.args import check_int
from .results import GenerationResult
from .speculative import generate


def prompt_lookup(target, input_ids, *, num_pred, max_new_tokens, ngram_max=3, ngram_min=1,
                  temperature=0.0, generator=None, eos_token_id=None,
                  attention_mask=None, trace=False) -> GenerationResult:
    """Decode with up to `num_pred` tokens per iteration copied from an earlier n-gram match."""
    num_pred = check_int("num_pred", num_pred, 0)
    ngram_min = check_int("ngram_min", ngram_min, 1)
    ngram_max = check_int("ngram_max", ngram_max, ngram_min)
    return generate(target, NgramDrafter(n_max=ngram_max, n_min=ngram_min), input_ids,
                    gamma=num_pred, max_new_tokens=max_new_tokens, temperature=temperature,
                    generator=generator, eos_token_id=eos_token_id,
                    attention_mask=attention_mask, method="prompt_lookup", trace=trace)
