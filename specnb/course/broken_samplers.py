"""Deliberately broken acceptance rules, for notebook 04 and its exercises: specnb never uses them.

Notebook 04 writes its one-position mistakes (no residual, a q from other logits, a greedy draft
told q) in the notebook itself. This module holds the mistake that only shows across positions,
so that a unit test (`tests/test_broken_samplers.py`) can check that the joint χ² test catches it:

- `verify_keeps_checking(...)`: at a rejection it emits the residual token, as it should, but
  then goes on checking the later drafts instead of stopping. Every later draft x_{j+1} was drawn
  from q(· | prefix, x_j) and scored against p(· | prefix, x_j), a prefix that was just thrown
  away, so the token after a rejection follows the continuation law of the *rejected* draft.
  Each position alone still looks right (the first emitted token has exactly the law p), the
  pair of the first two does not.

`loop_verifies_with(rule)` runs `specnb.speculative`'s loop with another acceptance rule, inside
a `with` block only. Nothing here runs a model.

Example (γ = 3): drafts [x1, x2, x3], coins [reject, accept, accept]
    exact `verify`:          [r1, -1, -1, -1]          (stop at the first rejection)
    `verify_keeps_checking`: [r1, x2, x3, bonus]       (x2, x3 belong after x1, not after r1)
"""

import importlib
from contextlib import contextmanager

import torch

from ..core.sampler import sample
from ..core.verify import Verdict, accept_probability, draft_probabilities, residual_weights

# The package re-exports the function `speculative`, which hides the module of the same name.
_LOOP_MODULE = "specnb.methods.speculative"


def verify_keeps_checking(target_probs, draft_probs, draft_token_ids, bonus_token_ids, *,
                          num_drafts=None, generator=None, check=True) -> Verdict:
    """BROKEN: `specnb.core.verify` that does not stop at the first rejection.

    Each draft j is kept with probability min(1, p_j(x_j) / q_j(x_j)) or replaced by a draw from
    its residual (p_j − q_j)+, for every j < num_drafts; the bonus follows when the last draft
    passed. `num_accepted` is set so the loop emits all of these tokens: num_drafts when the last
    draft passed (the bonus is next), else num_drafts − 1 (the last residual draw is next).
    Same arguments and result type as `verify`; `check` is accepted and ignored.
    """
    batch, gamma, vocab = target_probs.shape
    num_drafts, p_of_draft, q_of_draft = draft_probabilities(target_probs, draft_probs,
                                                             draft_token_ids, num_drafts)
    accept_probs = accept_probability(p_of_draft, q_of_draft)  # [B, γ]
    coin_accepts = torch.rand(batch, gamma, device=target_probs.device,
                              generator=generator) < accept_probs  # [B, γ]
    if draft_probs is None:  # a certain draft: q is the one-hot of each draft token
        draft_probs = torch.zeros_like(target_probs).scatter_(-1, draft_token_ids.unsqueeze(-1), 1.0)
    residuals = residual_weights(target_probs, draft_probs)  # [B, γ, V], unnormalized
    resampled = sample(residuals.reshape(batch * gamma, vocab), generator=generator,
                       check=False).view(batch, gamma)  # [B, γ]: a residual draw at every draft

    columns = torch.arange(gamma + 1, device=target_probs.device).unsqueeze(0)  # [1, γ+1]
    is_draft = columns[:, :gamma] < num_drafts.unsqueeze(1)  # [B, γ]
    checked = torch.where(coin_accepts, draft_token_ids, resampled)  # [B, γ]: never stops
    last = (num_drafts - 1).clamp_min(0).unsqueeze(1)  # [B, 1]
    last_passed = (num_drafts == 0) if gamma == 0 else \
        (num_drafts == 0) | coin_accepts.gather(1, last).squeeze(1)  # [B]
    tokens = torch.cat([torch.where(is_draft, checked, -1),
                        torch.full_like(bonus_token_ids, -1)], 1)  # [B, γ+1]
    tokens.scatter_(1, num_drafts.unsqueeze(1),
                    torch.where(last_passed.unsqueeze(1), bonus_token_ids, -1))
    num_accepted = torch.where(last_passed, num_drafts, num_drafts - 1)
    return Verdict(tokens=tokens, num_accepted=num_accepted, accept_probs=accept_probs,
                   coin_accepts=coin_accepts & is_draft, p_of_draft=p_of_draft,
                   q_of_draft=q_of_draft)


@contextmanager
def loop_verifies_with(rule):
    """Inside the `with` block, `specnb.speculative(..., acceptance="exact")` decides drafts
    with `rule` (a function with `verify`'s signature) instead of `specnb.core.verify`."""
    loop = importlib.import_module(_LOOP_MODULE)
    original = loop.verify
    loop.verify = rule
    try:
        yield
    finally:
        loop.verify = original
