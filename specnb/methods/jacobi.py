"""Jacobi decoding (Santilli et al. 2023): guess a block of future tokens, refine in parallel.

Each iteration runs `jacobi_step` once over the current guesses, emits the leading tokens that
have converged (at least one, so it never does worse than autoregressive in forwards), and
refills the block with the unconverged refreshed guesses. Greedy only: the fixed point it finds
is the greedy continuation.
"""

import time

from ..core import CachedLM, jacobi_step
from .common import EmittedToken, GenerationResult, Iteration, Output, Stats, \
    check_positive_int, eos_token_ids, finish_stats, prompt_tokens


def jacobi(target, input_ids, *, block, max_new_tokens, eos_token_id=None) -> GenerationResult:
    """Greedy decoding by Jacobi iteration over blocks of `block` tokens."""
    block = check_positive_int("block", block, 1)
    prompt = prompt_tokens(target, input_ids, max_new_tokens)
    target_lm = CachedLM(target)
    out = Output(prompt, max_new_tokens, eos_token_ids(target, eos_token_id))
    stats, trace = Stats(), []
    guesses = [prompt[-1]] * block  # any start works; the fixed point does not depend on it
    start = time.perf_counter()
    while not out.done:
        guesses = guesses[:min(block, out.remaining)]
        step = jacobi_step(target_lm, out.sequence, guesses)
        emitted = out.extend(step.guesses[:step.num_converged])
        trace.append(Iteration(
            emitted=[EmittedToken(t, "accepted" if i else "target") for i, t in
                     enumerate(emitted)],
            target_s=target_lm.log.seconds[-1],
            info={"guesses": guesses, "refreshed": step.guesses,
                  "num_converged": step.num_converged}))
        stats.drafted += len(guesses) - 1  # position 0 is a plain autoregressive step
        stats.accepted += step.num_converged - 1
        # Unconverged refreshed guesses are the next start; pad by repeating the last one.
        rest = step.guesses[step.num_converged:]
        guesses = rest + [step.guesses[-1]] * (block - len(rest))
    finish_stats(stats, start, out, trace, target_lm)
    return GenerationResult("jacobi", [out.new_tokens], stats, trace)
