"""Exact speculative sampling (modified rejection sampling), batched over `[B, γ, V]`.

For each row, walk the γ draft tokens x_1..x_γ (drawn from q) left to right:
accept x_j when u_j < min(1, p_j(x_j) / q_j(x_j)) with u_j ~ U[0, 1); at the first rejection
emit a token drawn from the residual max(0, p_j − q_j) / Σ max(0, p_j − q_j) and stop; if all γ
pass, emit the bonus token (drawn by the caller from the target's next distribution).
Every emitted token then has exactly the target's law p (Leviathan et al. 2023; Chen et al. 2023).

All rows are processed at once with tensor ops: no `.item()`, no branching on values, so it runs
on a GPU without waiting for the host. It does not run any model and does not decide γ.
"""

from dataclasses import dataclass

import torch

from .sampler import draw, sample


@dataclass
class Verdict:
    """Everything `verify` decided, for traces and teaching."""

    tokens: torch.Tensor  # [B, γ+1] int64: accepted drafts, then resampled or bonus, then -1
    num_accepted: torch.Tensor  # [B] int64: leading drafts accepted
    accept_probs: torch.Tensor  # [B, γ] min(1, p/q) of each drafted token
    coin_accepts: torch.Tensor  # [B, γ] bool: u < min(1, p/q), before the first rejection cuts
    p_of_draft: torch.Tensor  # [B, γ] target probability of each drafted token
    q_of_draft: torch.Tensor  # [B, γ] draft probability of each drafted token (1 if certain)


def acceptance_overlap(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    """Σ_v min(p, q) per position: the probability that a draft token is accepted."""
    return torch.minimum(target_probs, draft_probs).sum(dim=-1)


def accept_probability(p_of_draft: torch.Tensor, q_of_draft: torch.Tensor) -> torch.Tensor:
    """min(1, p(x)/q(x)) elementwise; a token the draft could not have produced (q = 0) is
    accepted iff p > 0."""
    return torch.where(q_of_draft > 0, (p_of_draft / q_of_draft).clamp(max=1.0),
                       (p_of_draft > 0).to(p_of_draft.dtype))


def residual_distribution(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    """(p − q)+ normalized over the last dim. Where p = q there is no residual; that position
    always accepts, so p stands in (NaN-free)."""
    residual = (target_probs - draft_probs).clamp_min(0.0)
    mass = residual.sum(dim=-1, keepdim=True)
    return torch.where(mass > 0, residual / mass.clamp_min(1e-30), target_probs)


def residual_weights(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    """(p − q)+ unnormalized (p where p = q): what `sample` races, since the race is
    scale-invariant. Only elementwise ops, so it has the same bits on every CPU; dividing by a
    sum would round differently with each vector width and, rarely, change a sampled token."""
    residual = (target_probs - draft_probs).clamp_min(0.0)
    return torch.where(residual.amax(dim=-1, keepdim=True) > 0, residual, target_probs)


def verify(target_probs, draft_probs, draft_token_ids, bonus_token_ids, *, num_drafts=None,
           generator=None, check=True, greedy=False) -> Verdict:
    """Accept or reject each draft token; `.tokens` of the result is `[B, γ+1]`, -1 padded.

    Example (γ = 3): accepted, accepted, rejected -> tokens [x1, x2, r, -1] with r from
    (p3 − q3)+; all accepted -> [x1, x2, x3, bonus].

    `draft_probs=None` means a deterministic proposal (copied n-grams, a greedy guess): q is the
    one-hot of each draft token, so x is kept with probability p(x) and the residual is p
    without x. Rows may carry fewer drafts than γ: `num_drafts [B]` counts each row's real
    drafts, the columns after them are padding (never accepted), and a row that accepts all its
    `num_drafts[b]` drafts emits its bonus token next (drawn by the caller from the target's
    distribution at that position): num_drafts [2], drafts [x1, x2, pad] -> [x1, x2, bonus, -1].

    `check=True` validates shapes, ids and probabilities first (a few host reads); the decoding
    loop, whose inputs it built itself, passes `check=False` to stay free of host syncs.
    `greedy=True` says p is one-hot (temperature 0): every coin is then decided (min(1, p/q) is
    0 or 1) and the residual has one positive entry (or is p itself), the argmax of p, which
    *is* the race's winner: nothing is drawn, and no V-wide residual is built.
    """
    if check:
        _check_inputs(target_probs, draft_probs, draft_token_ids, bonus_token_ids, num_drafts)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise ValueError(f"generator must be a torch.Generator or None, got "
                             f"{type(generator).__name__}")
    batch, gamma, vocab = target_probs.shape
    device = target_probs.device
    num_drafts, p_of_draft, q_of_draft = draft_probabilities(target_probs, draft_probs,
                                                             draft_token_ids, num_drafts)
    accept_probs = accept_probability(p_of_draft, q_of_draft)  # [B, γ]
    if greedy:  # p(x) is 0 or 1 and so is min(1, p/q): the coin is decided, nothing is drawn
        coin_accepts = accept_probs > 0
    else:
        coin_accepts = torch.rand(batch, gamma, device=device, generator=generator) < accept_probs
    num_accepted = leading_accepted(coin_accepts, num_drafts)  # [B]

    # Residual at the first rejected position only: one [B, V] row per sequence.
    if gamma > 0:
        first_rejected = num_accepted.clamp(max=gamma - 1)
        row = first_rejected.view(batch, 1, 1).expand(batch, 1, vocab)
        p_row = target_probs.gather(1, row).squeeze(1)  # [B, V]
        if greedy:  # p one-hot at t: (p − q)+ is positive at t alone, or else zero (then p)
            resampled = draw(p_row, 0.0, check=False)
        else:
            if draft_probs is None:
                q_row = torch.zeros_like(p_row).scatter_(
                    -1, draft_token_ids.gather(1, first_rejected.unsqueeze(1)), 1.0)
            else:
                q_row = draft_probs.gather(1, row).squeeze(1)
            resampled = sample(residual_weights(p_row, q_row), generator=generator, check=False)
    else:
        resampled = bonus_token_ids.view(batch)

    tokens = emitted_tokens(draft_token_ids, bonus_token_ids, num_accepted, num_drafts, resampled)
    return Verdict(tokens=tokens, num_accepted=num_accepted, accept_probs=accept_probs,
                   coin_accepts=coin_accepts, p_of_draft=p_of_draft, q_of_draft=q_of_draft)


def greedy_verify(target_ids, draft_probs, draft_token_ids, *, num_drafts=None) -> Verdict:
    """`verify` at temperature 0, from the target's argmax ids `[B, γ+1]` (`greedy_ids` of the
    logits at [pending, drafts]) instead of their one-hot laws: the same Verdict, bit for bit.

    With p one-hot at t, min(1, p(x)/q(x)) is 1 if x = t and 0 otherwise, and the token after
    the accepted drafts is t wherever the walk stops (the residual (p − q)+ is positive at t
    alone; the bonus is the argmax after the last draft): so the emitted tokens are the target's
    argmaxes at positions 0..n. No V-wide tensor is touched except q at the drafted tokens.
    """
    batch, gamma = draft_token_ids.shape
    if num_drafts is None:
        num_drafts = torch.full((batch,), gamma, dtype=torch.long, device=target_ids.device)
    matches = draft_token_ids == target_ids[:, :gamma]
    p_of_draft = matches.float()
    q_of_draft = torch.ones_like(p_of_draft) if draft_probs is None else \
        draft_probs.gather(-1, draft_token_ids.unsqueeze(-1)).squeeze(-1)
    # min(1, p/q), and a q = 0 token accepted iff p > 0 (as `accept_probability`)
    accept_probs = p_of_draft.clone()
    num_accepted = leading_accepted(matches, num_drafts)
    positions = torch.arange(gamma + 1, device=target_ids.device).unsqueeze(0)
    tokens = torch.where(positions <= num_accepted.unsqueeze(1), target_ids, -1)
    return Verdict(tokens=tokens, num_accepted=num_accepted, accept_probs=accept_probs,
                   coin_accepts=matches, p_of_draft=p_of_draft, q_of_draft=q_of_draft)


# The parts every acceptance rule shares (exact `verify` here, `typical_verify` in typical.py).

def draft_probabilities(target_probs, draft_probs, draft_token_ids, num_drafts):
    """(num_drafts [B], p(x_j) [B, γ], q(x_j) [B, γ]); q = 1 for a certain draft (no q)."""
    batch, gamma, _ = target_probs.shape
    if num_drafts is None:
        num_drafts = torch.full((batch,), gamma, dtype=torch.long, device=target_probs.device)
    index = draft_token_ids.unsqueeze(-1)
    p_of_draft = target_probs.gather(-1, index).squeeze(-1)
    q_of_draft = torch.ones_like(p_of_draft) if draft_probs is None else \
        draft_probs.gather(-1, index).squeeze(-1)
    return num_drafts, p_of_draft, q_of_draft


def leading_accepted(accepts: torch.Tensor, num_drafts: torch.Tensor) -> torch.Tensor:
    """[B, γ] accept decisions -> [B] count before the first rejection (padding never passes)."""
    is_draft = torch.arange(accepts.shape[1], device=accepts.device) < num_drafts.unsqueeze(1)
    return (accepts & is_draft).long().cumprod(dim=-1).sum(dim=-1)


def emitted_tokens(draft_token_ids, bonus_token_ids, num_accepted, num_drafts, at_rejection):
    """[B, γ+1]: the accepted drafts, then the bonus (all accepted) or `at_rejection`, then -1."""
    batch, gamma = draft_token_ids.shape
    bonus = bonus_token_ids.view(batch)
    next_token = torch.where(num_accepted == num_drafts, bonus, at_rejection)  # [B]
    positions = torch.arange(gamma + 1, device=draft_token_ids.device).unsqueeze(0)  # [1, γ+1]
    drafts_padded = torch.cat([draft_token_ids, bonus.unsqueeze(1)], dim=1)  # [B, γ+1]
    n = num_accepted.unsqueeze(1)
    return torch.where(positions < n, drafts_padded,
                       torch.where(positions == n, next_token.unsqueeze(1), -1))


def _distinct(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor without its broadcast copies (dims of stride 0 cut to size 1): checking
    `p.expand(N, γ, V)` reads V numbers, not N·γ·V."""
    for dim, (size, stride) in enumerate(zip(tensor.shape, tensor.stride())):
        if stride == 0 and size > 1:
            tensor = tensor.narrow(dim, 0, 1)
    return tensor


def _check_inputs(target_probs, draft_probs, draft_token_ids, bonus_token_ids,
                  num_drafts=None) -> None:
    """Strict checks; each failure names the argument and what it should be."""
    named = {"target_probs": target_probs, "draft_probs": draft_probs,
             "draft_token_ids": draft_token_ids, "bonus_token_ids": bonus_token_ids,
             "num_drafts": num_drafts}
    for name, value in named.items():
        if not isinstance(value, torch.Tensor) and not (
                value is None and name in ("draft_probs", "num_drafts")):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if target_probs.dim() != 3:
        raise ValueError(f"target_probs must be [B, γ, V], got shape {tuple(target_probs.shape)}")
    batch, gamma, vocab = target_probs.shape
    expected = {
        **({} if draft_probs is None else {
            "draft_probs": (draft_probs, (batch, gamma, vocab), (torch.float32,))}),
        "draft_token_ids": (draft_token_ids, (batch, gamma), (torch.int64,)),
        "bonus_token_ids": (bonus_token_ids, (batch, 1), (torch.int64,)),
    }
    if target_probs.dtype != torch.float32:
        raise ValueError(f"target_probs must be float32, got {target_probs.dtype}")
    for name, (tensor, shape, dtypes) in expected.items():
        if tuple(tensor.shape) != shape:
            raise ValueError(f"{name} must have shape {list(shape)} to match target_probs "
                             f"[B, γ, V] = {list(target_probs.shape)}, got {list(tensor.shape)}")
        if tensor.dtype not in dtypes:
            raise ValueError(f"{name} must be {dtypes[0]}, got {tensor.dtype}")
        if tensor.device != target_probs.device:
            raise ValueError(f"{name} is on {tensor.device} but target_probs on "
                             f"{target_probs.device}; move them to one device")
    if num_drafts is not None:
        if tuple(num_drafts.shape) != (batch,) or num_drafts.dtype != torch.int64:
            raise ValueError(f"num_drafts must be int64 of shape [{batch}] (one count per row), "
                             f"got {num_drafts.dtype} {list(num_drafts.shape)}")
        if num_drafts.numel() and (num_drafts.min() < 0 or num_drafts.max() > gamma):
            raise ValueError(f"num_drafts must hold counts in [0, γ={gamma}], got range "
                             f"[{int(num_drafts.min())}, {int(num_drafts.max())}]")
    for name, ids in (("draft_token_ids", draft_token_ids), ("bonus_token_ids", bonus_token_ids)):
        if ids.numel() and (ids.min() < 0 or ids.max() >= vocab):
            raise ValueError(f"{name} must hold ids in [0, {vocab}), got range "
                             f"[{int(ids.min())}, {int(ids.max())}]")
    for name, probs in (("target_probs", target_probs), ("draft_probs", draft_probs)):
        if probs is None:
            continue
        probs = _distinct(probs)
        if not torch.isfinite(probs).all():
            raise ValueError(f"{name} contains NaN or infinite values")
        if (probs < 0).any():
            raise ValueError(f"{name} contains negative probabilities")
        if probs.numel() and ((probs.sum(-1) - 1).abs() > 1e-3).any():
            raise ValueError(f"{name} rows must sum to 1 (got sums in "
                             f"[{float(probs.sum(-1).min()):.4f}, {float(probs.sum(-1).max()):.4f}])")
