"""EAGLE-2's dynamic token tree for the feature head: the tree grows where the head is confident.

A static tree (`FeatureDrafter(head, tree=(4, 2))`) has one shape whatever the head believes.
EAGLE-2 (arXiv 2406.16858) grows it from the head's own probabilities instead, because a draft
token's probability under the draft is a good predictor of its acceptance (their §4): a node's
score is the draft's probability of its whole branch, `Σ log q` along the path.

    depth 1        the head's top `branch` tokens after the pending token
    depth d >= 2   expand the `branch` best-scoring nodes of depth d - 1 in ONE head forward (a
                   tree chunk whose tokens see the prefix and their own ancestors of earlier
                   depths, not the siblings: `BatchedCachedLM.forward(..., visible=...)`); each
                   proposes its top `branch` children
    rerank         keep the `nodes` best-scoring nodes of all. A child never scores above its
                   parent (log q <= 0; ties keep the parent, which comes first), so what is kept
                   is a tree; it goes to the target in creation order (parents first)

So drafting costs `depth - 1` head forwards of `branch` entries each, like a chain of `depth`
drafts, and the target checks `nodes` tokens. Candidates are the head's top-k, deterministic:
`verify` takes them as point masses, exact at any temperature. A row's budget `max_drafts`
caps the depth of what it keeps; a node that is an end-of-sequence token is not expanded.
"""

from dataclasses import dataclass

import torch

from .base import Proposal


@dataclass(frozen=True)
class DynamicTree:
    """`nodes` kept of all grown, `depth` levels, `branch` expanded nodes per level and children
    per expanded node. `DynamicTree(8, 4, 4)`: 4 + 3 × 16 candidates, the best 8 checked."""

    nodes: int
    depth: int
    branch: int

    def __post_init__(self):
        for name in ("nodes", "depth", "branch"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"DynamicTree.{name} must be an int >= 1, got {value!r}")
        if self.nodes > self.grown:
            raise ValueError(f"DynamicTree keeps {self.nodes} nodes but grows only {self.grown} "
                             f"(branch {self.branch} + (depth - 1) × branch²): a budget larger "
                             f"than the tree")

    @property
    def grown(self) -> int:
        """Candidates grown before the rerank: `branch` at depth 1, `branch²` at each next."""
        return self.branch + (self.depth - 1) * self.branch ** 2


def check_dynamic(dynamic):
    """None, a DynamicTree, or (nodes, depth, branch)."""
    if dynamic is None or isinstance(dynamic, DynamicTree):
        return dynamic
    if isinstance(dynamic, (tuple, list)) and len(dynamic) == 3:
        return DynamicTree(*dynamic)
    raise ValueError(f"dynamic must be None, a DynamicTree or (nodes, depth, branch) such as "
                     f"(8, 4, 4), got {dynamic!r}")


def grow(drafter, max_drafts: torch.Tensor, shape: DynamicTree, depth: int) -> Proposal:
    """The dynamic tree of `drafter` (a FeatureDrafter, caught up) for A rows, up to `depth`
    levels (at most shape.depth); leaves the number of head entries it fed in
    `drafter.own_entries` (its `update` rolls them back)."""
    rows, device = max_drafts.shape[0], max_drafts.device
    lm, branch = drafter.lm, shape.branch
    to_target = drafter.head.draft_to_target
    depth = min(depth, shape.depth)
    total = branch + (depth - 1) * branch ** 2  # nodes grown, in creation order
    row_ids = torch.arange(rows, device=device).unsqueeze(1)

    top = torch.log_softmax(drafter.next_logits.float(), -1).topk(branch, -1)
    scores, tokens = [top.values], [to_target[top.indices]]  # per level: [A, width]
    parents = [torch.full((rows, branch), -1, device=device)]  # global index, -1: pending
    # The head output each node's entry is built from: its parent's (the last true entry's at
    # depth 1), and the head slots of its ancestors' entries, among this proposal's own.
    inputs = drafter.next_hidden.unsqueeze(1).expand(-1, branch, -1)
    own = (depth - 1) * branch
    seen_own = torch.zeros(rows, branch, own, dtype=torch.bool, device=device)
    base = lm.num_slots  # the slots before this proposal's entries: the prefix (and holes)
    first = 0  # global index of the last level's first node
    for level in range(1, depth):
        width = scores[-1].shape[1]
        ended = torch.isin(tokens[-1], drafter.eos)  # nothing worth drafting after an EOS
        pick = scores[-1].masked_fill(ended, -torch.inf).topk(branch, -1).indices  # [A, W]
        picked_ended = ended.gather(1, pick)
        hidden_in = inputs.gather(1, pick.unsqueeze(-1).expand(-1, -1, inputs.shape[-1]))
        seen = seen_own.gather(1, pick.unsqueeze(-1).expand(-1, -1, own))  # [A, W, own]
        fed = (level - 1) * branch  # own slots used so far
        visible = torch.cat([torch.ones(rows, branch, base, dtype=torch.bool, device=device),
                             seen[..., :fed]], 2)
        logits = lm.forward(tokens[-1].gather(1, pick), keep=None,
                            tree=torch.full((rows, branch), -1, device=device), visible=visible,
                            hidden=hidden_in.to(drafter.head.fc.weight.dtype))  # [A, W, Vd]
        hidden = lm.model_output.hidden  # [A, W, H]: each picked node's output
        children = torch.log_softmax(logits.float(), -1).topk(branch, -1)  # [A, W, branch]
        parent_scores = scores[-1].gather(1, pick).unsqueeze(-1)
        child_scores = (parent_scores + children.values).masked_fill(
            picked_ended.unsqueeze(-1), -torch.inf)
        scores.append(child_scores.flatten(1))
        tokens.append(to_target[children.indices].flatten(1))
        parents.append((first + pick).repeat_interleave(branch, 1))
        inputs = hidden.repeat_interleave(branch, 1)
        picked = torch.arange(branch, device=device)
        slot = torch.zeros(rows, branch, own, dtype=torch.bool, device=device)
        slot[:, picked, fed + picked] = True  # picked node j was fed at own slot fed + j
        seen_own = (seen | slot).repeat_interleave(branch, 1)  # a child sees its parent's entry
        first += width
    drafter.own_entries = own

    scores, tokens, parents = torch.cat(scores, 1), torch.cat(tokens, 1), torch.cat(parents, 1)
    levels = torch.cat([torch.full((branch if d == 0 else branch ** 2,), d + 1, device=device)
                        for d in range(depth)])
    scores = scores.masked_fill(levels.unsqueeze(0) > max_drafts.unsqueeze(1), -torch.inf)
    # The best `nodes` (stable: of equal scores the earlier, so a parent before its child),
    # then back in creation order with the rows' unusable picks (score -inf) last, as padding.
    kept = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :shape.nodes]
    usable = scores.gather(1, kept) > -torch.inf
    kept = kept.gather(1, torch.sort(kept + (~usable) * total, 1).indices)
    usable = scores.gather(1, kept) > -torch.inf
    column = torch.full((rows, total), -1, device=device)
    column[row_ids, kept] = torch.arange(kept.shape[1], device=device)
    parent = parents.gather(1, kept)
    new_parents = torch.where(parent < 0, -1, column.gather(1, parent.clamp_min(0)))
    return Proposal(tokens.gather(1, kept), usable.sum(1),
                    parents=torch.where(usable, new_parents, -1))
