"""One Jacobi iteration: refine a block of guessed future tokens in a single forward.

Greedy decoding is the fixed point of y_i = argmax p(· | prefix, y_<i) for i = 0..k-1.
Jacobi decoding starts from any guesses, evaluates all k right-hand sides in parallel (one
forward over prefix + guesses) and replaces the guesses. Position 0 is always right after one
step; position i is right once positions < i have stopped changing. A step therefore fixes at
least one token, as autoregressive decoding does, and sometimes more.

Greedy only; the loop around the step (emitting, refilling the block) lives in `specnb.methods`.
"""

from dataclasses import dataclass

from .args import check_in_vocab, token_ids
from .sampler import argmax


@dataclass
class JacobiStep:
    """The refreshed block and how many of its leading tokens are now final."""

    guesses: list  # k refreshed guesses: argmax at each block position
    num_converged: int  # leading tokens of `guesses` that equal greedy decoding (>= 1)


def count_converged(old_guesses, new_guesses) -> int:
    """Leading tokens of `new_guesses` that are final.

    new[i] is final when every input before it was already right, i.e. old[j] == new[j] for
    all j < i. Example: old [4, 9, 2, 7], new [4, 9, 5, 1] -> 3 (4, 9 and 5 are final).
    """
    converged = 1
    for old, new in zip(old_guesses[:-1], new_guesses[:-1]):
        if old != new:
            break
        converged += 1
    return min(converged, len(new_guesses))


def jacobi_step(model, prefix, guesses) -> JacobiStep:
    """Run `model` (a `CachedLM`) once on prefix + guesses and refresh every guess greedily."""
    if not callable(getattr(model, "logits", None)):
        raise ValueError(f"model must be a specnb.core.CachedLM (wrap a transformers model: "
                         f"CachedLM(model)), got {type(model).__name__}")
    prefix, guesses = token_ids("prefix", prefix), token_ids("guesses", guesses)
    vocab = getattr(model, "vocab_size", None)
    if vocab is not None:  # the last guess is never fed, so the model would not catch it
        check_in_vocab("prefix", prefix, vocab)
        check_in_vocab("guesses", guesses, vocab)
    if not prefix:
        raise ValueError("prefix must hold at least one token")
    if not guesses:
        raise ValueError("guesses must hold at least one token (the block size is >= 1)")
    # Logits at the last prefix token and at each guess but the last predict the k positions.
    logits = model.logits(prefix + guesses[:-1], keep=len(guesses))  # [1, k, V]
    refreshed = argmax(logits[0]).tolist()
    return JacobiStep(refreshed, count_converged(guesses, refreshed))
