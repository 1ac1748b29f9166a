"""`MixedDrafter(*drafters)`: several drafters' guesses merged into one token tree.

Each drafter proposes for every row (a chain or a tree); every branch of every proposal goes
into one trie per row, so a prompt that repeats itself gets prompt lookup's long copied runs
and an open-ended one the feature head's guesses, in the same target forward, with no switch
to tune. A guess two drafters share is one node.

    head:    a b | a c          mixed:  a ── b          NgramDrafter: a d e
    n-gram:  a d e                      ├── c
                                        └── d ── e

Every branch costs checking, kept or not: give the n-gram part `n_min=2` where answers are
open-ended (there a 1-token match adds a long copied branch that is rarely kept, and the mixed
drafter can fall below the head alone: the mixed drafter's records,
data/results/bench-cpu-mixed*.json, shown in RESULTS.md).

The merged candidates are point masses, so the parts must propose deterministic drafts (no
law q): `NgramDrafter`, a `FeatureDrafter` with a `tree`, or at T = 0 any drafter (a chain's
guesses are then its argmax, and greedy verification reads no q). After
verification every part hears the same `Step` (what each row kept), so a part's own state may
depend only on that: `ModelDrafter`, which rolls back what it drafted itself, is refused.
"""

import torch

from ..core.tree import branches, trie
from .base import Drafter, Proposal
from .model import ModelDrafter


class MixedDrafter(Drafter):
    def __init__(self, *drafters):
        if len(drafters) < 2:
            raise ValueError(f"MixedDrafter merges two drafters or more, got {len(drafters)}")
        for drafter in drafters:
            if not isinstance(drafter, Drafter):
                raise ValueError(f"MixedDrafter takes specnb.drafters.Drafter objects, got "
                                 f"{type(drafter).__name__}")
            if isinstance(drafter, (ModelDrafter, MixedDrafter)):
                raise ValueError(f"{type(drafter).__name__} cannot be part of a MixedDrafter: "
                                 f"its state follows its own drafts, not the merged tree")
        layers = {tuple(d.feature_layers) for d in drafters if d.feature_layers}
        if len(layers) > 1:
            raise ValueError(f"the parts read different target layers {sorted(layers)}; "
                             f"a MixedDrafter can ask the target for one set only")
        self.drafters = drafters
        self.feature_layers = layers.pop() if layers else ()

    def __repr__(self) -> str:
        return f"MixedDrafter({', '.join(map(repr, self.drafters))})"

    def start(self, target, prompts, pending, *, eos_ids, features=None) -> None:
        self.device = pending.device
        for drafter in self.drafters:
            drafter.start(target, prompts, pending, eos_ids=eos_ids,
                          features=features if drafter.feature_layers else None)

    def max_drafts(self, lengths: list) -> list:
        caps = [d.max_drafts(lengths) for d in self.drafters]
        return [None if all(c is None for c in row) else min(c for c in row if c is not None)
                for row in zip(*caps)]

    def propose(self, max_drafts, *, width, temperature, generator) -> Proposal:
        rows = max_drafts.shape[0]
        paths = [[] for _ in range(rows)]  # per row: (branch, part index)
        for index, drafter in enumerate(self.drafters):
            proposal = drafter.propose(max_drafts, width=width, temperature=temperature,
                                       generator=generator)
            if proposal.probs is not None and temperature > 0:
                raise ValueError(f"{drafter!r} proposed drafts drawn from a law q at "
                                 f"temperature {temperature}; a MixedDrafter merges "
                                 f"deterministic guesses only: give a FeatureDrafter a tree "
                                 f"(FeatureDrafter(head.head, tree=(2,))) or decode at "
                                 f"temperature 0, where every drafter's guesses are its argmax")
            tokens, counts = proposal.token_ids.tolist(), proposal.num_drafts.tolist()
            parents = None if proposal.parents is None else proposal.parents.tolist()
            for b in range(rows):
                row = tokens[b][:counts[b]]
                tree = list(range(-1, len(row) - 1)) if parents is None else parents[b][:counts[b]]
                paths[b] += [(branch, index) for branch in branches(row, tree)]
        merged = [trie([branch for branch, _ in row]) for row in paths]
        nodes = max((len(t) for t, _ in merged), default=0)
        token_ids = torch.zeros(rows, nodes, dtype=torch.long)
        parent_ids = torch.full((rows, nodes), -1, dtype=torch.long)
        info = []
        for b, (tokens, tree) in enumerate(merged):
            token_ids[b, :len(tokens)] = torch.tensor(tokens, dtype=torch.long)
            parent_ids[b, :len(tree)] = torch.tensor(tree, dtype=torch.long)
            # Which parts guessed each node (by index in `drafters`), for the trace.
            sources = {tuple(branch): set() for branch in branches(tokens, tree)}
            for branch, index in paths[b]:
                sources[tuple(branch)].add(index)
            info.append({"sources": [sorted(sources[tuple(branch)])
                                     for branch in branches(tokens, tree)]})
        num_drafts = torch.tensor([len(t) for t, _ in merged], dtype=torch.long)
        return Proposal(token_ids.to(self.device), num_drafts.to(self.device), None, info,
                        parent_ids.to(self.device))

    def update(self, step) -> None:
        for drafter in self.drafters:
            drafter.update(step)

    def select_rows(self, keep) -> None:
        for drafter in self.drafters:
            drafter.select_rows(keep)

    @property
    def num_forwards(self) -> int:
        return sum(d.num_forwards for d in self.drafters)

    @property
    def forward_seconds(self) -> float:
        return sum(d.forward_seconds for d in self.drafters)
