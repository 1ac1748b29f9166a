"""What every generation method returns: tokens per row, counters, and a per-row trace.

A result holds `.tokens` (one list of new ids per row), `.stats` (counters and wall time, for
the whole batch) and, when the run was asked for one (`trace=True`), `.trace`: one `Iteration`
per row and loop step, with what that row drafted (token, q, p, min(1, p/q), Σ min(p, q),
status) and emitted (and why). A single prompt is a batch of one, so its trace is simply its
steps. `result.row(b)` is row b on its own.
`BatchOutput` is the device buffer the loops append to. Nothing here runs a model.
"""

from dataclasses import dataclass, field

import torch


@dataclass
class DraftedToken:
    token: int
    q: float  # draft probability of the token (1.0 for a copied prompt-lookup draft)
    p: float  # target probability of the token
    accept_prob: float  # min(1, p/q)
    overlap: float  # Σ min(p, q) at this position: the chance that *a* draft token passes
    status: str  # "accepted", "rejected" or "unverified" (after the first rejection)
    parent: int | None = None  # in a token tree: the node it continues (-1: the pending token)


@dataclass
class EmittedToken:
    token: int
    kind: str  # "accepted" (a draft), "resampled" (from the residual), "bonus" or "target"


@dataclass
class Iteration:
    drafted: list = field(default_factory=list)  # [DraftedToken]
    emitted: list = field(default_factory=list)  # [EmittedToken]
    draft_s: float = 0.0  # these three are per loop step, shared by the rows of the batch
    target_s: float = 0.0
    verify_s: float = 0.0
    info: dict = field(default_factory=dict)  # method-specific: n-gram source, Jacobi guesses
    row: int = 0  # which prompt of the batch
    step: int = 0  # which loop step: 1, 2, ... (the cache's fill with the prompt comes before
    # step 1 and is not in the trace; Jacobi's step 0 is its first forward, the prompt's too)
    gamma: int | None = None  # the γ this row's schedule asked for (before budget caps)


@dataclass
class Stats:
    new_tokens: int = 0
    iterations: int = 0
    target_forwards: int = 0
    draft_forwards: int = 0
    drafted: int = 0
    accepted: int = 0
    wall_s: float = 0.0
    target_s: float = 0.0
    draft_s: float = 0.0
    # The target's seconds in the decoding steps alone (the prompt's forward left out), and
    # their number: a decoding step's mean cost without a trace.
    decoding_target_s: float = 0.0
    decoding_steps: int = 0
    # What a serving engine counts (vLLM, vllm/v1/spec_decode/metrics.py): one "draft" per row
    # and step that drafted anything, and per draft position i, how many of those drafts had
    # more than i tokens accepted.
    drafting_steps: int = 0
    accepted_per_position: list = field(default_factory=list)

    @classmethod
    def summed(cls, stats) -> "Stats":
        """Several runs' counters and seconds added up, e.g. one method over a set of prompts
        (its engine metrics are then the set's, as an engine's log aggregates requests)."""
        total = cls()
        for one in stats:
            for name, value in vars(one).items():
                if name == "accepted_per_position":
                    width = max(len(total.accepted_per_position), len(value))
                    total.accepted_per_position = [
                        (total.accepted_per_position[i] if i < len(total.accepted_per_position)
                         else 0) + (value[i] if i < len(value) else 0) for i in range(width)]
                else:
                    setattr(total, name, getattr(total, name) + value)
        return total

    @property
    def mean_acceptance_length(self) -> float:
        """vLLM's "mean acceptance length": 1 + accepted / drafts, the bonus (or resampled) token
        counted as vLLM does (NaN when nothing was drafted)."""
        return 1 + self.accepted / self.drafting_steps if self.drafting_steps else float("nan")

    @property
    def per_position_acceptance(self) -> list:
        """vLLM's "per-position acceptance rate": for draft position i (from 0), the share of
        drafts that accepted more than i tokens."""
        return [n / self.drafting_steps for n in self.accepted_per_position] \
            if self.drafting_steps else []

    @property
    def draft_acceptance_rate(self) -> float:
        """vLLM's "draft acceptance rate": accepted / drafted tokens (`draft_yield`)."""
        return self.draft_yield

    def engine_metrics(self) -> dict:
        """The figures vLLM logs ("SpecDecoding metrics"), by its formulas, from this run."""
        return {"mean_acceptance_length": self.mean_acceptance_length,
                "per_position_acceptance": self.per_position_acceptance,
                "draft_acceptance_rate": self.draft_acceptance_rate,
                "drafts": self.drafting_steps, "draft_tokens": self.drafted,
                "accepted_tokens": self.accepted}

    @property
    def draft_yield(self) -> float:
        """Accepted / drafted, unverified drafts included (NaN when nothing was drafted).

        Not α̂: drafts after a row's first rejection count as not accepted here.
        """
        return self.accepted / self.drafted if self.drafted else float("nan")

    @property
    def tokens_per_forward(self) -> float:
        """New tokens per target forward: 1.0 for autoregressive decoding."""
        return self.new_tokens / self.target_forwards if self.target_forwards else float("nan")



class NoTrace(AttributeError):
    """`result.trace` of a run that recorded none (an AttributeError, so `getattr` and
    `hasattr` treat it as absent)."""


@dataclass
class GenerationResult:
    method: str
    tokens: list  # [[int]]: new token ids, one list per row
    stats: Stats
    iterations: list | None = None  # [Iteration], every row's steps; None: no trace recorded

    @property
    def trace(self) -> list:
        """Every row's steps (`Iteration`), when the run was asked for them (`trace=True`)."""
        if self.iterations is None:
            raise NoTrace(f"this {self.method} run recorded no trace: call it with trace=True "
                          f"(the trace costs the loop host work every step, so it is off unless "
                          f"asked for)")
        return self.iterations

    def text(self, tokenizer, row: int = 0) -> str:
        return tokenizer.decode(self.tokens[row], skip_special_tokens=True)

    def row(self, index: int) -> "GenerationResult":
        """Row `index` alone: its tokens and trace (the stats stay the batch's)."""
        if not 0 <= index < len(self.tokens):
            raise ValueError(f"row must be in [0, {len(self.tokens)}), got {index}")
        return GenerationResult(self.method, [self.tokens[index]], self.stats,
                                None if self.iterations is None else
                                [it for it in self.iterations if it.row == index])


class BatchOutput:
    """New tokens of B rows in one `[B, max_new_tokens + 1]` buffer, -1 where nothing was kept."""

    def __init__(self, batch: int, max_new_tokens: int, eos_ids: set, device):
        # One spare column past the budget receives every write that is not kept, so `extend`
        # needs no boolean indexing (which would wait for the device to count the kept tokens).
        self.buffer = torch.full((batch, max_new_tokens + 1), -1, dtype=torch.long, device=device)
        self.count = torch.zeros(batch, dtype=torch.long, device=device)  # tokens kept per row
        self.finished = torch.zeros(batch, dtype=torch.bool, device=device)
        self.max_new_tokens = max_new_tokens
        self.eos = torch.tensor(sorted(eos_ids), dtype=torch.long, device=device)

    def extend(self, rows: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Append `tokens [A, T]` (-1 padded on the right) to `rows [A]`; return kept counts [A].

        Example: budget 3, row holds [4], tokens [7, 2, 9] with EOS 2 -> keeps [7, 2], finished.
        """
        width = tokens.shape[1]
        slot = self.count[rows].unsqueeze(1) + torch.arange(width, device=tokens.device)  # [A, T]
        is_eos = torch.isin(tokens, self.eos)
        eos_count = is_eos.long()
        after_eos = eos_count.cumsum(1) > eos_count  # an EOS strictly before this column
        keep = (tokens >= 0) & (slot < self.max_new_tokens) & ~after_eos
        row_index = rows.unsqueeze(1).expand_as(slot)
        self.buffer.index_put_((row_index, torch.where(keep, slot, self.max_new_tokens)),
                               torch.where(keep, tokens, -1))
        kept = keep.sum(1)
        self.count[rows] += kept
        self.finished[rows] |= (self.count[rows] >= self.max_new_tokens) | (is_eos & keep).any(1)
        return kept

    def tokens(self) -> list:
        """One list of new ids per row."""
        return [row[:n].tolist() for row, n in zip(self.buffer.cpu(), self.count.cpu().tolist())]


def cut_at_eos(tokens: list, eos_ids: set) -> list:
    """Keep tokens up to and including the first EOS: [4, 2, 7] with EOS 2 -> [4, 2]."""
    for i, token in enumerate(tokens):
        if token in eos_ids:
            return tokens[:i + 1]
    return tokens
