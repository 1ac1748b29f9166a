"""Token trees: the tree's masks and positions, and `tree_verify`'s exactness.

The rule is checked twice, independently: an exact enumeration (a few lines of plain Python
walk every outcome of one iteration with its probability, on a 3-token vocabulary, drawn
nodes included) shows that the rule emits the target's joint law, and that the broken variant
(a rejected point mass left in r) does not; a χ² test then shows that the batched
`tree_verify` draws outcomes with the enumeration's law, and catches the broken variant.
"""

import functools
import itertools
import math

import pytest
import torch

from specnb.core.tree import (chain_parents, check_parents, kept_columns, tree_ancestors,
                              tree_depths, tree_mask, tree_positions)
from specnb.core.tree_verify import tree_verify
from specnb.core.verify import verify
from specnb.stats import SIGNIFICANCE, chi2_pvalue

V = 3  # tokens of the toy target


@functools.lru_cache(maxsize=None)
def law(context: tuple, salt: int = 0) -> list:
    """A fixed, context-dependent law over V tokens (float64), with a zero now and then."""
    g = torch.Generator().manual_seed(hash((context, salt)) % 2**31)
    weights = torch.rand(V, generator=g, dtype=torch.float64) ** 2
    if weights[0] < 0.1:  # some contexts forbid token 0: residuals must cope with zeros
        weights[0] = 0.0
    return tuple((weights / weights.sum()).tolist())


# Trees as (parents, kinds): kind "point" is a deterministic candidate (its token given), "q" a
# node drawn from the draft law law(context, salt=1).
TREES = {
    "chain of drawn nodes": ([-1, 0, 1], ["q", "q", "q"]),
    "three point siblings": ([-1, -1, -1], [("point", 0), ("point", 1), ("point", 2)]),
    "point siblings, one with a child": ([-1, -1, 1], [("point", 2), ("point", 1),
                                                       ("point", 0)]),
    "drawn siblings (multi-round)": ([-1, -1, 0], ["q", "q", "q"]),
    "mixed depths": ([-1, 0, -1, 2, 2], [("point", 1), ("point", 1), ("point", 0), "q", "q"]),
}


def tokens_law(parents, kinds, prefix=(7,)):
    """[(node tokens, their probability)] over the draws of the "q" nodes."""
    options = []
    for j, kind in enumerate(kinds):
        options.append([kind[1]] if kind != "q" else list(range(V)))
    out = []
    for tokens in itertools.product(*options):
        weight = 1.0
        for j, kind in enumerate(kinds):
            if kind == "q":
                weight *= law(prefix + path_tokens(parents, tokens, parents[j]), 1)[tokens[j]]
        if weight > 0:
            out.append((tokens, weight))
    return out


def path_tokens(parents, tokens, node) -> tuple:
    """The tokens from the root down to `node` (-1: the pending token, nothing)."""
    path = []
    while node >= 0:
        path.append(tokens[node])
        node = parents[node]
    return tuple(reversed(path))


def reference_outcomes(parents, kinds, tokens, prefix=(7,), renormalize=True) -> dict:
    """Every output of one iteration for fixed node tokens, with its exact probability."""

    def walk(node, context) -> dict:
        r = law(context)
        outcomes, reach = {}, 1.0
        for child in [j for j, parent in enumerate(parents) if parent == node]:
            x = tokens[child]
            q = [float(v == x) for v in range(V)] if kinds[child] != "q" else law(context, 1)
            accept = min(1.0, r[x] / q[x]) if q[x] > 0 else float(r[x] > 0)
            for rest, prob in walk(child, context + (x,)).items():
                outcomes[(x,) + rest] = outcomes.get((x,) + rest, 0.0) + reach * accept * prob
            reach *= 1.0 - accept
            if kinds[child] != "q" and not renormalize:
                continue
            residual = [max(0.0, a - b) for a, b in zip(r, q)]
            mass = sum(residual)
            r = [v / mass for v in residual] if mass > 0 else r
        for v in range(V):
            if r[v] > 0:
                outcomes[(v,)] = outcomes.get((v,), 0.0) + reach * r[v]
        return outcomes

    return walk(-1, prefix)


def joint_law(parents, kinds, length, prefix=(7,), renormalize=True) -> dict:
    """Law of the first `length` tokens when one iteration is followed by the target itself."""
    total = {}
    for tokens, weight in tokens_law(parents, kinds, prefix):
        for out, prob in reference_outcomes(parents, kinds, tokens, prefix, renormalize).items():
            for tail in itertools.product(range(V), repeat=max(0, length - len(out))):
                seq = (out + tail)[:length]
                extra = math.prod(law(prefix + seq[:i])[seq[i]] for i in range(len(out), length))
                total[seq] = total.get(seq, 0.0) + weight * prob * extra
    return total


def target_joint(length, prefix=(7,)) -> dict:
    return {seq: math.prod(law(prefix + seq[:i])[seq[i]] for i in range(length))
            for seq in itertools.product(range(V), repeat=length)}


# ---- the tree's shape ----------------------------------------------------------------------

def test_depths_ancestors_mask_and_positions_of_a_small_tree():
    parents = torch.tensor([[-1, 0, -1, 2]])
    assert tree_depths(parents).tolist() == [[1, 2, 1, 2]]
    assert tree_ancestors(parents).long().tolist() == [[[1, 0, 0, 0], [1, 1, 0, 0],
                                                        [0, 0, 1, 0], [0, 0, 1, 1]]]
    mask = tree_mask(parents, torch.tensor([[True, True, True, True, False]]))
    assert mask.long().tolist() == [[[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0],
                                     [1, 0, 0, 1, 0], [1, 0, 0, 1, 0]]]  # padding seen by none
    assert tree_positions(parents, torch.tensor([10])).tolist() == [[10, 11, 12, 11, 12]]
    assert chain_parents(2, 3).tolist() == [[-1, 0, 1], [-1, 0, 1]]
    assert tree_depths(chain_parents(1, 4)).tolist() == [[1, 2, 3, 4]]
    assert kept_columns(torch.tensor([[2, 3, -1, -1]])).tolist() == [[True, False, False,
                                                                       True, True]]
    assert kept_columns(torch.zeros(2, 0, dtype=torch.long)).tolist() == [[True], [True]]


@pytest.mark.parametrize("parents, message", [
    ([[-1, 1]], r"parents\[0, 1\] = 1 is not an earlier node"),  # itself: a cycle
    ([[-1, 0, 3, -1]], r"parents\[0, 2\] = 3 is not an earlier node"),  # out of order
    ([[-1, 9]], r"parents\[0, 1\] = 9 is not an earlier node"),  # out of range
    ([[-2, 0]], r"parents\[0, 0\] = -2 is below -1"),
])
def test_bad_parents_are_refused_naming_the_node(parents, message):
    with pytest.raises(ValueError, match=message):
        check_parents(torch.tensor(parents))


def test_padding_nodes_are_not_checked_and_bad_types_are_refused():
    check_parents(torch.tensor([[-1, 5, 7]]), torch.tensor([1]))  # nodes 1, 2 are padding
    with pytest.raises(ValueError, match="int64 tensor"):
        check_parents(torch.tensor([[-1.0, 0.0]]))
    with pytest.raises(ValueError, match="int64 tensor"):
        check_parents([[-1, 0]])


# ---- exactness -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", TREES)
def test_enumeration_the_rule_emits_the_target_joint(name):
    parents, kinds = TREES[name]
    length = max(tree_depths(torch.tensor([parents]))[0].tolist()) + 1
    got, want = joint_law(parents, kinds, length), target_joint(length)
    assert sum(got.values()) == pytest.approx(1.0, abs=1e-12)
    assert max(abs(got.get(s, 0.0) - p) for s, p in want.items()) < 1e-12


def test_enumeration_catches_a_sibling_left_in_r():
    """Leave a rejected point mass in r and the siblings after it are accepted too rarely:
    the joint is no longer the target's."""
    worst = 0.0
    for name in ("three point siblings", "point siblings, one with a child", "mixed depths"):
        parents, kinds = TREES[name]
        got = joint_law(parents, kinds, 3, renormalize=False)
        worst = max(worst, max(abs(got.get(s, 0.0) - p) for s, p in target_joint(3).items()))
    assert worst > 0.02


def batch_of(parents, kinds, rows, prefix=(7,), seed=0):
    """`rows` copies of the tree (its "q" nodes drawn per row from their law) as tensors."""
    g = torch.Generator().manual_seed(seed)
    n = len(parents)
    token_ids = torch.zeros(rows, n, dtype=torch.long)
    for j, kind in enumerate(kinds):
        if kind != "q":
            token_ids[:, j] = kind[1]
    target = torch.zeros(rows, n + 1, V, dtype=torch.float32)
    draft = torch.zeros(rows, n, V, dtype=torch.float32)
    laws = {}
    for j, kind in enumerate(kinds):  # parents first, so a drawn node's context is known
        if kind == "q":
            contexts = [prefix + path_tokens(parents, row, parents[j])
                        for row in token_ids.tolist()]
            for c in set(contexts):
                laws.setdefault((c, 1), torch.tensor(law(c, 1)))
            q = torch.stack([laws[(c, 1)] for c in contexts]).float()
            token_ids[:, j] = torch.multinomial(q, 1, generator=g).squeeze(1)
            draft[:, j] = q
        else:
            draft[:, j] = torch.nn.functional.one_hot(token_ids[:, j], V).float()
    for row, tokens in enumerate(token_ids.tolist()):
        target[row, 0] = torch.tensor(law(prefix))
        for j in range(n):
            target[row, j + 1] = torch.tensor(law(prefix + path_tokens(parents, tokens, j)))
    return target, draft, token_ids, torch.tensor([parents] * rows)


def outcome_pvalue(verdict, law_of_outcomes: dict) -> float:
    keys = sorted(law_of_outcomes)
    index = {k: i for i, k in enumerate(keys)}
    outcomes = [tuple(t for t in row if t >= 0) for row in verdict.tokens.tolist()]
    samples = torch.tensor([index.get(o, len(keys)) for o in outcomes])
    return chi2_pvalue(samples, torch.tensor([law_of_outcomes[k] for k in keys]))


@pytest.mark.parametrize("name", TREES)
def test_tree_verify_draws_the_enumerated_outcomes(name):
    parents, kinds = TREES[name]
    target, draft, token_ids, parents_t = batch_of(parents, kinds, 20_000, seed=1)
    point_only = all(k != "q" for k in kinds)
    verdict = tree_verify(target, None if point_only else draft, token_ids, parents_t,
                          generator=torch.Generator().manual_seed(2))
    expected = {}
    for tokens, weight in tokens_law(parents, kinds):
        for out, prob in reference_outcomes(parents, kinds, tokens).items():
            expected[out] = expected.get(out, 0.0) + weight * prob
    assert outcome_pvalue(verdict, expected) > SIGNIFICANCE
    # The path and the counts agree with the tokens.
    depth = verdict.num_accepted
    assert torch.equal((verdict.path >= 0).sum(1), depth)
    assert torch.equal(token_ids.gather(1, verdict.path.clamp_min(0))[verdict.path >= 0],
                       verdict.tokens[:, :-1][verdict.path >= 0])


def test_tree_verify_broken_variant_is_caught():
    parents, kinds = TREES["three point siblings"]
    target, _, token_ids, parents_t = batch_of(parents, kinds, 20_000, seed=3)
    verdict = tree_verify(target, None, token_ids, parents_t, renormalize=False,
                          generator=torch.Generator().manual_seed(4))
    assert outcome_pvalue(verdict, reference_outcomes(parents, kinds, (0, 1, 2))) < SIGNIFICANCE


def test_greedy_keeps_the_longest_branch_matching_the_argmax():
    # Target argmax: 1 after the pending token, then 2 after [1], then 0 after [1, 2].
    eye = torch.eye(4)
    target = torch.stack([eye[1], eye[3], eye[2], eye[3], eye[0], eye[1]]).unsqueeze(0)
    parents = torch.tensor([[-1, -1, 1, 1, -1]])  # 0:[3]  1:[1]  2:[1,0]  3:[1,2]  4:[2]
    token_ids = torch.tensor([[3, 1, 0, 2, 2]])
    verdict = tree_verify(target[:, :6], None, token_ids, parents, greedy=True)
    assert verdict.tokens.tolist() == [[1, 2, 0, -1, -1, -1]]
    assert verdict.path.tolist() == [[1, 3, -1, -1, -1]] and verdict.num_accepted.tolist() == [2]
    assert verdict.tried.tolist() == [[True, True, True, True, False]]


@pytest.mark.parametrize("seed", range(3))
def test_a_chain_verifies_as_verify_does_when_greedy(seed):
    g = torch.Generator().manual_seed(seed)
    batch, gamma, vocab = 32, 4, 6
    target = torch.nn.functional.one_hot(torch.randint(0, vocab, (batch, gamma + 1),
                                                       generator=g), vocab).float()
    drafts = torch.where(torch.rand(batch, gamma, generator=g) < 0.7, target[:, :gamma].argmax(-1),
                         torch.randint(0, vocab, (batch, gamma), generator=g))
    num_drafts = torch.randint(0, gamma + 1, (batch,), generator=g)
    bonus = target.argmax(-1).gather(1, num_drafts.unsqueeze(1))
    chain = verify(target[:, :gamma], None, drafts, bonus, num_drafts=num_drafts, greedy=True)
    tree = tree_verify(target, None, drafts, chain_parents(batch, gamma), num_drafts=num_drafts,
                       greedy=True)
    assert torch.equal(chain.tokens, tree.tokens)
    assert torch.equal(chain.num_accepted, tree.num_accepted)


def test_bad_tree_verify_input_is_refused_before_anything_runs():
    target = torch.full((1, 3, 4), 0.25)
    ids = torch.tensor([[0, 1]])
    with pytest.raises(ValueError, match=r"parents\[0, 1\] = 1"):
        tree_verify(target, None, ids, torch.tensor([[-1, 1]]))
    with pytest.raises(ValueError, match="draft_token_ids must hold ids"):
        tree_verify(target, None, torch.tensor([[0, 4]]), torch.tensor([[-1, 0]]))
    with pytest.raises(ValueError, match=r"draft_token_ids must be int64 \[B, N\]"):
        tree_verify(target, None, torch.tensor([[0]]), torch.tensor([[-1]]))
    with pytest.raises(ValueError, match="num_drafts"):
        tree_verify(target, None, ids, torch.tensor([[-1, 0]]), num_drafts=torch.tensor([3]))
    with pytest.raises(ValueError, match="finite and non-negative"):
        tree_verify(target * float("nan"), None, ids, torch.tensor([[-1, 0]]))


def test_trie_merges_shared_starts_and_branches_undo_it():
    from specnb.core.tree import branches, trie

    tokens, parents = trie([[5, 6], [5, 7], [8], [5, 6, 9]])
    assert (tokens, parents) == ([5, 6, 7, 8, 9], [-1, 0, 0, -1, 1])
    assert branches(tokens, parents) == [[5], [5, 6], [5, 7], [8], [5, 6, 9]]
    assert trie([]) == ([], [])
