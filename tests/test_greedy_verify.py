"""Greedy checking from argmax ids: the same verdicts, bit for bit, as the exact rules on the
one-hot laws they replace (`verify(greedy=True)`, `tree_verify(greedy=True)`), on random
batches built so that drafts often match; and the loop gives the same output and trace with
the id path as with the laws."""

import pytest
import torch

from specnb.core.sampler import argmax, greedy_ids, logits_to_probs
from specnb.core.tree_verify import greedy_tree_verify, tree_verify
from specnb.core.verify import greedy_verify, verify
import importlib

from specnb.methods import run as run_module
from tiny_models import perturbed, tiny_llama
from tree_drafters import TopKTree

loop = importlib.import_module("specnb.methods.speculative")

V = 11


def case(seed: int, batch: int, columns: int):
    """Logits [B, C, V] with few distinct tokens (so drafts hit), drafts that copy the argmax
    with probability 1/2, draft laws (or None) and per-row counts."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, columns, V, generator=g)
    argmax = logits.argmax(-1)
    drafts = torch.where(torch.rand(batch, columns - 1, generator=g) < 0.5, argmax[:, :-1],
                         torch.randint(0, V, (batch, columns - 1), generator=g))
    q = torch.randn(batch, columns - 1, V, generator=g).softmax(-1)
    q[0, 0] = 0.0  # a draft law that cannot produce the drafted token
    q[0, 0, (drafts[0, 0] + 1) % V] = 1.0
    num_drafts = torch.randint(0, columns, (batch,), generator=g)
    return logits, drafts, q, num_drafts


def same(a, b):
    assert type(a) is type(b)
    for name, value in vars(a).items():
        assert torch.equal(value, getattr(b, name)), name


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("with_q", [True, False])
def test_chain_verdict_equals_verify_on_one_hot_laws(seed, with_q):
    logits, drafts, q, num_drafts = case(seed, batch=6, columns=5)
    probs = logits_to_probs(logits, 0.0)
    bonus = probs.gather(1, num_drafts.view(-1, 1, 1).expand(-1, 1, V)).argmax(-1)  # [B, 1]
    expected = verify(probs[:, :-1], q if with_q else None, drafts, bonus,
                      num_drafts=num_drafts, greedy=True)
    same(greedy_verify(greedy_ids(logits), q if with_q else None, drafts,
                       num_drafts=num_drafts), expected)


def random_parents(g, batch: int, nodes: int) -> torch.Tensor:
    parents = torch.full((batch, nodes), -1, dtype=torch.long)
    for j in range(1, nodes):
        parents[:, j] = torch.randint(-1, j, (batch,), generator=g)
    return parents


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("with_q", [True, False])
def test_tree_verdict_equals_tree_verify_on_one_hot_laws(seed, with_q):
    logits, drafts, q, num_drafts = case(seed, batch=6, columns=7)
    g = torch.Generator().manual_seed(100 + seed)
    parents = random_parents(g, 6, 6)
    # A child copies the argmax after its parent half the time, so branches get deep.
    after_parent = logits.argmax(-1).gather(1, parents + 1)
    drafts = torch.where(torch.rand(6, 6, generator=g) < 0.6, after_parent, drafts)
    drafts[1, 5] = -1  # a padding node (row 1 has fewer drafts)
    num_drafts[1] = min(int(num_drafts[1]), 5)
    expected = tree_verify(logits_to_probs(logits, 0.0), q if with_q else None, drafts, parents,
                           num_drafts=num_drafts, greedy=True)
    same(greedy_tree_verify(greedy_ids(logits), q if with_q else None, drafts, parents,
                            num_drafts=num_drafts), expected)
    assert expected.num_accepted.max() >= 2 or seed % 5  # the walk does go deep sometimes


@pytest.mark.parametrize("seed", range(40))
def test_the_walk_at_once_equals_the_walk_node_by_node(seed):
    """Many shapes: siblings that repeat a token (the first one is kept, the later ones are
    not tried), chains, padding whose parents are anything, rows without drafts."""
    g = torch.Generator().manual_seed(1000 + seed)
    batch, nodes = 8, int(torch.randint(1, 10, (1,), generator=g))
    logits = torch.randn(batch, nodes + 1, 3, generator=g)  # 3 tokens: many repeats
    parents = random_parents(g, batch, nodes)
    if seed % 4 == 0:
        parents[:] = torch.arange(nodes) - 1  # a chain
    after_parent = logits.argmax(-1).gather(1, parents + 1)
    drafts = torch.where(torch.rand(batch, nodes, generator=g) < 0.7, after_parent,
                         torch.randint(0, 3, (batch, nodes), generator=g))
    num_drafts = torch.randint(0, nodes + 1, (batch,), generator=g)
    padding = torch.arange(nodes) >= num_drafts.unsqueeze(1)
    garbage = torch.randint(-1, nodes, (batch, nodes), generator=g)  # in range, not a tree
    parents = torch.where(padding, garbage, parents)  # padding: not part of the tree
    expected = tree_verify(logits_to_probs(logits, 0.0), None, drafts, parents,
                           num_drafts=num_drafts, greedy=True)
    same(greedy_tree_verify(greedy_ids(logits), None, drafts, parents, num_drafts=num_drafts),
         expected)


def test_greedy_ids_refuses_a_broken_row_like_the_laws_do():
    logits = torch.zeros(2, 3, V)
    logits[1, 2, 4] = float("nan")
    with pytest.raises(ValueError, match="NaN or \\+inf"):
        greedy_ids(logits)
    with pytest.raises(ValueError, match="NaN or \\+inf"):
        logits_to_probs(logits, 0.0)
    assert greedy_ids(logits, check=False)[1, 2] == -1
    assert greedy_ids(torch.full((1, V), float("-inf")), check=False).tolist() == [-1]
    with pytest.raises(ValueError, match="float tensor"):
        greedy_ids(torch.zeros(3, dtype=torch.long))


@pytest.mark.parametrize("tree", [False, True])
def test_the_loop_gives_the_same_output_and_trace_either_way(monkeypatch, tree):
    target = tiny_llama(1)
    draft = perturbed(target, seed=2, noise=0.05)
    drafter = TopKTree(draft, k=2, depth=2) if tree else draft
    prompts = [[1, 5, 7], [3, 2, 9, 4, 8]]

    def generate():
        return loop.speculative(target, drafter, prompts, gamma=4 if tree else 2,
                                max_new_tokens=12, trace=True)

    calls = {"verify_greedy": 0, "verify_drafts": 0}  # which path each run took

    def counted(name):
        original = getattr(loop, name)

        def wrapper(*args, **kwargs):
            calls[name] += 1
            return original(*args, **kwargs)
        return wrapper
    for name in calls:
        monkeypatch.setattr(loop, name, counted(name))
    fast = generate()
    assert calls["verify_greedy"] > 0 and calls["verify_drafts"] == 0
    init = run_module.Run.__init__

    def on_laws(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.greedy = False

    monkeypatch.setattr(run_module.Run, "__init__", on_laws)
    monkeypatch.setattr(loop, "tree_verify", lambda *a, **k: tree_verify(
        *a, **{**k, "greedy": True}))
    greedy_calls = calls["verify_greedy"]
    slow = generate()
    assert calls["verify_greedy"] == greedy_calls and calls["verify_drafts"] == greedy_calls
    assert fast.tokens == slow.tokens
    assert fast.stats.accepted > 4  # drafts were checked, and some passed
    assert len(fast.trace) == len(slow.trace)
    for a, b in zip(fast.trace, slow.trace):
        assert (a.drafted, a.emitted) == (b.drafted, b.emitted)


@pytest.mark.parametrize("size", [5, 256, 600, 49152, 50257])
def test_chunked_argmax_is_torchs_argmax(size):
    """Ties, NaNs and -inf placed anywhere, the last short chunk included: the same index."""
    g = torch.Generator().manual_seed(size)
    scores = torch.randint(0, 40, (6, 3, size), generator=g).float()  # many ties
    scores[0, 0, -1] = 1e9  # the maximum in the short last chunk
    scores[0, 1, 3] = scores[0, 1, -1] = 1e9  # tied across chunks: the first wins
    scores[1, 0, -1] = float("nan")  # a NaN in the last chunk only
    scores[1, 1, size // 2] = scores[1, 1, -1] = float("nan")
    scores[2, 0] = float("-inf")
    scores[2, 1, :size // 3] = float("-inf")
    assert torch.equal(argmax(scores), scores.argmax(-1))
