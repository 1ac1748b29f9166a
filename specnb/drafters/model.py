"""`ModelDrafter`: a standalone draft language model proposes γ tokens, one forward each.

The draft keeps its own ragged KV cache (`BatchedCachedLM`). What it has not seen yet waits in
`unseen`, right-aligned per row: after verification that is the target's next token, preceded
by the last draft when every draft passed (the last draft is proposed, never fed). Rejected
drafts that were fed are rolled back, row by row.

    iteration:  feed unseen -> d1, feed d1 -> d2, ..., feed d(K-1) -> dK   (K forwards)
    after:      row kept a drafts: roll back (K-1) - min(a, K-1); unseen = [dK if a = K] + next

`ModelDrafter(model, stop_below=0.4)` stops a row's drafting after a token the draft gives less
than 0.4 (`Drafter.stops`), as transformers' assistant does. It does not verify and does not
decide K: the loop does.
"""


import torch

from ..core.batch_kv import BatchedCachedLM
from ..core.host import reads_are_cheap
from ..core.sampler import draw, greedy_tokens, logits_to_probs
from .base import Drafter, Proposal, Step, check_stop_below

def pad_token_id(model) -> int:
    """The id fed in padding slots (never attended to, so any valid id works)."""
    for config in (getattr(model, "generation_config", None), model.config):
        value = getattr(config, "pad_token_id", None)
        if isinstance(value, int) and value >= 0:
            return value
    return 0

class ModelDrafter(Drafter):
    """Wrap a causal LM that shares the target's vocabulary as a drafter."""

    def __init__(self, model, *, stop_below=None):
        if not hasattr(model, "get_output_embeddings") or not hasattr(model, "config"):
            raise ValueError(f"ModelDrafter needs a transformers causal LM, got {type(model)}")
        self.model = model
        self.stop_below = check_stop_below(stop_below)
        self.context = getattr(model.config, "max_position_embeddings", None)
        self.lm = None

    def start(self, target, prompts, pending, *, eos_ids, features=None) -> None:
        self.lm = BatchedCachedLM(self.model, pad_token_id(target))
        self.eos = torch.tensor(sorted(eos_ids), dtype=torch.long, device=self.lm.device)
        # Feed all but the pending last token of the prompts that fit the draft's context;
        # longer rows never draft.
        self.lm.fill([p[:-1] if self.context is None or len(p) <= self.context else []
                      for p in prompts])
        alive = [self.context is None or len(p) <= self.context for p in prompts]
        self.alive = torch.tensor(alive, device=self.lm.device)
        self.unseen = pending.view(-1, 1)  # [A, U], right-aligned
        self.fill_forwards = self.lm.num_forwards
        self.unseen_valid = self.alive.view(-1, 1).clone()
        # The same on the host, so the draft's cache knows its lengths without a read: which
        # rows are alive, and how many of each row's unseen tokens are real (None: unknown).
        self.alive_host, self.unseen_counts = alive, [int(a) for a in alive]

    def max_drafts(self, lengths):
        # A draft at position L - 1 + j needs L - 1 + j < context: at most context - L + 1 drafts.
        # A row past the context never drafts again; it stops feeding the draft too.
        if self.context is None:
            self.alive_host = [True] * len(lengths)
            return [None] * len(lengths)
        # Lengths only grow, so a row past the context stays past it: the host list is the mask.
        self.alive_host = [length <= self.context for length in lengths]
        self.alive &= torch.tensor(self.alive_host, device=self.alive.device)
        return [max(0, self.context - length + 1) for length in lengths]

    def propose(self, max_drafts, *, width, temperature, generator) -> Proposal:
        rows = max_drafts.shape[0]
        device = self.lm.device
        if width == 0:
            return Proposal(torch.zeros(rows, 0, dtype=torch.long, device=device),
                            torch.zeros(rows, dtype=torch.long, device=device),
                            torch.zeros(rows, 0, self.lm.vocab_size, device=device))
        ids, probs = [], []
        stopped = torch.zeros(rows, dtype=torch.bool, device=device)  # drafted an EOS
        num_drafts = torch.zeros(rows, dtype=torch.long, device=device)
        feed, feed_valid, counts = self.unseen, self.unseen_valid, self.unseen_counts
        for j in range(width):
            logits = self.lm.forward(feed, feed_valid, keep=1, new_counts=counts)[:, -1]  # [A, V]
            step_probs, step_ids = self.draft_step(logits, temperature, generator)
            probs.append(step_probs)
            ids.append(step_ids)
            num_drafts += (~stopped & (j < max_drafts)).long()
            stopped |= self.stops(step_ids, step_ids, self.eos, q=step_probs, logits=logits,
                                  temperature=temperature)
            feed, feed_valid = ids[-1].unsqueeze(1), self.alive.unsqueeze(1)
            counts = [int(a) for a in self.alive_host]
            # Nothing after an EOS can be emitted, nor is anything drafted after a doubtful
            # token: stop once every row has stopped. Asking is a host read, free on a CPU but a
            # sync per draft on a GPU, so only the CPU asks (on a GPU the extra drafts are
            # never counted, verified nor emitted).
            if j + 1 < width and reads_are_cheap(self.lm.device) and bool(stopped.all()):
                break
        # A greedy draft is certain (q one-hot): no law goes to `verify`, which then builds
        # nothing V-wide for it.
        return Proposal(torch.stack(ids, 1), num_drafts,
                        None if probs[0] is None else torch.stack(probs, 1))

    def draft_step(self, logits, temperature, generator):
        """One draft position: the draft's law q `[A, V]` from its logits, and a token from q
        `[A]`; at T = 0 the argmax and q = None (its one-hot, never built). A drafter with
        another q overrides only this."""
        if temperature == 0:
            return None, greedy_tokens(logits)
        probs = logits_to_probs(logits, temperature)
        return probs, draw(probs, temperature, generator=generator, check=False)

    def update(self, step: Step) -> None:
        width, accepted = step.proposed_width, step.num_accepted
        next_token = step.tokens.gather(1, accepted.unsqueeze(1))  # [A, 1]
        alive = self.alive.unsqueeze(1)
        known = step.accepted is not None and self.unseen_counts is not None
        if width == 0:  # nothing was drafted: the next token joins what waits to be fed
            self.unseen = torch.cat([self.unseen, next_token], 1)
            self.unseen_valid = torch.cat([self.unseen_valid, alive], 1)
            self.unseen_counts = [c + int(a) for c, a in zip(self.unseen_counts, self.alive_host)] \
                if known else None
            return
        # The draft fed its first K-1 drafts; drop the rejected ones among them.
        self.lm.rollback(((width - 1) - accepted.clamp(max=width - 1)) * self.alive, counts=[
            ((width - 1) - min(a, width - 1)) * int(live)
            for a, live in zip(step.accepted, self.alive_host)] if known else None)
        self.unseen_counts = [(int(a == width) + 1) * int(live)
                              for a, live in zip(step.accepted, self.alive_host)] \
            if step.accepted is not None else None
        all_passed = accepted == width
        last_draft = step.tokens[:, width - 1:width].clamp_min(0)
        self.unseen = torch.cat([last_draft, next_token], 1)
        self.unseen_valid = torch.cat([all_passed.unsqueeze(1), alive], 1) & alive

    def select_rows(self, keep) -> None:
        self.lm.select_rows(keep)
        self.unseen, self.unseen_valid = self.unseen[keep], self.unseen_valid[keep]
        self.alive = self.alive[keep]
        self.unseen_counts = None  # read again from the device when next needed
