"""What proposes tokens to the speculative loop: one contract (`Drafter`), several drafters.

    ModelDrafter(model)          a standalone draft LM sharing the target's vocabulary
    NgramDrafter(n_max, n_min)   prompt lookup: copies of what followed the tail n-gram
    FeatureDrafter(head)         a one-layer head reading the target's hidden states (EAGLE-3)
    MixedDrafter(*drafters)      several drafters' guesses merged into one token tree
    LookaheadDrafter(W, N, G)    lookahead decoding: a Jacobi window and the n-grams it leaves
    NoDrafter()                  proposes nothing: the loop becomes autoregressive decoding

The two that draw from a law q take `stop_below=` (e.g. 0.4): a row stops drafting after a
token its draft doubts (`Drafter.stops`), which saves draft forwards and checking width.
Token trees: `FeatureDrafter(head, tree=(4, 2))` (a fixed shape) or `FeatureDrafter(head,
dynamic=(8, 4, 4))` (EAGLE-2's tree, grown from the head's probabilities: `DynamicTree`); a
fixed shape trimmed each iteration to the nodes worth this machine's forward: `trim=TreeCost(
...)`; `NgramDrafter(branches=3)`, `MixedDrafter`; `ModelDrafter` drafts chains only (a tree
would need its own cache per branch).

What goes here: what proposes tokens, built on `specnb.core` only. What does not: the loop that
verifies them (`specnb.methods`), loading or training the models behind them (`specnb.models`,
`specnb.training`).
"""

import torch

from .base import Drafter, Proposal, Step
from .dynamic_tree import DynamicTree
from .feature import FeatureDrafter
from .head import FeatureHead, HeadConfig
from .lookahead import LookaheadDrafter
from .mixed import MixedDrafter
from .model import ModelDrafter
from .ngram import NgramDrafter
from .trim import TreeCost


class NoDrafter(Drafter):
    """Proposes nothing, ever: each loop step then emits one token of the target's own."""

    def start(self, target, prompts, pending, *, eos_ids, features=None) -> None:
        self.device = pending.device

    def propose(self, max_drafts, *, width, temperature, generator) -> Proposal:
        rows = max_drafts.shape[0]
        return Proposal(torch.zeros(rows, 0, dtype=torch.long, device=self.device),
                        torch.zeros(rows, dtype=torch.long, device=self.device))

    def update(self, step: Step) -> None:
        pass

    def select_rows(self, keep) -> None:
        pass


__all__ = ["Drafter", "DynamicTree", "FeatureDrafter", "FeatureHead", "HeadConfig",
           "LookaheadDrafter", "MixedDrafter", "ModelDrafter", "NgramDrafter", "NoDrafter",
           "Proposal", "Step", "TreeCost"]
