"""Lookahead decoding (Fu et al. 2024): Jacobi's parallel guesses, harvested as n-grams.

`lookahead` is the speculative loop with a `LookaheadDrafter` (`specnb.drafters.lookahead`):
each iteration's one target forward refines a window of guesses (the lookahead branch) and
checks pooled n-grams that start with the pending token (the verification branch), both as one
token tree. No draft model, no training; the exact tree rule keeps the target's law (greedy: its
output, token for token).
"""

from ..drafters.lookahead import LookaheadDrafter
from .inputs import prompt_list
from .results import GenerationResult
from .speculative import generate


def lookahead(target, input_ids, *, window=5, ngram=3, candidates=5, max_new_tokens,
              temperature=0.0, generator=None, eos_token_id=None,
              attention_mask=None, trace=False) -> GenerationResult:
    """Decode with a Jacobi window of `window` columns × `ngram - 1` levels, checking up to
    `candidates` pooled n-grams (`ngram` tokens) per iteration. Each forward feeds
    1 + (window - 1) + window·(ngram - 2) + up to candidates·(ngram - 1) tokens."""
    drafter = LookaheadDrafter(window, ngram, candidates)
    # Window nodes beyond the token budget are fed all the same (their argmax refines the window),
    # so the widest forward must fit the model's context after the longest possible sequence.
    fed = drafter.max_fed
    context = getattr(target.config, "max_position_embeddings", None)
    prompts, _ = prompt_list(target, input_ids, attention_mask, max_new_tokens)  # checks them too
    length = max(map(len, prompts))
    if context is not None and length + max_new_tokens + fed > context:
        raise ValueError(f"window={window}, ngram={ngram}, candidates={candidates} feed up to {fed} "
                         f"tokens per forward; after {length} prompt and {max_new_tokens} new "
                         f"tokens that exceeds the model's context of {context}: choose a smaller "
                         f"window (or ngram, candidates)")
    return generate(target, drafter, input_ids, gamma=drafter.depth,
                    max_new_tokens=max_new_tokens, temperature=temperature,
                    generator=generator, eos_token_id=eos_token_id,
                    attention_mask=attention_mask, method="lookahead", trace=trace)
