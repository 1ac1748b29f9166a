"""Tests of `specnb.core.count_converged` and `jacobi_step`, with a fake model computed by hand.

The fake model's greedy next token after t is (3 t + 1) mod V, whatever came before, so the
greedy continuation of a prefix is known: with V = 11 after [2] it is 7, 0, 1, 4, 2, 7, ...
"""

import pytest
import torch

from specnb.core import JacobiStep, count_converged, jacobi_step

VOCAB = 11


def next_token(token: int) -> int:
    return (3 * token + 1) % VOCAB


def greedy(prefix, k):
    out, last = [], prefix[-1]
    for _ in range(k):
        last = next_token(last)
        out.append(last)
    return out


class FakeLM:
    """Stands in for `CachedLM`: `.logits(sequence, keep)` -> `[1, keep, V]`, calls recorded."""

    def __init__(self):
        self.calls = []

    def logits(self, sequence, keep=1):
        sequence = [int(t) for t in sequence]
        assert 1 <= keep <= len(sequence)
        self.calls.append((sequence, keep))
        targets = torch.tensor([next_token(t) for t in sequence[-keep:]])
        noise = torch.rand(keep, VOCAB, generator=torch.Generator().manual_seed(len(sequence)))
        return (noise + 5.0 * torch.nn.functional.one_hot(targets, VOCAB)).unsqueeze(0)


@pytest.mark.parametrize("old, new, expected", [
    ([4, 9, 2, 7], [4, 9, 5, 1], 3),  # docstring example
    ([4, 9, 2, 7], [4, 9, 2, 7], 4),  # all converged -> k
    ([4, 9, 2, 7], [4, 9, 2, 8], 4),  # the last guess never feeds anything
    ([1, 9, 2, 7], [4, 9, 2, 7], 1),  # first differs -> only new[0] is final
    ([5], [6], 1),
    ([5], [5], 1),
])
def test_count_converged(old, new, expected):
    assert count_converged(old, new) == expected


def test_greedy_helper_by_hand():
    assert greedy([2], 6) == [7, 0, 1, 4, 2, 7]


def test_step_by_hand():
    model = FakeLM()
    step = jacobi_step(model, [5, 2], [7, 0, 9, 9])
    # One forward on prefix + guesses[:-1], keeping the k = 4 positions that predict the block.
    assert model.calls == [([5, 2, 7, 0, 9], 4)]
    assert step == JacobiStep([7, 0, 1, 6], 3)  # 7, 0 were right, so 1 is final; 6 is not


def test_iterating_reaches_the_greedy_fixed_point():
    prefix, k = [2], 4
    target = greedy(prefix, k)  # [7, 0, 1, 4]
    model = FakeLM()
    guesses = [0, 0, 0, 0]
    history = []
    for _ in range(k):
        step = jacobi_step(model, prefix, guesses)
        history.append((step.guesses, step.num_converged))
        assert step.guesses[:step.num_converged] == target[:step.num_converged]
        guesses = step.guesses
    assert history == [([7, 1, 1, 1], 1), ([7, 0, 4, 4], 2), ([7, 0, 1, 2], 3),
                       ([7, 0, 1, 4], 4)]
    assert guesses == target
    # The fixed point: greedy guesses come back unchanged and all k are final.
    assert jacobi_step(model, prefix, target) == JacobiStep(target, k)


def test_random_starts_converge_within_k_steps():
    g = torch.Generator().manual_seed(0)
    model = FakeLM()
    for _ in range(20):
        k = int(torch.randint(1, 9, (1,), generator=g))
        prefix = torch.randint(0, VOCAB, (int(torch.randint(1, 5, (1,), generator=g)),),
                               generator=g)
        guesses = torch.randint(0, VOCAB, (k,), generator=g).tolist()
        target = greedy(prefix.tolist(), k)
        final = 0
        for _ in range(k):  # each step fixes at least one more token
            step = jacobi_step(model, prefix, guesses)
            assert step.num_converged >= min(final + 1, k)
            assert step.guesses[:step.num_converged] == target[:step.num_converged]
            final, guesses = step.num_converged, step.guesses
        assert guesses == target and final == k


def test_block_of_one_is_one_greedy_step():
    model = FakeLM()
    assert jacobi_step(model, [3], [8]) == JacobiStep([next_token(3)], 1)
    assert model.calls == [([3], 1)]


def test_empty_prefix_or_guesses_raise():
    with pytest.raises(ValueError, match="prefix"):
        jacobi_step(FakeLM(), [], [1, 2])
    with pytest.raises(ValueError, match="guesses"):
        jacobi_step(FakeLM(), [1], [])
