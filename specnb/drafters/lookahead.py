"""`LookaheadDrafter`: lookahead decoding (Fu et al. 2024) as a drafter of the one loop.

Jacobi decoding guesses the next W tokens and refines every guess in parallel, but a wrong token
poisons everything after it, so it rarely keeps more than one. Lookahead decoding keeps the
parallel refinement and *harvests* what it produces: each refinement leaves n-grams (N tokens in
a row, each the target's guess after the ones before it), collected in a pool keyed by their
first token. Whenever the pending token starts pooled n-grams, they are checked as drafts.

One target forward carries both branches, as one token tree rooted at the pending token x:

    lookahead branch, N - 1 levels x W columns (W = 4, N = 3):   verification branch (G = 2):
        level 0:  x ── a ── b ── c                                 x ── p ── q
                  │    │    │    │                                 x ── p ── r   (merged: p once)
        level 1:  e    f    g    h    (e under x, f under a, ...)

Node (level j, column c) sits at depth c + j: it sees the prefix, x, level 0's tokens up to
column c, then its own column's tokens of the levels below it. That is the paper's attention
mask (llama.cpp draws it the same way), and it is exactly a tree: each branch attends to its
ancestors only (`specnb.core.tree`), so the loop's tree machinery scores it with no mask of its
own. After the forward the target's argmax at each node of the top level is the next level;
column c then reads as one n-gram, bottom to top (level 0's token, level 1's, ..., the new one),
pooled under its first token; the levels shift down by one.

Every fed node is also a candidate: the trunk x a b c is a Jacobi guess, each column a branch,
each pooled n-gram a chain. The window is not realigned when tokens are accepted (as in the
reference implementations), so its trunk goes stale; what Jacobi decoding itself would check
next is another candidate, the *carry*: the target's argmax at the nodes just past the accepted
ones, along the branch that was followed (Jacobi's refreshed, unconverged guesses, realigned to
the new pending token). Checking it beside the pool means lookahead never throws away the
guesses Jacobi keeps. All candidates are deterministic point masses, so the exact tree rule
(`tree_verify`) keeps the target's law at any temperature (greedy: its argmax), whatever they
hold.

Why a drafter rather than a second loop: the verification branch is a tree of candidates, the
lookahead branch more nodes of the same tree; what is new is the drafter's state (window, pool),
and what it reads back: the target's argmax at every fed node (`Step.target_ids`, asked for with
`reads_target_ids`).
"""

import torch

from ..core.args import check_int
from ..core.tree import trie
from .base import Drafter, Proposal, Step
from .ngram import cut_after_eos


class LookaheadDrafter(Drafter):
    """A Jacobi window of `window` columns x `ngram - 1` levels, and a pool of n-grams of
    `ngram` tokens from which up to `candidates` starting with the pending token are checked."""

    reads_target_ids = True

    def __init__(self, window: int = 5, ngram: int = 3, candidates: int = 5):
        self.window = check_int("window", window, 1)
        self.ngram = check_int("ngram", ngram, 2)
        self.candidates = check_int("candidates", candidates, 1)
        self.nodes = self._lookahead_nodes()  # the same layout every step

    def __repr__(self) -> str:
        return (f"LookaheadDrafter(window={self.window}, ngram={self.ngram}, "
                f"candidates={self.candidates})")

    @property
    def depth(self) -> int:
        """The deepest node: the top level's last column, or a pooled n-gram's last token."""
        return max(self.window + self.ngram - 3, self.ngram - 1)

    @property
    def max_fed(self) -> int:
        """Tokens one forward feeds at most: the pending one, the window's nodes (late ones
        included), `candidates` pooled continuations of `ngram - 1` tokens and the carry."""
        return 1 + len(self.nodes) + self.candidates * (self.ngram - 1) + self.depth

    @property
    def levels(self) -> int:
        return self.ngram - 1

    def start(self, target, prompts, pending, *, eos_ids, features=None) -> None:
        self.eos_ids, self.device = eos_ids, pending.device
        self.sequences = [list(p) for p in prompts]  # the pending token is each one's last
        # The first guesses: the prompt's last tokens, repeated if it is short (any guess is
        # exact to draft; recent tokens are likelier to come back than arbitrary ones).
        size = self.levels * self.window
        self.windows = []
        for prompt in prompts:
            guesses = (list(prompt) * (size // len(prompt) + 1))[-size:]
            self.windows.append([guesses[j * self.window:(j + 1) * self.window]
                                 for j in range(self.levels)])
        self.pools = [{} for _ in prompts]  # first token -> continuations (N - 1 tokens each)
        self.columns = [None] * len(prompts)  # per row, fed column of node (level, column)
        self.carries = [[] for _ in prompts]  # per row, Jacobi's next guesses (`carry`)
        self.trees = [None] * len(prompts)  # per row: tokens, parents, carry's and trunk's nodes
        self.ngrams_pooled = 0

    def _lookahead_nodes(self) -> list:
        """(level, column, parent key) of the lookahead branch, parents first; (0, 0) is the
        pending token itself, so it is not a node."""
        nodes = [(0, c, (0, c - 1)) for c in range(1, self.window)]
        nodes += [(j, c, (j - 1, c)) for j in range(1, self.levels) for c in range(self.window)]
        return nodes

    def propose(self, max_drafts, *, width, temperature, generator) -> Proposal:
        rows, info = [], []
        for b, budget in enumerate(max_drafts.tolist()):
            grams = self.pools[b].get(self.sequences[b][-1], [])
            info.append({"pooled": len(grams)})
            if budget <= 0:
                rows.append(([], [], 0))
                self.columns[b] = None
                continue
            pooled = [cut_after_eos(list(g)[:budget], self.eos_ids) for g in grams]
            carry = cut_after_eos(self.carries[b][:budget], self.eos_ids)
            info[-1]["carry"] = len(carry)
            tokens, parents = trie(pooled + [carry])
            # A window node that repeats a sibling's token is that sibling (the same context, so
            # the same argmax): merged, no two siblings hold one token and the tree rule keeps
            # the longest matching branch, so no candidate can hide another's continuation.
            children = {(p, t): n for n, (t, p) in enumerate(zip(tokens, parents))}
            index = {(0, 0): -1}  # node key -> node index (-1: the pending token)
            late = []  # lookahead nodes deeper than the budget: fed, read back, never accepted
            level_tokens = self.windows[b]
            for j, c, parent in self.nodes:
                if j + c > budget:
                    late.append((j, c, parent))
                    continue
                index[(j, c)] = add_node(tokens, parents, children, index[parent],
                                         level_tokens[j][c])
            num_drafts = len(tokens)
            for j, c, parent in late:
                index[(j, c)] = add_node(tokens, parents, children, index[parent],
                                         level_tokens[j][c])
            self.columns[b] = {key: node + 1 for key, node in index.items()}  # column 0: pending
            trunk = [index[(0, c)] for c in range(1, self.window)]
            self.trees[b] = (tokens, parents, path_nodes(tokens, parents, carry), trunk)
            rows.append((tokens, parents, num_drafts))
        width = max((len(tokens) for tokens, _, _ in rows), default=0)
        token_ids = torch.zeros(len(rows), width, dtype=torch.long)
        parent_ids = torch.full((len(rows), width), -1, dtype=torch.long)
        for b, (tokens, parents, _) in enumerate(rows):
            token_ids[b, :len(tokens)] = torch.tensor(tokens, dtype=torch.long)
            parent_ids[b, :len(parents)] = torch.tensor(parents, dtype=torch.long)
        num_drafts = torch.tensor([n for _, _, n in rows], dtype=torch.long)
        return Proposal(token_ids.to(self.device), num_drafts.to(self.device), None, info,
                        parent_ids.to(self.device))

    def update(self, step: Step) -> None:
        argmax = step.target_ids.tolist() if step.target_ids is not None else None
        for b, emitted in enumerate(step.emitted):
            columns = self.columns[b]
            if columns is not None and argmax is not None:
                self._refine(b, [argmax[b][columns[(self.levels - 1, c)]]
                                 for c in range(self.window)])
                # The kept drafts are what was emitted but the target's own last token (a row
                # cut at EOS or its budget ends here anyway): no second read of the device.
                self.carries[b] = self._carry(self.trees[b], emitted[:-1], argmax[b])
            else:
                self.carries[b] = []
            self.columns[b], self.trees[b] = None, None
            self.sequences[b] += emitted

    def _carry(self, tree, accepted: list, argmax: list) -> list:
        """Jacobi's next guesses: the target's argmax at the nodes past the last accepted one,
        along the branch followed (the carry's own if it was followed, else the trunk's, else
        the first child's), repeated at the end up to `depth` tokens, as Jacobi pads its block.

        Example: nodes 12 -> 13 under the pending token (the trunk), nothing accepted, argmax
        [40, 41, 42] at [pending, 12, 13] -> [41, 42, 42, ...] (41 guesses the token after 40)."""
        tokens, parents, carry_nodes, trunk = tree
        node = path_nodes(tokens, parents, accepted)[-1] if accepted else -1  # the last kept
        chain = []
        for branch in (carry_nodes, trunk):
            if node == -1 or node in branch:
                chain = branch[branch.index(node) + 1:] if node in branch else branch
                if chain:
                    break
        if not chain:  # a pooled n-gram was followed: its own continuation, first child first
            child = next((n for n, p in enumerate(parents) if p == node), None)
            while child is not None:
                chain.append(child)
                child = next((n for n, p in enumerate(parents) if p == child), None)
        guesses = [argmax[n + 1] for n in chain if argmax[n + 1] >= 0]  # column n + 1: node n
        guesses = guesses or [argmax[0 if node == -1 else node + 1]]
        return (guesses + guesses[-1:] * self.depth)[:self.depth]

    def _refine(self, b: int, new: list) -> None:
        """One Jacobi step of row b's window: pool each column's n-gram, shift the levels."""
        levels = self.windows[b]
        pending = self.sequences[b][-1]  # what was fed at (0, 0), before this step's tokens
        pool = self.pools[b]
        for c in range(self.window):
            if new[c] < 0:  # no argmax there (a row with no distribution)
                continue
            first = pending if c == 0 else levels[0][c]
            gram = tuple(levels[j][c] for j in range(1, self.levels)) + (new[c],)
            kept = pool.setdefault(first, [])
            if gram in kept:
                continue
            kept.append(gram)
            self.ngrams_pooled += 1
            if len(kept) > self.candidates:  # the newest `candidates` are checked
                kept.pop(0)
        self.windows[b] = levels[1:] + [[t if t >= 0 else levels[-1][c]
                                         for c, t in enumerate(new)]]

    def select_rows(self, keep) -> None:
        keep = keep.tolist()
        self.sequences = [self.sequences[i] for i in keep]
        self.windows = [self.windows[i] for i in keep]
        self.pools = [self.pools[i] for i in keep]
        self.columns = [self.columns[i] for i in keep]
        self.carries = [self.carries[i] for i in keep]
        self.trees = [self.trees[i] for i in keep]


def add_node(tokens: list, parents: list, children: dict, parent: int, token: int) -> int:
    """The node holding `token` under `parent`: the existing one, else a new one appended."""
    key = (parent, token)
    if key not in children:
        children[key] = len(tokens)
        tokens.append(token)
        parents.append(parent)
    return children[key]


def path_nodes(tokens: list, parents: list, sequence: list) -> list:
    """The nodes holding `sequence` from the pending token down (siblings hold distinct
    tokens). Example: tokens [5, 6, 7], parents [-1, 0, 0], sequence [5, 7] -> [0, 2]."""
    nodes, node = [], -1
    for token in sequence:
        node = next(n for n, (t, p) in enumerate(zip(tokens, parents)) if p == node and t == token)
        nodes.append(node)
    return nodes
