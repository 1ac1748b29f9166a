"""Batched decoding: B prompts of different lengths in one loop, each row at its own pace.

One iteration of batched speculative decoding, for the A rows still running:

    draft   γ forwards of [A, 1] (the first may carry 2 tokens: see below) -> drafts [A, γ], q
    target  one forward of [A, γ+1]: each row's pending token, then its γ drafts
    verify  one call over [A, γ, V]: row b keeps a_b drafts and adds one token of the target's
    cache   each row rolls back its own γ − a_b rejected drafts (BatchedCachedLM.rollback)

Rows accept different numbers of drafts, so the caches hold holes; positions and attention
masks are per row (see `specnb.core.batch_kv`). The only per-row Python is the bookkeeping of
the trace and, for prompt lookup, the n-gram search on the host; rows that finish leave the
batch. Greedy output per row equals decoding that row alone.

It does not pad drafts for rows that have little budget left: they draft γ like the others and
`BatchOutput` drops what falls past their budget or their EOS.
"""

import time

import torch

from ..core import check_temperature, draw, logits_to_probs, ngram_lookup, verify_detailed
from ..core.batch_kv import BatchedCachedLM
from .batch_common import BatchOutput, batch_prompts, pad_token_id, record
from .common import GenerationResult, Stats, check_same_vocab, eos_token_ids


class _Run:
    """The state every batched loop shares: active rows, the output, the stats and the trace.

    Host reads are batched: one per iteration to learn which rows finished (`drop_finished`),
    one to record what was emitted, and one per cache rollback.
    """

    def __init__(self, target, prompts, max_new_tokens, temperature, generator, eos_token_id):
        self.temperature, self.generator = temperature, generator
        self.target_lm = BatchedCachedLM(target, pad_token_id(target))
        self.device = self.target_lm.device
        self.row_ids = list(range(len(prompts)))  # original index of each running row (host)
        self.rows = torch.arange(len(prompts), device=self.device)  # the same, on the device
        self.out = BatchOutput(len(prompts), max_new_tokens, eos_token_ids(target, eos_token_id),
                               self.device)
        self.stats, self.trace = Stats(), []
        self.start = time.perf_counter()
        # The prompts' forward gives every row its first token.
        self.emit_one(self.target_lm.prefill(prompts))

    def emit_one(self, logits) -> None:
        """Draw one token per row from `logits [A, V]`, append it and record the step."""
        self.pending = self.draw(logits_to_probs(logits, self.temperature))
        kept = self.out.extend(self.rows, self.pending.unsqueeze(1))
        emitted = [[t] if k else [] for t, k in torch.stack([self.pending, kept], 1).tolist()]
        record(self.trace, self.row_ids, emitted, target_s=self.target_lm.log.seconds[-1])

    def drop_finished(self, *caches) -> torch.Tensor | None:
        """Drop finished rows from the batch; return the kept indices (None when all are done)."""
        finished = self.out.finished[self.rows].tolist()  # the loop's host read of its state
        keep = [i for i, done in enumerate(finished) if not done]
        if not keep:
            return None
        keep_tensor = torch.tensor(keep, device=self.device)
        if len(keep) < len(finished):
            self.row_ids = [self.row_ids[i] for i in keep]
            self.rows, self.pending = self.rows[keep_tensor], self.pending[keep_tensor]
            for cache in (self.target_lm, *caches):
                cache.select_rows(keep_tensor)
        return keep_tensor

    def draw(self, probs):
        return draw(probs, self.temperature, generator=self.generator)

    def verify(self, draft_ids, draft_probs, num_drafts, draft_s):
        """Score `[pending, drafts]` with the target, verify, roll back; emit and record."""
        width = draft_ids.shape[1]
        logits = self.target_lm.forward(torch.cat([self.pending.unsqueeze(1), draft_ids], 1))
        target_probs = logits_to_probs(logits, self.temperature)  # [A, K+1, V]
        verify_start = time.perf_counter()
        index = num_drafts.view(-1, 1, 1).expand(-1, 1, target_probs.shape[-1])
        bonus = self.draw(target_probs.gather(1, index).squeeze(1)).unsqueeze(1)  # [A, 1]
        verdict = verify_detailed(target_probs[:, :width], draft_probs, draft_ids, bonus,
                                  num_drafts=num_drafts, generator=self.generator)
        self.target_lm.rollback(width - verdict.num_accepted)
        self.pending = verdict.tokens.gather(1, verdict.num_accepted.unsqueeze(1)).squeeze(1)
        kept = self.out.extend(self.rows, verdict.tokens)
        verify_s = time.perf_counter() - verify_start
        # One host read for the trace: per row [drafted, accepted, kept, tokens...].
        summary = torch.cat([torch.stack([num_drafts, verdict.num_accepted, kept], 1),
                             verdict.tokens], 1).tolist()
        drafted, accepted = [r[0] for r in summary], [r[1] for r in summary]
        self.stats.drafted += sum(drafted)
        self.stats.accepted += sum(accepted)
        record(self.trace, self.row_ids, [r[3:3 + r[2]] for r in summary], accepted, drafted,
               draft_s=draft_s, target_s=self.target_lm.log.seconds[-1], verify_s=verify_s)
        return verdict

    def result(self, method, draft_lm=None) -> GenerationResult:
        stats = self.stats
        stats.wall_s = time.perf_counter() - self.start
        stats.new_tokens, stats.iterations = int(self.out.count.sum()), len(self.trace)
        stats.target_forwards = self.target_lm.num_forwards
        stats.target_s = self.target_lm.forward_seconds
        if draft_lm is not None:
            stats.draft_forwards, stats.draft_s = draft_lm.num_forwards, draft_lm.forward_seconds
        return GenerationResult(method, self.out.tokens(), stats, self.trace)


def autoregressive_batched(target, input_ids, *, max_new_tokens, attention_mask=None,
                           temperature=0.0, generator=None, eos_token_id=None) -> GenerationResult:
    """One target forward of `[A, 1]` per step for the A unfinished rows."""
    temperature = check_temperature(temperature)
    prompts = batch_prompts(target, input_ids, attention_mask, max_new_tokens)
    run = _Run(target, prompts, max_new_tokens, temperature, generator, eos_token_id)
    while run.drop_finished() is not None:
        run.emit_one(run.target_lm.forward(run.pending.unsqueeze(1), keep=1)[:, -1])  # [A, V]
    return run.result("autoregressive")


def speculative_batched(target, draft, input_ids, *, gamma, max_new_tokens, attention_mask=None,
                        temperature=0.0, generator=None, eos_token_id=None) -> GenerationResult:
    """Batched speculative decoding: every row drafts γ tokens, rows accept different counts."""
    temperature = check_temperature(temperature)
    check_same_vocab(target, draft)
    prompts = batch_prompts(target, input_ids, attention_mask, max_new_tokens, extra=gamma + 1)
    run = _Run(target, prompts, max_new_tokens, temperature, generator, eos_token_id)
    draft_lm = BatchedCachedLM(draft, pad_token_id(target))
    draft_lm.prefill(prompts)
    # Tokens the draft has not seen yet, right-aligned: [_, first token]; after an iteration
    # whose drafts all passed, [last draft, bonus] (the last draft is never fed to the draft).
    unseen = torch.stack([run.pending, run.pending], 1)
    unseen_valid = torch.tensor([[False, True]], device=run.device).expand(len(prompts), 2)
    while (keep := run.drop_finished(draft_lm)) is not None:
        unseen, unseen_valid = unseen[keep], unseen_valid[keep]
        draft_start = time.perf_counter()
        draft_ids, draft_rows = [], []
        for j in range(gamma):
            logits = draft_lm.forward(unseen, unseen_valid, keep=1)[:, -1]  # [A, V]
            draft_rows.append(logits_to_probs(logits, temperature))
            draft_ids.append(run.draw(draft_rows[-1]))
            unseen, unseen_valid = draft_ids[-1].unsqueeze(1), None
        draft_s = time.perf_counter() - draft_start
        num_rows = run.pending.shape[0]
        draft_ids = torch.stack(draft_ids, 1) if gamma else run.pending.new_zeros(num_rows, 0)
        draft_probs = torch.stack(draft_rows, 1) if gamma else torch.zeros(
            num_rows, 0, draft_lm.vocab_size, device=run.device)
        num_drafts = torch.full((num_rows,), gamma, dtype=torch.long, device=run.device)

        verdict = run.verify(draft_ids, draft_probs, num_drafts, draft_s)
        if gamma:
            # The draft fed its first γ−1 drafts; drop the rejected ones among them.
            draft_lm.rollback((gamma - 1) - verdict.num_accepted.clamp(max=gamma - 1))
            all_passed = verdict.num_accepted == gamma
            unseen = torch.stack([draft_ids[:, -1], run.pending], 1)
            unseen_valid = torch.stack([all_passed, torch.ones_like(all_passed)], 1)
    return run.result("speculative", draft_lm)


def prompt_lookup_batched(target, input_ids, *, num_pred, max_new_tokens, attention_mask=None,
                          ngram_max=3, ngram_min=1, temperature=0.0, generator=None,
                          eos_token_id=None) -> GenerationResult:
    """Batched prompt lookup: each row copies up to `num_pred` tokens from its own text."""
    temperature = check_temperature(temperature)
    prompts = batch_prompts(target, input_ids, attention_mask, max_new_tokens, extra=num_pred + 1)
    run = _Run(target, prompts, max_new_tokens, temperature, generator, eos_token_id)
    sequences = [list(p) + e for p, e in zip(prompts, run.trace[0].info["emitted"])]
    while run.drop_finished() is not None:
        lookup_start = time.perf_counter()
        found = [ngram_lookup(sequences[row], n_max=ngram_max, n_min=ngram_min, k=num_pred).draft
                 for row in run.row_ids]
        width = max(len(d) for d in found)
        draft_ids = torch.tensor([d + [0] * (width - len(d)) for d in found], dtype=torch.long,
                                 device=run.device).view(len(found), width)
        num_drafts = torch.tensor([len(d) for d in found], dtype=torch.long, device=run.device)
        # A copied draft is certain: q is one-hot (padding columns are never verified).
        draft_probs = torch.zeros(len(found), width, run.target_lm.vocab_size,
                                  device=run.device).scatter_(-1, draft_ids.unsqueeze(-1), 1.0)
        draft_s = time.perf_counter() - lookup_start

        run.verify(draft_ids, draft_probs, num_drafts, draft_s)
        for row, emitted in zip(run.trace[-1].info["rows"], run.trace[-1].info["emitted"]):
            sequences[row] += emitted
    return run.result("prompt_lookup")
