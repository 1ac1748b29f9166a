"""Speculative decoding with a draft model (Leviathan et al. 2023; Chen et al. 2023).

Each iteration: the draft proposes γ tokens one by one (cheap forwards), the target scores all
of them plus one more position in a single forward, and `verify` keeps a prefix of the drafts
and adds one token of its own, so an iteration emits between 1 and γ+1 tokens, all distributed
exactly as the target would have produced them.
"""

import time

import torch

from ..core import CachedLM, acceptance_overlap, check_temperature, draw, logits_to_probs, \
    verify_detailed
from .batch_common import is_batch
from .batched import speculative_batched
from .common import DraftedToken, EmittedToken, GenerationResult, Iteration, Output, Stats, \
    check_positive_int, check_same_vocab, eos_token_ids, finish_stats, prompt_tokens


def verify_and_record(target_probs, draft_probs, draft_ids, temperature, generator, iteration):
    """Verify one block and fill `iteration`; return the proposed tokens (before EOS cuts).

    target_probs: [1, g+1, V] (the last row is the bonus distribution); draft_probs: [1, g, V].
    """
    num_drafts = len(draft_ids)
    draft_tensor = torch.tensor([draft_ids], dtype=torch.long, device=target_probs.device)
    bonus = draw(target_probs[:, num_drafts], temperature, generator=generator).view(1, 1)
    verdict = verify_detailed(target_probs[:, :num_drafts], draft_probs, draft_tensor, bonus,
                              generator=generator)
    index = draft_tensor.unsqueeze(-1)
    per_draft = torch.stack([  # one host transfer for the whole trace row: [4, g]
        target_probs[:, :num_drafts].gather(-1, index).squeeze(-1)[0],
        draft_probs.gather(-1, index).squeeze(-1)[0],
        verdict.accept_probs[0],
        acceptance_overlap(target_probs[:, :num_drafts], draft_probs)[0],
    ]).tolist()
    tokens = [t for t in verdict.tokens[0].tolist() if t >= 0]
    num_accepted = len(tokens) - 1
    for j, token in enumerate(draft_ids):
        status = "accepted" if j < num_accepted else "rejected" if j == num_accepted \
            else "unverified"
        p, q, accept_prob, overlap = (row[j] for row in per_draft)
        iteration.drafted.append(DraftedToken(token, q, p, accept_prob, overlap, status))
    last_kind = "bonus" if num_accepted == num_drafts else "resampled"
    iteration.emitted = [EmittedToken(t, "accepted") for t in tokens[:-1]] + \
        [EmittedToken(tokens[-1], last_kind)]
    return tokens, num_accepted


def score_and_verify(target_lm, out, draft_ids, draft_probs_of, temperature, generator, iteration,
                     stats) -> None:
    """The second half of every drafting iteration: one target forward over the drafts,
    `verify`, then emit and count. `draft_probs_of(target_probs)` returns q as `[1, g, V]`."""
    logits = target_lm.logits(out.sequence + draft_ids, keep=len(draft_ids) + 1)
    target_probs = logits_to_probs(logits, temperature)  # [1, g+1, V]
    iteration.target_s = target_lm.log.seconds[-1]

    verify_start = time.perf_counter()
    tokens, num_accepted = verify_and_record(target_probs, draft_probs_of(target_probs), draft_ids,
                                             temperature, generator, iteration)
    out.extend(tokens)
    iteration.verify_s = time.perf_counter() - verify_start
    stats.drafted += len(draft_ids)
    stats.accepted += num_accepted


def speculative(target, draft, input_ids, *, gamma, max_new_tokens, temperature=0.0,
                generator=None, eos_token_id=None, attention_mask=None) -> GenerationResult:
    """Speculative decoding of `target` with `draft` proposing `gamma` tokens per iteration.

    A batch (a list of prompts, or input_ids [B, L] with attention_mask) runs all rows at once,
    each accepting its own number of drafts (`specnb.methods.batched`).
    """
    gamma = check_positive_int("gamma", gamma, 0)
    if is_batch(input_ids, attention_mask):
        return speculative_batched(target, draft, input_ids, gamma=gamma,
                                   max_new_tokens=max_new_tokens, attention_mask=attention_mask,
                                   temperature=temperature, generator=generator,
                                   eos_token_id=eos_token_id)
    temperature = check_temperature(temperature)
    check_same_vocab(target, draft)
    prompt = prompt_tokens(target, input_ids, max_new_tokens)
    target_lm, draft_lm = CachedLM(target), CachedLM(draft)
    out = Output(prompt, max_new_tokens, eos_token_ids(target, eos_token_id))
    stats, trace = Stats(), []
    start = time.perf_counter()
    while not out.done:
        iteration, draft_start = Iteration(), time.perf_counter()
        # Never draft more than can be emitted: g drafts + 1 token of the target's own.
        draft_ids, draft_rows = [], []
        for _ in range(min(gamma, out.remaining - 1)):
            logits = draft_lm.logits(out.sequence + draft_ids, keep=1)[:, -1]
            draft_rows.append(logits_to_probs(logits, temperature))  # [1, V]
            draft_ids.append(int(draw(draft_rows[-1], temperature, generator=generator)))
            if draft_ids[-1] in out.eos_ids:  # nothing after an EOS could be emitted
                break
        iteration.draft_s = time.perf_counter() - draft_start

        # Drafted rows [1, V] each -> [1, g, V]; with no drafts, an empty slice of the right shape.
        score_and_verify(target_lm, out, draft_ids, lambda target_probs: torch.stack(
            draft_rows, dim=1) if draft_rows else target_probs[:, :0], temperature, generator,
            iteration, stats)
        trace.append(iteration)
    finish_stats(stats, start, out, trace, target_lm, draft_lm)
    return GenerationResult("speculative", [out.new_tokens], stats, trace)
