"""What every generation loop shares: input checks, stopping rules, results and traces.

A result holds `.tokens` (one list of new ids per row), `.stats` (counters and wall time) and
`.trace` (one `Iteration` per loop step: what was drafted, with q, p and the acceptance
probability, and what was emitted and why). Nothing here runs a model.
"""

import time
from dataclasses import asdict, dataclass, field

import torch


@dataclass
class DraftedToken:
    token: int
    q: float  # draft probability of the token (1.0 for a copied prompt-lookup draft)
    p: float  # target probability of the token
    accept_prob: float  # min(1, p/q)
    overlap: float  # Σ min(p, q) at this position: the chance that *a* draft token passes
    status: str  # "accepted", "rejected" or "unverified" (after the first rejection)


@dataclass
class EmittedToken:
    token: int
    kind: str  # "accepted" (a draft), "resampled" (from the residual), "bonus" or "target"


@dataclass
class Iteration:
    drafted: list = field(default_factory=list)  # [DraftedToken]
    emitted: list = field(default_factory=list)  # [EmittedToken]
    draft_s: float = 0.0
    target_s: float = 0.0
    verify_s: float = 0.0
    info: dict = field(default_factory=dict)  # method-specific: n-gram source, Jacobi guesses


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

    @property
    def acceptance_rate(self) -> float:
        """Accepted / drafted (NaN when nothing was drafted)."""
        return self.accepted / self.drafted if self.drafted else float("nan")

    @property
    def tokens_per_forward(self) -> float:
        """New tokens per target forward: 1.0 for autoregressive decoding."""
        return self.new_tokens / self.target_forwards if self.target_forwards else float("nan")

    def as_dict(self) -> dict:
        return {**asdict(self), "acceptance_rate": self.acceptance_rate,
                "tokens_per_forward": self.tokens_per_forward}


@dataclass
class GenerationResult:
    method: str
    tokens: list  # [[int]]: new token ids, one list per row
    stats: Stats
    trace: list  # [Iteration]

    def text(self, tokenizer, row: int = 0) -> str:
        return tokenizer.decode(self.tokens[row], skip_special_tokens=True)


def prompt_tokens(model, input_ids, max_new_tokens: int) -> list:
    """Validate a `[1, L]` prompt and the length budget; return the prompt as a list of ids."""
    if not isinstance(input_ids, torch.Tensor) or input_ids.dtype != torch.long:
        raise ValueError("input_ids must be a LongTensor of shape [1, L] (tokenizer(..., "
                         "return_tensors='pt')['input_ids'])")
    if input_ids.dim() != 2 or input_ids.shape[0] != 1:
        raise ValueError(f"input_ids must have shape [1, L] (one prompt), got "
                         f"{list(input_ids.shape)}")
    if input_ids.shape[1] == 0:
        raise ValueError("input_ids is empty: the prompt needs at least one token")
    if int(max_new_tokens) != max_new_tokens or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an integer >= 1, got {max_new_tokens}")
    vocab = model.get_output_embeddings().weight.shape[0]
    if input_ids.min() < 0 or input_ids.max() >= vocab:
        raise ValueError(f"input_ids must hold ids in [0, {vocab}), the model's vocabulary")
    context = getattr(model.config, "max_position_embeddings", None)
    length = input_ids.shape[1]
    if context is not None and length + max_new_tokens > context:
        raise ValueError(f"prompt of {length} tokens + max_new_tokens={max_new_tokens} exceeds "
                         f"the model's context of {context} tokens; shorten the prompt or "
                         f"lower max_new_tokens")
    return input_ids[0].tolist()


def check_same_vocab(target, draft) -> None:
    """The draft must score the same vocabulary as the target, row for row."""
    target_vocab = target.get_output_embeddings().weight.shape[0]
    draft_vocab = draft.get_output_embeddings().weight.shape[0]
    if target_vocab != draft_vocab:
        raise ValueError(f"draft vocabulary ({draft_vocab} rows) differs from the target's "
                         f"({target_vocab}); speculative decoding needs one shared tokenizer")


def check_positive_int(name: str, value, minimum: int) -> int:
    if int(value) != value or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def eos_token_ids(model, eos_token_id=None) -> set:
    """EOS ids from the argument, else the generation config, else the model config."""
    if eos_token_id is None:
        eos_token_id = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos_token_id is None:
        eos_token_id = getattr(model.config, "eos_token_id", None)
    if eos_token_id is None:
        return set()
    return {int(eos_token_id)} if isinstance(eos_token_id, int) else {int(t) for t in eos_token_id}


def cut_at_eos(tokens: list, eos_ids: set) -> list:
    """Keep tokens up to and including the first EOS: [4, 2, 7] with EOS 2 -> [4, 2]."""
    for i, token in enumerate(tokens):
        if token in eos_ids:
            return tokens[:i + 1]
    return tokens


class Output:
    """The growing sequence and the stopping rules: EOS (kept) or exactly max_new_tokens."""

    def __init__(self, prompt: list, max_new_tokens: int, eos_ids: set):
        self.sequence = list(prompt)
        self.new_tokens: list = []
        self.max_new_tokens = max_new_tokens
        self.eos_ids = eos_ids
        self.finished = False

    @property
    def remaining(self) -> int:
        return 0 if self.finished else self.max_new_tokens - len(self.new_tokens)

    @property
    def done(self) -> bool:
        return self.remaining == 0

    def extend(self, tokens: list) -> list:
        """Append what may still be emitted; return those tokens."""
        kept = cut_at_eos(list(tokens)[:self.remaining], self.eos_ids)
        self.sequence += kept
        self.new_tokens += kept
        if kept and kept[-1] in self.eos_ids:
            self.finished = True
        return kept


def finish_stats(stats: Stats, start: float, out: Output, trace: list, target_lm,
                 draft_lm=None) -> None:
    """Fill the totals every method reports once its loop has ended."""
    stats.wall_s = time.perf_counter() - start
    stats.new_tokens, stats.iterations = len(out.new_tokens), len(trace)
    stats.target_forwards, stats.target_s = target_lm.num_forwards, target_lm.forward_seconds
    if draft_lm is not None:
        stats.draft_forwards, stats.draft_s = draft_lm.num_forwards, draft_lm.forward_seconds
