"""`NgramDrafter`: prompt lookup (Saxena 2023) as a drafter: copy what followed the tail n-gram.

Each row keeps its text on the host (prompt + emitted tokens) and drafts with `ngram_lookup`;
the copy is deterministic, so the proposal carries no probabilities (q is one-hot) and
`verify` keeps a copied token x with probability p(x). No forwards, nothing to roll back.
With `branches=b > 1` it proposes a token tree instead: up to b different continuations
(`ngram_continuations`: other earlier occurrences, shorter n-grams), shared starts merged.
"""

import time

import torch

from ..core.args import check_int
from ..core.ngram import ngram_continuations, ngram_lookup
from ..core.tree import trie
from .base import Drafter, Proposal, Step


class NgramDrafter(Drafter):
    """Draft up to k tokens per row by matching the longest tail n-gram (n_max down to n_min)."""

    def __init__(self, n_max: int = 3, n_min: int = 1, *, branches: int = 1):
        self.n_min = check_int("n_min", n_min, 1)
        self.n_max = check_int("n_max", n_max, self.n_min)
        self.branches = check_int("branches", branches, 1)
        self.seconds = 0.0

    def __repr__(self) -> str:
        tree = "" if self.branches == 1 else f", branches={self.branches}"
        return f"NgramDrafter(n_max={self.n_max}, n_min={self.n_min}{tree})"

    def start(self, target, prompts, pending, *, eos_ids, features=None) -> None:
        self.eos_ids = eos_ids
        self.device = pending.device
        self.sequences = [list(p) for p in prompts]  # the pending token is the prompt's last
        self.seconds = 0.0

    def propose(self, max_drafts, *, width, temperature, generator) -> Proposal:
        if self.branches > 1:
            return self.propose_tree(max_drafts)
        start = time.perf_counter()
        found, info = [], []
        for sequence, k in zip(self.sequences, max_drafts.tolist()):
            match = ngram_lookup(sequence, n_max=self.n_max, n_min=self.n_min, k=k)
            found.append(cut_after_eos(match.draft, self.eos_ids))
            info.append({"ngram_size": match.ngram_size, "match_start": match.match_start,
                         "source_start": match.source_start})
        width = max((len(d) for d in found), default=0)
        token_ids = torch.tensor([d + [0] * (width - len(d)) for d in found], dtype=torch.long,
                                 device=self.device).view(len(found), width)
        num_drafts = torch.tensor([len(d) for d in found], dtype=torch.long, device=self.device)
        self.seconds += time.perf_counter() - start
        return Proposal(token_ids, num_drafts, None, info)

    def propose_tree(self, max_drafts) -> Proposal:
        """Per row, the trie of its continuations (each cut after an EOS and at the row's
        budget, which bounds the depth)."""
        start = time.perf_counter()
        rows = []
        for sequence, k in zip(self.sequences, max_drafts.tolist()):
            drafts = [d.draft for d in ngram_continuations(
                sequence, n_max=self.n_max, n_min=self.n_min, k=k, limit=self.branches)] if k else []
            rows.append(trie([cut_after_eos(d, self.eos_ids) for d in drafts]))
        width = max((len(tokens) for tokens, _ in rows), default=0)
        token_ids = torch.zeros(len(rows), width, dtype=torch.long)
        parents = torch.full((len(rows), width), -1, dtype=torch.long)
        for b, (tokens, tree) in enumerate(rows):
            token_ids[b, :len(tokens)], parents[b, :len(tree)] = (torch.tensor(tokens),
                                                                  torch.tensor(tree))
        num_drafts = torch.tensor([len(tokens) for tokens, _ in rows], dtype=torch.long)
        self.seconds += time.perf_counter() - start
        return Proposal(token_ids.to(self.device), num_drafts.to(self.device), None,
                        [{"branches": len(set(range(len(t))) - set(tree))}  # leaves
                         for t, tree in rows], parents.to(self.device))

    def update(self, step: Step) -> None:
        for sequence, emitted in zip(self.sequences, step.emitted):
            sequence += emitted

    def select_rows(self, keep) -> None:
        self.sequences = [self.sequences[i] for i in keep.tolist()]

    @property
    def forward_seconds(self) -> float:
        return self.seconds


def cut_after_eos(draft: list, eos_ids) -> list:
    """Nothing after an EOS could be emitted: [5, eos, 6] -> [5, eos]."""
    for j, token in enumerate(draft):
        if token in eos_ids:
            return draft[:j + 1]
    return draft
