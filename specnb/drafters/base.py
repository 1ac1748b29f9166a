"""The drafter contract: what the one speculative loop asks of anything that proposes tokens.

Per iteration the loop calls, for the A rows still running:

    propose(max_drafts [A], temperature, generator) -> Proposal   # up to max_drafts[b] tokens
    (one target forward over [pending, drafts], then `verify`)
    update(Step)   # what each row kept, the target's features if asked for; roll back

A drafter that wants the target's hidden states names the layers in `feature_layers`; the loop
then returns them from the target's forwards (`Step.features`), and only then. A drafter owns
its own state (a cache, host sequences) and rolls it back itself. `select_rows` drops finished
rows. Nothing here runs a model or verifies anything.
"""

from dataclasses import dataclass, field

import torch


@dataclass
class Proposal:
    """What a drafter proposes for A rows: `token_ids [A, K]`, `num_drafts [A]` (<= K; the
    columns past a row's count are padding) and the draft law `probs [A, K, V]`, or None for a
    deterministic proposal (q is then the one-hot of each token).

    `parents [A, K]` makes the proposal a token tree (`specnb.core.tree`): node j continues
    node `parents[b, j]`, or the pending token (-1). None: a chain, each draft after the last.
    Siblings are deterministic (probs None) or drawn independently of each other."""

    token_ids: torch.Tensor
    num_drafts: torch.Tensor
    probs: torch.Tensor | None = None
    info: list = field(default_factory=list)  # optional per-row notes for the trace
    parents: torch.Tensor | None = None


@dataclass
class Step:
    """What the loop tells drafters after verification, for the A rows that drafted.

    `tokens [A, K+1]`: each row's kept drafts then its next token, -1 after; `num_accepted [A]`;
    `emitted`: the same kept tokens on the host (one list per row, cut at EOS and budget);
    `features [A, K+1, L, H]`: the target's hidden states at the fed positions (the pending
    token, then the drafts; for a tree, the pending token then the accepted branch), or None
    when the drafter asked for none; `proposed_width`: K; `target_ids [A, K+1]`: the target's
    argmax at every fed column (the pending token, then each draft or tree node; -1 where a row
    had no distribution), or None unless the drafter sets `reads_target_ids` (lookahead reads
    its next Jacobi guesses there). `accepted`: `num_accepted` on the host (the loop has read
    it: a drafter that needs the counts reads them here, not from the device).
    """

    tokens: torch.Tensor
    num_accepted: torch.Tensor
    emitted: list
    features: torch.Tensor | None
    proposed_width: int
    target_ids: torch.Tensor | None = None
    accepted: list | None = None


def check_stop_below(stop_below):
    """None (draft every token the budget allows) or a confidence threshold in (0, 1]."""
    if stop_below is None:
        return None
    if isinstance(stop_below, bool) or not isinstance(stop_below, (int, float)) or \
            not 0 < stop_below <= 1:
        raise ValueError(f"stop_below must be None or a probability in (0, 1] (e.g. 0.4, "
                         f"transformers' default), got {stop_below!r}")
    return float(stop_below)


class Drafter:
    """Base class: subclasses implement `start`, `propose`, `update`, `select_rows`."""

    feature_layers: tuple = ()  # target hidden states this drafter reads (indices), none by default
    reads_target_ids: bool = False  # True: `Step.target_ids` holds the target's argmax per column
    # Early stop (drafters that draw from a law q): a row stops drafting after a token whose
    # q(token) < stop_below. See `stops`.
    stop_below: float | None = None

    def stops(self, token_ids, drawn, eos, *, q, logits, temperature) -> torch.Tensor:
        """`[A]` bool: rows whose token (`token_ids [A]`, drawn at index `drawn [A]` of the
        draft's `logits [A, V']` and law `q`) ends their drafting: an EOS, or (`stop_below`) a
        token the draft itself doubts: its probability under q, or at T = 0, where q is one-hot,
        under softmax(logits) (as transformers reads it), is below `stop_below`.

        Why the draft's confidence: where the draft gives its own token a low probability, the
        target disagrees far more often, so the tokens drafted after it would mostly be checked
        in vain, each at the price of a draft forward and a wider target forward.
        transformers' assisted generation stops on the same signal
        (`assistant_confidence_threshold`, 0.4 by default), so the two compare like for like.
        The rule reads only the draft's side, so the number of drafts is decided before the
        target is consulted and `verify` stays exact (any γ chosen that way is).
        """
        stop = torch.isin(token_ids, eos)
        if self.stop_below is not None:
            law = q if temperature > 0 else torch.softmax(logits.float(), -1)
            confidence = law.gather(1, drawn.clamp_min(0).unsqueeze(1)).squeeze(1)
            stop |= confidence < self.stop_below
        return stop

    def start(self, target, prompts: list, pending: torch.Tensor, *, eos_ids: set,
              features: torch.Tensor | None = None) -> None:
        """A new generation: `prompts` (lists of ids), each row's pending token `[B]` (its last
        prompt token, not yet fed to the target) and, if asked for, the target's features at
        the other prompt positions `[B, Lmax - 1, L, H]` (right-padded; None if all prompts
        are one token long)."""
        raise NotImplementedError

    def recommended(self, temperature: float = 0.0) -> tuple:
        """(drafter, γ) for `speculative(..., gamma=None)` at `temperature`; a drafter without
        a recommended setting asks for γ."""
        raise ValueError(f"{type(self).__name__} has no recommended setting: pass gamma (drafts "
                         f"per iteration, e.g. gamma=2)")

    def max_drafts(self, lengths: list) -> list:
        """How many tokens each row may draft given its length (pending token included);
        unlimited by default. A drafter with a context limit returns 0 past it."""
        return [None] * len(lengths)

    def propose(self, max_drafts: torch.Tensor, *, width: int, temperature: float,
                generator: torch.Generator | None) -> Proposal:
        raise NotImplementedError

    def update(self, step: Step) -> None:
        raise NotImplementedError

    def select_rows(self, keep: torch.Tensor) -> None:
        raise NotImplementedError

    # A drafter that runs a network keeps it in `self.lm` (a `BatchedCachedLM`). Its drafting
    # forwards are counted without the `fill_forwards` that fed it the prompts: ĉ divides
    # draft time by draft forwards.
    lm = None
    fill_forwards = 0

    @property
    def num_forwards(self) -> int:
        return self.lm.num_forwards - self.fill_forwards if self.lm is not None else 0

    @property
    def forward_seconds(self) -> float:
        return sum(self.lm.log.seconds[self.fill_forwards:]) if self.lm is not None else 0.0
