"""Token trees: many candidate continuations scored by one target forward.

A tree of N drafted nodes per row is given by `parents [B, N]`: node j's parent is node
`parents[b, j]`, or -1 when j continues the pending token (the root). Parents come before their
children (`parents[b, j] < j`), so a tree has no cycle by construction and a chain is the tree
`[-1, 0, 1, ...]`. Columns past a row's `num_drafts[b]` are padding.

    pending x ── a ── b          parents [-1, 0, -1, 2]     depth [1, 2, 1, 2]
              └─ c ── d          node d sees the prefix, x, c and itself: not a or b

One forward feeds [pending, node 0, ..., node N-1]; each fed token attends to the row's cache,
to its ancestors and to itself (`tree_mask`), at position `length + depth` (`tree_positions`),
so every branch is scored exactly as if it had been fed alone as a chain.

It decides nothing about which nodes to draft (drafters do) or which to keep (`tree_verify`).
"""

import torch


def check_parents(parents: torch.Tensor, num_drafts: torch.Tensor | None = None) -> None:
    """Refuse what is not a tree, before any forward: `ValueError` naming the node."""
    if not isinstance(parents, torch.Tensor) or parents.dim() != 2 or \
            parents.dtype != torch.int64:
        raise ValueError(f"parents must be an int64 tensor [B, N] (each node's parent, -1 for "
                         f"the pending token), got {_describe(parents)}")
    batch, nodes = parents.shape
    if num_drafts is None:
        real = torch.ones_like(parents, dtype=torch.bool)
    else:
        real = torch.arange(nodes, device=parents.device) < num_drafts.unsqueeze(1)
    column = torch.arange(nodes, device=parents.device).expand(batch, -1)
    low = real & (parents < -1)
    late = real & (parents >= column)
    if low.any() or late.any():
        b, j = (low | late).nonzero()[0].tolist()
        what = "is below -1" if low[b, j] else "is not an earlier node (out of range, or a cycle)"
        raise ValueError(f"parents[{b}, {j}] = {int(parents[b, j])} {what}: a node's parent "
                         f"is -1 (the pending token) or an earlier node 0..{j - 1}")


def tree_depths(parents: torch.Tensor) -> torch.Tensor:
    """`[B, N]` depth of each node, 1 for a child of the pending token.
    Example: parents [[-1, 0, -1, 2]] -> [[1, 2, 1, 2]]."""
    return tree_ancestors(parents).sum(-1)  # a node's ancestors and itself


def tree_ancestors(parents: torch.Tensor) -> torch.Tensor:
    """`[B, N, N]` bool: entry (j, i) is True when node i is node j or one of its ancestors.
    Example: parents [[-1, 0, -1]] -> rows [1,0,0], [1,1,0], [0,0,1].

    The transitive closure of "is the parent of" by repeated squaring, log2(N) matrix products
    in all, rather than a pass per node: a tree is rebuilt every iteration of the loop, where
    each small op costs microseconds."""
    batch, nodes = parents.shape
    column = torch.arange(nodes, device=parents.device)
    seen = (parents.unsqueeze(2) == column) | (column.unsqueeze(1) == column)  # parent, self
    reach = 1  # seen holds every ancestor at most `reach` generations up
    while reach < nodes - 1:
        hops = seen.float()
        seen = seen | ((hops @ hops) > 0)
        reach *= 2
    return seen


def tree_mask(parents: torch.Tensor, new_valid: torch.Tensor) -> torch.Tensor:
    """`[B, N+1, N+1]` bool over the fed tokens [pending, nodes]: who sees whom among them.
    The pending token sees itself; node j sees the pending token, its ancestors and itself.
    Padding (`new_valid` False) is seen by no one."""
    batch, nodes = parents.shape
    mask = torch.zeros(batch, nodes + 1, nodes + 1, dtype=torch.bool, device=parents.device)
    mask[:, :, 0] = True
    mask[:, 1:, 1:] = tree_ancestors(parents)
    return mask & new_valid.unsqueeze(1)


def tree_positions(parents: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """`[B, N+1]` position ids of [pending, nodes]: the row's length, then length + depth."""
    return torch.cat([lengths.unsqueeze(1), lengths.unsqueeze(1) + tree_depths(parents)], 1)


def kept_columns(path: torch.Tensor) -> torch.Tensor:
    """`[B, N+1]` bool over the fed columns [pending, nodes]: the pending token and the nodes on
    an accepted branch (`path [B, N]`: node indices in order, -1 after).
    Example: path [[2, 3, -1, -1]] -> [[True, False, False, True, True]]."""
    nodes = torch.arange(path.shape[1], device=path.device)
    on_branch = (path.unsqueeze(2) == nodes).any(1)  # [B, N]
    pending = torch.ones(path.shape[0], 1, dtype=torch.bool, device=path.device)
    return torch.cat([pending, on_branch], 1)


def trie(sequences: list) -> tuple:
    """The token tree holding every sequence as a branch, shared starts merged: (tokens,
    parents) as lists, parents before children (-1: a child of the pending token).
    Example: [[5, 6], [5, 7], [8]] -> tokens [5, 6, 7, 8], parents [-1, 0, 0, -1]."""
    tokens, parents, children = [], [], {}  # children: (parent, token) -> node
    for sequence in sequences:
        node = -1
        for token in sequence:
            key = (node, int(token))
            if key not in children:
                children[key] = len(tokens)
                tokens.append(int(token))
                parents.append(node)
            node = children[key]
    return tokens, parents


def branches(token_ids: list, parents: list) -> list:
    """Every node's branch, root first: the token sequences a tree proposes.
    Example: tokens [5, 6, 8], parents [-1, 0, -1] -> [[5], [5, 6], [8]]."""
    paths = []
    for node, parent in enumerate(parents):
        paths.append((paths[parent] if parent >= 0 else []) + [token_ids[node]])
    return paths


def chain_parents(batch: int, nodes: int, device=None) -> torch.Tensor:
    """The chain as a tree: `[B, N]` with node j's parent j - 1."""
    return (torch.arange(nodes, device=device) - 1).expand(batch, -1).clone()


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"{value.dtype} {list(value.shape)}"
    return type(value).__name__
