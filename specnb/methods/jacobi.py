"""Jacobi decoding (Santilli et al. 2023): guess a block of future tokens, refine in parallel.

Each iteration runs `jacobi_step` once over the current guesses, emits the leading tokens that
have converged (at least one, so it never needs more forwards than autoregressive decoding),
and refills the block with the unconverged refreshed guesses. Greedy only: the fixed point it
finds is the greedy continuation. It is not draft-then-verify, so it keeps its own loop, but it
shares the checks, the cache (`CachedLM`) and the result and trace types with the others.
"""

import time

from ..core import CachedLM, jacobi_step
from ..core.args import check_int
from .inputs import eos_token_ids, prompt_list
from .speculative import check_trace
from .results import EmittedToken, GenerationResult, Iteration, Stats, cut_at_eos


def jacobi(target, input_ids, *, block, max_new_tokens, eos_token_id=None,
           trace=False) -> GenerationResult:
    """Greedy decoding by Jacobi iteration over blocks of `block` tokens (one prompt); `trace`:
    record each iteration's guesses and converged tokens (`result.trace`)."""
    block = check_int("block", block, 1)
    prompts, max_new_tokens = prompt_list(target, input_ids, None, max_new_tokens)
    if len(prompts) != 1:
        raise ValueError(f"jacobi decodes one prompt at a time, got {len(prompts)}; loop over them")
    block = min(block, max_new_tokens)  # cap before building anything of size `block`
    eos_ids = eos_token_ids(target, eos_token_id)
    training = target.training
    target_lm = CachedLM(target)
    sequence, new_tokens = list(prompts[0]), []
    stats, keep_trace, trace = Stats(), check_trace(trace), []
    guesses = [sequence[-1]] * block  # any start works; the fixed point does not depend on it
    start = time.perf_counter()
    try:
        while len(new_tokens) < max_new_tokens and not (new_tokens and new_tokens[-1] in eos_ids):
            guesses = guesses[:min(block, max_new_tokens - len(new_tokens))]
            step = jacobi_step(target_lm, sequence, guesses)
            emitted = cut_at_eos(step.guesses[:step.num_converged], eos_ids)
            sequence += emitted
            new_tokens += emitted
            if keep_trace:
                trace.append(Iteration(
                    emitted=[EmittedToken(t, "accepted" if i else "target") for i, t in
                             enumerate(emitted)],
                    target_s=target_lm.log.seconds[-1], step=stats.iterations,
                    info={"guesses": guesses, "refreshed": step.guesses,
                          "num_converged": step.num_converged}))
            stats.iterations += 1
            stats.drafted += len(guesses) - 1  # position 0 is a plain autoregressive step
            stats.accepted += step.num_converged - 1
            # Unconverged refreshed guesses are the next start; pad by repeating the last one.
            rest = step.guesses[step.num_converged:]
            guesses = rest + [step.guesses[-1]] * (block - len(rest))
    finally:
        target.train(training)
    stats.wall_s = time.perf_counter() - start
    stats.new_tokens = len(new_tokens)
    stats.target_forwards, stats.target_s = target_lm.num_forwards, target_lm.forward_seconds
    # Step 0's forward feeds the prompt too: the decoding steps are the ones after it.
    stats.decoding_target_s = sum(target_lm.log.seconds[1:])
    stats.decoding_steps = max(stats.iterations - 1, 0)
    return GenerationResult("jacobi", [new_tokens], stats, trace if keep_trace else None)
