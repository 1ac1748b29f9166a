"""`BatchedCachedLM`: every row sees exactly its own sequence, through ragged feeds and rollbacks.

Each check compares the cached, batched logits of a row with a plain forward of that row's
sequence alone (no cache, no padding).
"""

import pytest
import torch

from specnb.core.batch_kv import BatchedCachedLM
from tiny_models import VOCAB, tiny_llama

ATOL = 1e-4


@pytest.fixture(scope="module")
def model():
    return tiny_llama(21)


def last_logits_alone(model, sequence):
    with torch.no_grad():
        return model(torch.tensor([sequence])).logits[0, -1]


def assert_rows_match(model, lm, sequences, logits):
    for row, sequence in enumerate(sequences):
        torch.testing.assert_close(logits[row], last_logits_alone(model, sequence), atol=ATOL,
                                   rtol=0)
        assert int(lm.lengths[row]) == len(sequence)


def test_prefill_reads_each_rows_last_token(model):
    prompts = [[5, 6, 7], [8], [9, 10, 11, 12, 13, 14], [15, 16]]
    lm = BatchedCachedLM(model)
    logits = lm.prefill(prompts)
    assert logits.shape == (4, VOCAB)
    assert_rows_match(model, lm, prompts, logits)
    assert lm.num_forwards == 1


@pytest.mark.parametrize("compact_every", [0, 1, 3])
def test_ragged_feeds_and_rollbacks_match_rows_alone(model, compact_every):
    generator = torch.Generator().manual_seed(compact_every)
    sequences = [[3, 4, 5], [6], [7, 8, 9, 10, 11]]
    lm = BatchedCachedLM(model)
    lm.prefill(sequences)
    for step in range(12):
        width = int(torch.randint(1, 5, (1,), generator=generator))
        new_ids = torch.randint(1, VOCAB, (3, width), generator=generator)
        real = torch.randint(1, width + 1, (3,), generator=generator)  # real tokens per row
        new_valid = torch.arange(width) >= (width - real).unsqueeze(1)  # padding on the left
        logits = lm.forward(new_ids, new_valid, keep=1)[:, -1]
        for row in range(3):
            sequences[row] += new_ids[row, width - int(real[row]):].tolist()
        assert_rows_match(model, lm, sequences, logits)
        drop = torch.stack([torch.randint(0, int(real[row]) + 1, (1,), generator=generator)[0]
                            for row in range(3)])
        lm.rollback(drop)
        for row in range(3):
            sequences[row] = sequences[row][:len(sequences[row]) - int(drop[row])]
        if compact_every and step % compact_every == 0:
            lm.compact()
            assert lm.num_slots == max(len(s) for s in sequences)
    # After the last rollback, feeding one token per row still sees the rolled-back rows.
    logits = lm.forward(torch.tensor([[1], [2], [3]]), keep=1)[:, -1]
    assert_rows_match(model, lm, [s + [t] for s, t in zip(sequences, [1, 2, 3])], logits)


def test_rollback_leaves_holes_until_they_pile_up(model, monkeypatch):
    lm = BatchedCachedLM(model)
    lm.prefill([[1, 2], [3, 4]])
    lm.forward(torch.tensor([[5, 6, 7], [8, 9, 10]]))
    lm.rollback(torch.tensor([3, 1]))  # row 0 back to 2 tokens, row 1 keeps 8, 9
    # The rolled-back slots stay, masked (cropping them cost more than attending over them).
    assert lm.num_slots == 5 and lm.lengths.tolist() == [2, 4]
    assert lm.valid.tolist() == [[True, True, False, False, False], [True, True, True, True, False]]
    monkeypatch.setattr("specnb.core.batch_kv.MAX_HOLES", 1)
    lm.rollback(torch.tensor([0, 2]))  # 5 slots, longest row 2: 3 holes > 1, compacted
    assert lm.num_slots == 2 and lm.valid.all()
    assert_rows_match(model, lm, [[1, 2, 11], [3, 4, 12]],
                      lm.forward(torch.tensor([[11], [12]]), keep=1)[:, -1])


def test_select_rows_keeps_the_chosen_rows(model):
    sequences = [[1, 2, 3], [4, 5], [6, 7, 8, 9]]
    lm = BatchedCachedLM(model)
    lm.prefill(sequences)
    lm.select_rows(torch.tensor([0, 2]))
    logits = lm.forward(torch.tensor([[11], [12]]), keep=1)[:, -1]
    assert_rows_match(model, lm, [sequences[0] + [11], sequences[2] + [12]], logits)
    with pytest.raises(ValueError, match="select_rows"):
        lm.forward(torch.tensor([[1], [2], [3]]))


@pytest.mark.parametrize("start", ["prefill", "fill"])
def test_repeated_prompts_share_one_forward_and_match_rows_alone(model, start):
    """N copies of a prompt (as statistical tests run them) are prefilled once, then expanded:
    every row must still see exactly its own sequence, and grow and roll back on its own."""
    prompts = [[5, 6, 7], [8, 9], [5, 6, 7], [5, 6, 7], [8, 9]]
    lm = BatchedCachedLM(model)
    logits = lm.prefill(prompts) if start == "prefill" else lm.fill(prompts)
    assert lm.log.num_tokens == [2 * 3]  # one forward over the 2 distinct prompts, width 3
    if start == "prefill":
        assert_rows_match(model, lm, prompts, logits)
    new = torch.tensor([[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]])
    logits = lm.forward(new, keep=1)[:, -1]
    sequences = [p + n for p, n in zip(prompts, new.tolist())]
    assert_rows_match(model, lm, sequences, logits)
    lm.rollback(torch.tensor([1, 0, 2, 1, 0]))  # each row its own amount
    sequences = [s[:len(s) - k] for s, k in zip(sequences, [1, 0, 2, 1, 0])]
    logits = lm.forward(torch.tensor([[11], [12], [13], [14], [15]]), keep=1)[:, -1]
    assert_rows_match(model, lm, [s + [t] for s, t in zip(sequences, [11, 12, 13, 14, 15])],
                      logits)


def test_distinct_prompts_or_a_filled_cache_are_not_shared(model):
    lm = BatchedCachedLM(model)
    assert lm._shared_prompts([[1, 2], [3]], {}) is None  # nothing repeats
    assert lm._shared_prompts([[1, 2], [1, 2]], {"features": None}) is None  # per-row inputs
    lm.prefill([[1, 2], [1, 2]])
    assert lm._shared_prompts([[4], [4]], {}) is None  # the cache already holds rows


def random_tree(nodes, g):
    """Chunk parents [T]: column 0 continues the cache, every later one hangs below an
    earlier column."""
    return [-1] + [int(torch.randint(0, t, (1,), generator=g)) for t in range(1, nodes)]


def branch(tree, tokens, column):
    """The tokens from the chunk's first column down to `column`."""
    out = []
    while column >= 0:
        out.append(tokens[column])
        column = tree[column]
    return out[::-1]


@pytest.mark.parametrize("seed", range(3))
def test_a_tree_chunk_scores_every_branch_as_if_fed_alone(model, seed):
    g = torch.Generator().manual_seed(seed)
    prompts = [[5, 6, 7], [8], [9, 10, 11, 12, 13, 14]]
    lm = BatchedCachedLM(model)
    lm.fill(prompts)
    lm.rollback(torch.tensor([0, 0, 2]))  # holes in a row's cache must stay unseen
    prompts[2] = prompts[2][:-2]
    trees = [random_tree(6, g) for _ in prompts]
    tokens = torch.randint(1, VOCAB, (3, 6), generator=g)
    logits = lm.forward(tokens, tree=torch.tensor(trees))
    for row, prompt in enumerate(prompts):
        for column in range(6):
            sequence = prompt + branch(trees[row], tokens[row].tolist(), column)
            torch.testing.assert_close(logits[row, column], last_logits_alone(model, sequence),
                                       atol=ATOL, rtol=0)


def test_keep_only_leaves_the_cache_of_the_kept_branch(model):
    """After a tree chunk and `keep_only`, the next forward sees the prompt and the kept branch
    alone, at the right positions, as a chain would."""
    g = torch.Generator().manual_seed(7)
    prompts = [[5, 6, 7], [8, 9]]
    lm = BatchedCachedLM(model)
    lm.fill(prompts)
    trees = torch.tensor([[-1, 0, 0, 2, 1], [-1, -1, 1, 2, 0]])
    tokens = torch.randint(1, VOCAB, (2, 5), generator=g)
    lm.forward(tokens, tree=trees)
    kept = torch.tensor([[True, False, True, True, False],  # columns 0 -> 2 -> 3
                         [False, True, True, False, False]])  # 1 -> 2 (column 0 not kept)
    lm.keep_only(kept)
    sequences = [prompts[0] + tokens[0, [0, 2, 3]].tolist(), prompts[1] + tokens[1, [1, 2]].tolist()]
    assert lm.lengths.tolist() == [len(s) for s in sequences]
    nxt = torch.tensor([[3], [4]])
    logits = lm.forward(nxt)[:, -1]
    assert_rows_match(model, lm, [s + [int(t)] for s, t in zip(sequences, nxt[:, 0])], logits)


def test_a_bad_tree_is_refused_before_the_forward(model):
    lm = BatchedCachedLM(model)
    lm.fill([[5, 6, 7]])
    with pytest.raises(ValueError, match=r"parents\[0, 1\] = 1 is not an earlier node"):
        lm.forward(torch.tensor([[3, 4]]), tree=torch.tensor([[-1, 1]]))
    assert lm.num_forwards == 1
