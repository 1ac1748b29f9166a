"""specnb.course.pair_law: the two-token law test of notebooks 04 and 05 passes an exact
sampler and fails one whose second token ignores the first."""

import pytest
import torch

import specnb
from specnb.course.pair_law import exact_pair_law, pair_cells, pair_pvalue
from tiny_models import tiny_llama

PROMPT = [[3, 17, 5, 9]]
RUNS = 3000


@pytest.fixture(scope="module")
def target():
    return tiny_llama(4, std=0.3)


def test_the_cells_partition_every_pair(target):
    law = exact_pair_law(target, torch.tensor(PROMPT))
    assert law.probs.sum() == pytest.approx(1.0) and (law.probs >= 0).all()
    assert len(law.probs) == 6 * 5 + 1 and law.top_second.shape == (6, 4)
    vocab = target.config.vocab_size
    first, second = torch.meshgrid(torch.arange(vocab), torch.arange(vocab), indexing="ij")
    cells = pair_cells(law, first.flatten(), second.flatten())
    # Summing the exact pair probabilities cell by cell gives the law: every pair in one cell.
    with torch.no_grad():
        p1 = law.first_probs.double()
        ids = torch.cat([torch.tensor(PROMPT).expand(vocab, -1), torch.arange(vocab)[:, None]], 1)
        p2 = target(ids).logits[:, -1].double().softmax(-1)
    joint = (p1[:, None] * p2).flatten()
    by_cell = torch.zeros(len(law.probs), dtype=torch.float64).index_add_(0, cells, joint)
    assert torch.allclose(by_cell, law.probs, atol=1e-6)


def test_an_exact_sampler_passes_and_a_careless_one_fails(target):
    law = exact_pair_law(target, torch.tensor(PROMPT))
    exact = specnb.autoregressive(target, PROMPT * RUNS, max_new_tokens=2, temperature=1.0,
                                  generator=torch.Generator().manual_seed(0))
    assert pair_pvalue(law, exact.tokens) > 1e-3
    # The right first token, then a second drawn after the most likely first token: each token
    # has a plausible law on its own, the pair does not.
    firsts = [t[0] for t in exact.tokens]
    likely = int(law.top_first[0])
    after = specnb.autoregressive(target, [PROMPT[0] + [likely]] * RUNS, max_new_tokens=1,
                                  temperature=1.0, generator=torch.Generator().manual_seed(1))
    careless = [[f, t[0]] for f, t in zip(firsts, after.tokens)]
    assert pair_pvalue(law, careless) < 1e-3


@pytest.mark.parametrize("ids, k, match", [
    (torch.tensor(PROMPT * 2), (6, 4), "one prompt"),
    (torch.tensor(PROMPT), (0, 4), "k_first and k_second"),
    (torch.tensor(PROMPT), (6, 2.0), "k_first and k_second"),
])
def test_bad_input_is_refused(target, ids, k, match):
    with pytest.raises(ValueError, match=match):
        exact_pair_law(target, ids, k_first=k[0], k_second=k[1])


def test_runs_shorter_than_two_tokens_are_refused(target):
    law = exact_pair_law(target, torch.tensor(PROMPT))
    with pytest.raises(ValueError, match="two tokens"):
        pair_pvalue(law, [[1, 2], [3]])
    with pytest.raises(ValueError, match="at least one run"):
        pair_pvalue(law, [])
