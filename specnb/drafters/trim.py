"""Trim a static token tree, each iteration, to the nodes that pay for their place.

A static tree such as (4, 2, 1) scores 8 tokens in every target forward. On a CPU a wider
forward costs more (t(k)/t(1) rises with k, by as much as the CPU's kernels make it:
data/results/latency-cpu-*.json), while what a node adds depends on the iteration:
when the head is sure of its best guess, its runners-up are almost never the target's token;
when it is unsure, the depths below its best guess are rarely reached. So the drafter drafts the
whole tree, then keeps the sub-tree with the most expected tokens per unit of time.

The head's own law estimates each node's chance. At T = 0 a node of depth d and rank r is kept
when the best nodes above it were kept and its token is the target's choice; with q_{d,r} the
head's probability of that token after its parent (an estimate as good as the head is
calibrated; the shipped head roughly is, on the eval prompts), a sub-shape
w' (w'_d <= w_d nodes at depth d, the best first) yields

    E(w') = 1 + sum_d (prod_{j<d} q_{j,1}) * sum_{r <= w'_d} q_{d,r}     tokens per iteration

at a cost of D c + t(1 + sum_d w'_d) / t(1) one-token forwards (D c: the head's steps, already
paid). `best_widths` returns the w' that maximises their ratio; a batch shares one shape (one
forward is as wide as its widest row), chosen for the batch's summed tokens.

Exactness is untouched: what is kept depends on the draft alone, and verification checks
whatever tree it is given (`specnb.core.tree_verify`), at any temperature.
"""

import itertools
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TreeCost:
    """What an iteration costs on this machine, in one-token target forwards: `checking[k - 1]`
    = t(k)/t(1) for k = 1, 2, ... (a forward over k tokens; non-decreasing, extended linearly
    past its end) and `per_depth` = c, one step of the head."""

    checking: tuple
    per_depth: float

    def __post_init__(self):
        checking = self.checking
        if not isinstance(checking, (tuple, list)) or len(checking) < 2 or any(
                isinstance(x, bool) or not isinstance(x, (int, float)) or not x > 0
                for x in checking):
            raise ValueError(f"checking must be t(k)/t(1) for k = 1, 2, ...: at least two "
                             f"positive numbers, got {checking!r}")
        if any(b < a for a, b in zip(checking, checking[1:])):
            raise ValueError(f"checking must be non-decreasing (a wider forward never costs "
                             f"less), got {checking!r}")
        if isinstance(self.per_depth, bool) or not isinstance(self.per_depth, (int, float)) \
                or not self.per_depth >= 0:
            raise ValueError(f"per_depth must be a number >= 0 (c, a head step over a one-token "
                             f"target forward), got {self.per_depth!r}")
        object.__setattr__(self, "checking", tuple(float(x) for x in checking))

    def forward(self, tokens: int) -> float:
        """t(tokens)/t(1); past the measured end, the last step's slope continues."""
        last = len(self.checking)
        if tokens <= last:
            return self.checking[tokens - 1]
        return self.checking[-1] + (tokens - last) * (self.checking[-1] - self.checking[-2])


def sub_shapes(widths: tuple) -> list:
    """Every shape within `widths`: each depth keeps its best 0..w_d nodes, and a depth with
    none ends the tree. Example: (2, 1) -> (), (1,), (1, 1), (2,), (2, 1)."""
    shapes = [()]
    for depth in range(1, len(widths) + 1):
        shapes += itertools.product(*(range(1, w + 1) for w in widths[:depth]))
    return sorted(shapes)


def best_widths(probs: list, cost: TreeCost) -> tuple:
    """The sub-shape of the drafted tree with the most expected tokens per unit of time.

    `probs[d]` is `[A, w_d]`: per row, the head's probability of its rank-1..w_d tokens at depth
    d (after the best node of depth d - 1), 0 where a row drafts nothing there. A batch of A
    rows scores A (1 + nodes) tokens in its forward. One host read.

    Example: probs [[[0.9, 0.05]], [[0.8]]] with `TreeCost((1, 1.2, 1.2, 1.4), 0)` keeps
    (1, 1): 2.62 tokens for 1.2 forwards; the runner-up at depth 1 would add 0.05 tokens for
    0.2 forwards more."""
    widths = tuple(p.shape[1] for p in probs)
    if not widths:
        return ()
    rows = probs[0].shape[0]
    reach = torch.ones_like(probs[0][:, 0])  # chance that a row's walk gets to depth d
    gains = []
    for p in probs:
        # gains[d][k]: the batch's expected tokens from the best k nodes of depth d
        gains.append(torch.cat([p.new_zeros(1), (reach.unsqueeze(1) * p).sum(0).cumsum(0)]))
        reach = reach * p[:, 0]
    flat = torch.cat(gains).tolist()  # the one host read
    starts = list(itertools.accumulate((w + 1 for w in widths), initial=0))
    gain = [flat[s:s + w + 1] for s, w in zip(starts, widths)]
    head = len(widths) * cost.per_depth

    def value(shape):
        tokens = rows + sum(gain[d][k] for d, k in enumerate(shape))
        return tokens / (head + cost.forward(rows * (1 + sum(shape))))

    return max(sub_shapes(widths), key=value)
