"""`NgramDrafter`: prompt lookup (Saxena 2023) as a drafter: copy what followed the tail n-gram.

Each row keeps its text on the host (prompt + emitted tokens) and drafts with `ngram_lookup`;
the copy is deterministic, so the proposal carries no probabilities (q is one-hot) and
`verify` keeps a copied token x with probability p(x). No forwards, nothing to roll back.
"""

import time

import torch

from ..core.args import check_int
from ..core.ngram import ngram_lookup
from .base import Drafter, Proposal, Step


class NgramDrafter(Drafter):
    """Draft up to k tokens per row by matching the longest tail n-gram (n_max down to n_min)."""

    def __init__(self, n_max: int = 3, n_min: int = 1):
        self.n_min = check_int("n_min", n_min, 1)
        self.n_max = check_int("n_max", n_max, self.n_min)
        self.seconds = 0.0

    def __repr__(self) -> str:
        return f"NgramDrafter(n_max={self.n_max}, n_min={self.n_min})"

    def start(self, target, prompts, pending, *, eos_ids, features=None) -> None:
        self.eos_ids = eos_ids
        self.device = pending.device
        self.sequences = [list(p) for p in prompts]  # the pending token is the prompt's last
        self.seconds = 0.0

    def propose(self, max_drafts, *, width, temperature, generator) -> Proposal:
        start = time.perf_counter()
        found, info = [], []
        for sequence, k in zip(self.sequences, max_drafts.tolist()):
            match = ngram_lookup(sequence, n_max=self.n_max, n_min=self.n_min, k=k)
            draft = match.draft
            for j, token in enumerate(draft):  # nothing after an EOS could be emitted
                if token in self.eos_ids:
                    draft = draft[:j + 1]
                    break
            found.append(draft)
            info.append({"ngram_size": match.ngram_size, "match_start": match.match_start,
                         "source_start": match.source_start})
        width = max((len(d) for d in found), default=0)
        token_ids = torch.tensor([d + [0] * (width - len(d)) for d in found], dtype=torch.long,
                                 device=self.device).view(len(found), width)
        num_drafts = torch.tensor([len(d) for d in found], dtype=torch.long, device=self.device)
        self.seconds += time.perf_counter() - start
        return Proposal(token_ids, num_drafts, None, info)

    def update(self, step: Step) -> None:
        for sequence, emitted in zip(self.sequences, step.emitted):
            sequence += emitted

    def select_rows(self, keep) -> None:
        self.sequences = [self.sequences[i] for i in keep.tolist()]

    @property
    def forward_seconds(self) -> float:
        return self.seconds
