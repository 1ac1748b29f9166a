"""Exact verification of a token tree: walk down from the pending token, trying siblings in turn.

At the current node (first the pending token) with target law r = p, try its children in node
order. A child x drawn from a law q is accepted with probability min(1, r(x)/q(x)); a child
given as a point mass (a deterministic candidate: a top-k guess, a copied n-gram; `q = None`)
is accepted with probability r(x). On acceptance the walk moves to x and r becomes the target's
law after x; on rejection r becomes the residual, normalised: (r − q)+ for a drawn child, r
without x for a point mass. When no child is left to try, one token is drawn from r and the
walk ends. So one iteration emits the accepted path and one more token.

Why it is exact: one round "accept x, else draw from the residual" emits exactly r, whatever q
(the two-line lemma of speculative sampling: r(v) = min(r(v), q(v)) + (1 − Σ min(r, q)) ·
(r − q)+(v) / Σ (r − q)+); for a point mass q = δ_x, min(1, r(x)/1) = r(x) and (r − δ_x)+ is r
without x. Trying the next sibling *instead of* drawing from the residual is, by induction on
the siblings left, again a draw from that residual, provided each sibling is independent of the
coins before it: deterministic candidates are, and so are siblings drawn independently from
their q (SpecInfer's multi-round rule; siblings drawn *without replacement* would not be). The
emitted token at each depth thus has the target's law given the path so far, and the next
depth starts from the target's law after it: the whole output is distributed as the target's.

Greedy (p one-hot): every coin is decided and the walk keeps the child equal to the target's
argmax, i.e. the longest branch that matches greedy decoding, plus the target's next token.

Batched over rows with tensor ops, no host read. It runs no model; `tree` builds the masks.
"""

from dataclasses import dataclass

import torch

from .sampler import draw, sample
from .tree import check_parents, tree_ancestors


@dataclass
class TreeVerdict:
    """What `tree_verify` decided, per row: the emitted tokens as `verify` gives them (`tokens
    [B, N+1]`: the accepted path, then the drawn token, then -1), `num_accepted [B]`, `path
    [B, N]` (the accepted nodes, in order, -1 after), and per node `tried [B, N]`,
    `accept_probs [B, N]` (the probability it was accepted with, 0 if never tried),
    `p_of_draft`/`q_of_draft [B, N]` (the target's and the draft's law at the node's token,
    after its parent; q = 1 for a point mass)."""

    tokens: torch.Tensor
    num_accepted: torch.Tensor
    path: torch.Tensor
    tried: torch.Tensor
    accept_probs: torch.Tensor
    p_of_draft: torch.Tensor
    q_of_draft: torch.Tensor


def tree_verify(target_probs, draft_probs, draft_token_ids, parents, *, num_drafts=None,
                generator=None, greedy=False, check=True,
                renormalize=True) -> TreeVerdict:
    """Verify a tree: `target_probs [B, N+1, V]` are the target's laws after [pending, node 0,
    ..., node N-1]; `draft_probs [B, N, V]` the laws the nodes were drawn from, or None (every
    node a point mass); `draft_token_ids [B, N]`; `parents [B, N]` (see `specnb.core.tree`).

    `renormalize=False` is a deliberately broken variant for teaching and tests: a rejected
    point mass is not taken out of r before its sibling is tried.
    """
    batch, nodes = draft_token_ids.shape
    device = target_probs.device
    if num_drafts is None:
        num_drafts = torch.full((batch,), nodes, dtype=torch.long, device=device)
    if check:
        _check_inputs(target_probs, draft_probs, draft_token_ids, parents, num_drafts)
    rows = torch.arange(batch, device=device)
    current = torch.full((batch,), -1, dtype=torch.long, device=device)  # the accepted node
    depth = torch.zeros(batch, dtype=torch.long, device=device)
    r = target_probs[:, 0].float().clone()  # the law to match at the current node, normalised
    path = torch.full((batch, nodes), -1, dtype=torch.long, device=device)
    tried = torch.zeros(batch, nodes, dtype=torch.bool, device=device)
    accept_probs = torch.zeros(batch, nodes, device=device)
    vocab = target_probs.shape[-1]
    after_parent = parents.clamp_min(-1) + 1  # the column of the law each node was drafted at
    p_of_draft = target_probs.flatten(1).gather(
        1, after_parent * vocab + draft_token_ids.clamp_min(0)).float()  # [B, N]
    q_of_draft = torch.ones(batch, nodes, device=device)
    uniforms = None if greedy else torch.rand(batch, nodes, device=device, generator=generator)
    for j in range(nodes):
        token = draft_token_ids[:, j].clamp_min(0)
        # Children are tried in node order, so a node's turn comes after its parent was kept.
        turn = (parents[:, j] == current) & (j < num_drafts)
        r_x = r.gather(1, token.unsqueeze(1)).squeeze(1)
        if draft_probs is None:
            q_x = torch.ones_like(r_x)
        else:
            q = draft_probs[:, j].float()
            q_x = q.gather(1, token.unsqueeze(1)).squeeze(1)
        accept = torch.where(q_x > 0, (r_x / q_x).clamp(max=1.0), (r_x > 0).float())
        coin = accept > 0 if greedy else uniforms[:, j] < accept
        kept, rejected = turn & coin, turn & ~coin
        tried[:, j], accept_probs[:, j] = turn, torch.where(turn, accept, 0.0)
        q_of_draft[:, j] = q_x
        # Rejected: r becomes the normalised residual (a point mass: r without x).
        if draft_probs is None:
            residual = r.scatter(1, token.unsqueeze(1), 0.0) if renormalize else r
        else:
            residual = (r - q).clamp_min(0.0)
        mass = residual.sum(-1, keepdim=True)
        # No residual mass left (r was the point mass itself): then the coin accepted, surely.
        residual = torch.where(mass > 0, residual / mass.clamp_min(1e-30), r)
        # Kept: move to the node; r is the target's law after it.
        r = torch.where(kept.unsqueeze(1), target_probs[:, j + 1].float(),
                        torch.where(rejected.unsqueeze(1), residual, r))
        slot = depth.clamp(max=nodes - 1)  # a kept node j sits at depth <= j < N
        path[rows, slot] = torch.where(kept, j, path[rows, slot])
        current = torch.where(kept, j, current)
        depth = depth + kept.long()
    final = draw(r, 0.0, check=False) if greedy else sample(r, generator=generator, check=False)
    tokens = torch.full((batch, nodes + 1), -1, dtype=torch.long, device=device)
    on_path = path >= 0
    tokens[:, :nodes] = torch.where(on_path, draft_token_ids.gather(1, path.clamp_min(0)), -1)
    tokens[rows, depth] = final
    return TreeVerdict(tokens=tokens, num_accepted=depth, path=path, tried=tried,
                       accept_probs=accept_probs, p_of_draft=p_of_draft, q_of_draft=q_of_draft)


def greedy_tree_verify(target_ids, draft_probs, draft_token_ids, parents, *,
                       num_drafts=None) -> TreeVerdict:
    """`tree_verify(greedy=True)` from the target's argmax ids `[B, N+1]` after [pending, node 0,
    ...] instead of their one-hot laws: the same TreeVerdict, bit for bit. With r one-hot at t,
    a child is kept iff its token is t, and a rejection leaves r as it was ((r − q)+ is still
    positive at t alone, or x was not t), so the walk only follows argmaxes and never builds a
    V-wide residual. Nothing is random, so the walk is computed at once rather than node by
    node: a node is kept when it and each of its ancestors is the first of its siblings to
    match the target's token after its parent; it is tried when its parent was kept and no
    earlier sibling matched."""
    batch, nodes = draft_token_ids.shape
    device = target_ids.device
    if num_drafts is None:
        num_drafts = torch.full((batch,), nodes, dtype=torch.long, device=device)
    rows = torch.arange(batch, device=device)
    node = torch.arange(nodes, device=device)
    real = node < num_drafts.unsqueeze(1)
    after_parent = target_ids.gather(1, parents.clamp_min(-1) + 1)  # the target's token there
    p_of_draft = (after_parent == draft_token_ids.clamp_min(0)).float()
    q_of_draft = torch.ones(batch, nodes, device=device) if draft_probs is None else \
        draft_probs.gather(-1, draft_token_ids.clamp_min(0).unsqueeze(-1)).squeeze(-1).float()
    match = real & (draft_token_ids == after_parent)
    # (j, k): k is a sibling of j tried before it; one that matched ends j's turn
    earlier_sibling = (parents.unsqueeze(2) == parents.unsqueeze(1)) & (node < node.unsqueeze(1))
    beaten = (earlier_sibling & match.unsqueeze(1)).any(2)
    first = match & ~beaten
    kept = ~(tree_ancestors(parents) & ~first.unsqueeze(1)).any(2)  # it and its ancestors
    parent_kept = (parents < 0) | kept.gather(1, parents.clamp(0, max(nodes - 1, 0)))
    tried = real & parent_kept & ~beaten
    depth = kept.sum(1)
    # The kept nodes in node order are the path in depth order (parents come first).
    path = torch.where(kept, node, nodes).sort(1).values
    path = torch.where(path < nodes, path, -1)
    zero = torch.zeros(batch, 1, dtype=torch.long, device=device)
    column = torch.cat([zero, kept.long() * (node + 1)], 1).amax(1)  # the last kept node's
    tokens = torch.full((batch, nodes + 1), -1, dtype=torch.long, device=device)
    tokens[:, :nodes] = torch.where(path >= 0, draft_token_ids.gather(1, path.clamp_min(0)), -1)
    tokens[rows, depth] = target_ids.gather(1, column[:, None])[:, 0]
    return TreeVerdict(tokens=tokens, num_accepted=depth, path=path, tried=tried,
                       accept_probs=kept.float(), p_of_draft=p_of_draft, q_of_draft=q_of_draft)


def _check_inputs(target_probs, draft_probs, draft_token_ids, parents, num_drafts) -> None:
    if not isinstance(target_probs, torch.Tensor) or target_probs.dim() != 3:
        raise ValueError(f"target_probs must be a tensor [B, N+1, V], got "
                         f"{getattr(target_probs, 'shape', type(target_probs).__name__)}")
    batch, columns, vocab = target_probs.shape
    if not isinstance(draft_token_ids, torch.Tensor) or \
            tuple(draft_token_ids.shape) != (batch, columns - 1) or \
            draft_token_ids.dtype != torch.int64:
        raise ValueError(f"draft_token_ids must be int64 [B, N] = [{batch}, {columns - 1}] "
                         f"(target_probs has N+1 = {columns} positions)")
    if draft_probs is not None and (not isinstance(draft_probs, torch.Tensor) or
                                    tuple(draft_probs.shape) != (batch, columns - 1, vocab)):
        raise ValueError(f"draft_probs must be None (point masses) or [B, N, V] = "
                         f"[{batch}, {columns - 1}, {vocab}]")
    if not isinstance(num_drafts, torch.Tensor) or tuple(num_drafts.shape) != (batch,) or \
            num_drafts.dtype != torch.int64 or (num_drafts.numel() and (
            int(num_drafts.min()) < 0 or int(num_drafts.max()) > columns - 1)):
        raise ValueError(f"num_drafts must be int64 [{batch}] with counts in [0, {columns - 1}]")
    if not isinstance(parents, torch.Tensor) or tuple(parents.shape) != (batch, columns - 1):
        raise ValueError(f"parents must be a tensor [B, N] = [{batch}, {columns - 1}]")
    check_parents(parents, num_drafts)
    real = torch.arange(columns - 1, device=num_drafts.device) < num_drafts.unsqueeze(1)
    if (((draft_token_ids < 0) | (draft_token_ids >= vocab)) & real).any():
        raise ValueError(f"draft_token_ids must hold ids in [0, {vocab}) for real nodes")
    for name, probs in (("target_probs", target_probs), ("draft_probs", draft_probs)):
        if probs is not None and (not torch.isfinite(probs).all() or (probs < 0).any()):
            raise ValueError(f"{name} must be finite and non-negative")
