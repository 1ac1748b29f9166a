"""A synthetic draft whose acceptance rate α is a dial: the target's own law, mixed with noise.

At every drafted position the draft runs the target itself (its own copy of the KV cache) to
get p, picks a noise token r uniformly from the vocabulary, and proposes from

    q = λ p + (1 − λ) δ_r,       λ = (α − p(r)) / (1 − p(r))   (clipped to [0, 1])

For this q, Σ_v min(p(v), q(v)) = λ (1 − p(r)) + p(r) = α exactly: each draft passes with
probability α, independently of every other, which is the assumption behind
E[tokens per iteration] = (1 − α^{γ+1}) / (1 − α). Verification stays exact whatever q is.
(Where p(r) > α, λ = 0 and that one position passes with p(r) > α; with a vocabulary of tens
of thousands of tokens that is rare.)

It is a measuring instrument, not a useful draft: it costs a full target forward per draft
token, so time it and it is always slower than autoregressive decoding. Count tokens per
target forward with it, never seconds. `emitted_per_iteration` does the counting.

Example: SyntheticDraft(target, alpha=0.8) with γ = 4 emits on average
(1 − 0.8^5) / 0.2 = 3.36 tokens per target forward.
"""

import torch

from ..core.sampler import logits_to_probs, sample
from ..drafters.model import ModelDrafter


def mixture_weight(target_probs: torch.Tensor, noise_ids: torch.Tensor, alpha: float):
    """λ per row such that Σ min(p, λ p + (1 − λ) δ_r) = α: `[A, V]`, `[A]` -> `[A]`.

    Example: p = [0.5, 0.3, 0.2], r = 2, α = 0.6 -> λ = (0.6 − 0.2) / 0.8 = 0.5.
    A row whose p(r) is 1 (greedy, noise on the argmax) gets λ = 1: q = p, α = 1 there.
    """
    p_noise = target_probs.gather(1, noise_ids.view(-1, 1)).squeeze(1)  # [A]
    weight = (alpha - p_noise) / (1.0 - p_noise).clamp_min(1e-12)
    return torch.where(p_noise < 1.0, weight, torch.ones_like(weight)).clamp(0.0, 1.0)


def mixture_probs(target_probs: torch.Tensor, noise_ids: torch.Tensor, alpha: float):
    """q = λ p + (1 − λ) δ_r per row (`[A, V]`), λ from `mixture_weight`."""
    weight = mixture_weight(target_probs, noise_ids, alpha).unsqueeze(1)  # [A, 1]
    noise = torch.zeros_like(target_probs).scatter_(1, noise_ids.view(-1, 1), 1.0)
    return weight * target_probs + (1.0 - weight) * noise


class SyntheticDraft(ModelDrafter):
    """Draft from the target's own law mixed with a random token, so that α is what you ask.

    `model` must be the target (the same weights): only then is p the target's p. Everything
    but `draft_step` (the loop over positions, cache, rollback, rows) is `ModelDrafter`'s.
    """

    def __init__(self, model, alpha: float):
        if not 0.0 <= float(alpha) <= 1.0:
            raise ValueError(f"alpha (the acceptance rate to dial in) must be in [0, 1], "
                             f"got {alpha}")
        super().__init__(model)
        self.alpha = float(alpha)

    def __repr__(self) -> str:
        return f"SyntheticDraft(alpha={self.alpha})"

    def draft_step(self, logits, temperature, generator):
        """q = λ p + (1 − λ) δ_r with p the target's own law here and r a uniform noise token;
        the draft token is drawn from q at any temperature (q is not one-hot)."""
        target_probs = logits_to_probs(logits, temperature)  # p, as the loop computes it
        noise_ids = torch.randint(target_probs.shape[1], (target_probs.shape[0],),
                                  device=target_probs.device, generator=generator)  # [A]
        probs = mixture_probs(target_probs, noise_ids, self.alpha)  # q [A, V]
        return probs, sample(probs, generator=generator, check=False)


def emitted_per_iteration(result, drop_last: bool = True) -> list:
    """Tokens emitted by each iteration of each row: [1, 3, 5, 2, ...].

    `drop_last` leaves out each row's last iteration, which the token budget or an EOS may
    have cut short (it would bias the mean below the formula). Example: a row emitting 2, 5, 1
    -> [2, 5].
    """
    by_row = {}
    for it in result.trace:
        if it.drafted or it.emitted:
            by_row.setdefault(it.row, []).append(len(it.emitted))
    counts = []
    for row_counts in by_row.values():
        counts += row_counts[:-1] if drop_last else row_counts
    return counts
