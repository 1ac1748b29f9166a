"""Typical acceptance (Medusa, Cai et al. 2024, arXiv:2401.10774; vLLM's TypicalAcceptanceSampler).

A lossy alternative to `verify`: keep a draft token x when the target finds it *plausible
enough*, without a coin flip against the draft's q:

    accept x  iff  p(x) > min(posterior_threshold, posterior_alpha · exp(−H(p)))

with H(p) the entropy of the target's distribution at that position. A confident target (low
H) asks for p(x) above posterior_threshold; an uncertain one (high H) lowers the bar, so more
drafts pass where many continuations are fine. At the first rejection the target's most
likely token is emitted; after a fully accepted block the bonus token (drawn by the caller).
Defaults 0.09 and 0.3 are vLLM's (vllm/model_executor/layers/typical_acceptance_sampler.py,
which also takes the argmax at a rejection; it computes H with log(p + 1e-5), here 0 ln 0 = 0).

At temperature 0 p is one-hot, the bar is 0.09, and only the target's argmax passes: the output
is exactly greedy. At T > 0 it is **not** a sample from p (the tests measure by how much).
The draft's probabilities are not used to decide; they are only reported in the verdict.
Like `verify`, it runs on whole batches without host reads.
"""

import torch

from .verify import Verdict, _check_inputs, draft_probabilities, emitted_tokens, \
    leading_accepted

POSTERIOR_THRESHOLD, POSTERIOR_ALPHA = 0.09, 0.3


def typical_threshold(target_probs: torch.Tensor, posterior_threshold: float = POSTERIOR_THRESHOLD,
                      posterior_alpha: float = POSTERIOR_ALPHA) -> torch.Tensor:
    """min(posterior_threshold, posterior_alpha · exp(−H(p))) per position, `[..., V] -> [...]`.

    Example: p uniform over 4 tokens: H = ln 4, bar = min(0.09, 0.3 / 4) = 0.075.
    """
    entropy = torch.special.entr(target_probs).sum(-1)  # −Σ p ln p, with 0 ln 0 = 0
    return torch.clamp(posterior_alpha * torch.exp(-entropy), max=posterior_threshold)


def typical_verify(target_probs, draft_probs, draft_token_ids, bonus_token_ids, *,
                   num_drafts=None, generator=None, check=True,
                   posterior_threshold=POSTERIOR_THRESHOLD,
                   posterior_alpha=POSTERIOR_ALPHA) -> Verdict:
    """Typical acceptance of `[B, γ]` drafts; same arguments and result as `verify`.

    Example (γ = 3): p(x1), p(x2) above the bar, p(x3) below -> [x1, x2, argmax p3, -1].
    `generator` is accepted for a common signature; nothing here is random.
    """
    check_typical_parameters(posterior_threshold, posterior_alpha)
    if check:
        _check_inputs(target_probs, draft_probs, draft_token_ids, bonus_token_ids, num_drafts)
    gamma = target_probs.shape[1]
    num_drafts, p_of_draft, q_of_draft = draft_probabilities(target_probs, draft_probs,
                                                             draft_token_ids, num_drafts)
    passes = p_of_draft > typical_threshold(target_probs, posterior_threshold, posterior_alpha)
    num_accepted = leading_accepted(passes, num_drafts)  # [B]
    if gamma > 0:  # the target's argmax at the first rejected position
        first_rejected = num_accepted.clamp(max=gamma - 1).unsqueeze(1)
        recovered = target_probs.argmax(-1).gather(1, first_rejected).squeeze(1)  # [B]
    else:
        recovered = bonus_token_ids.view(-1)
    tokens = emitted_tokens(draft_token_ids, bonus_token_ids, num_accepted, num_drafts, recovered)
    return Verdict(tokens=tokens, num_accepted=num_accepted, accept_probs=passes.to(p_of_draft.dtype),
                   coin_accepts=passes, p_of_draft=p_of_draft, q_of_draft=q_of_draft)


def typical_law(target_probs: torch.Tensor, draft_probs: torch.Tensor,
                posterior_threshold: float = POSTERIOR_THRESHOLD,
                posterior_alpha: float = POSTERIOR_ALPHA) -> torch.Tensor:
    """The law of the first token typical acceptance emits with one draft (γ = 1), `[V]`:

        P(y) = q(y) [p(y) > bar] + (Σ_{x: p(x) <= bar} q(x)) [y = argmax p]

    a drafted x that clears the bar is kept (with the draft's probability), any other draft
    gives way to the target's argmax. Example: p = (0.6, 0.3, 0.1), q = (0.2, 0.2, 0.6), bar
    0.09 -> (0.2, 0.2, 0.6): every token clears it; with bar 0.2 (p(x3) fails) -> (0.8, 0.2, 0).
    """
    check_typical_parameters(posterior_threshold, posterior_alpha)
    if target_probs.dim() != 1 or target_probs.shape != draft_probs.shape:
        raise ValueError(f"target_probs and draft_probs: one [V] law each, got "
                         f"{tuple(target_probs.shape)} and {tuple(draft_probs.shape)}")
    passes = target_probs > typical_threshold(target_probs, posterior_threshold, posterior_alpha)
    law = torch.where(passes, draft_probs, torch.zeros_like(draft_probs))
    law[target_probs.argmax()] += draft_probs[~passes].sum()
    return law


def check_typical_parameters(posterior_threshold, posterior_alpha) -> None:
    for name, value in (("posterior_threshold", posterior_threshold),
                        ("posterior_alpha", posterior_alpha)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise ValueError(f"{name} must be a number in (0, 1] (vLLM's default: "
                             f"{POSTERIOR_THRESHOLD if name == 'posterior_threshold' else POSTERIOR_ALPHA}), "
                             f"got {value!r}")
