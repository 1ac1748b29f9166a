"""specnb.course.synthetic_draft: the mixture hits the asked α exactly, and the loop stays exact."""

import numpy as np
import pytest
import torch

import specnb
from specnb.course.synthetic_draft import SyntheticDraft, emitted_per_iteration, mixture_probs, \
    mixture_weight
from tiny_models import VOCAB


def overlap(p, q):
    return torch.minimum(p, q).sum(-1)


def test_mixture_weight_by_hand():
    p = torch.tensor([[0.5, 0.3, 0.2]])
    assert mixture_weight(p, torch.tensor([2]), 0.6).item() == pytest.approx(0.5)
    q = mixture_probs(p, torch.tensor([2]), 0.6)
    assert torch.allclose(q, torch.tensor([[0.25, 0.15, 0.6]]))
    assert overlap(p, q).item() == pytest.approx(0.6)


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.7, 0.95, 1.0])
def test_mixture_overlap_is_alpha(alpha):
    generator = torch.Generator().manual_seed(0)
    p = torch.softmax(3 * torch.randn(64, VOCAB, generator=generator), -1)
    noise = torch.randint(VOCAB, (64,), generator=generator)
    q = mixture_probs(p, noise, alpha)
    assert torch.allclose(q.sum(-1), torch.ones(64))
    # exact wherever p(r) <= α (λ = 0 otherwise: that row's overlap is p(r))
    expected = torch.maximum(torch.full((64,), alpha), p.gather(1, noise.view(-1, 1)).squeeze(1))
    assert torch.allclose(overlap(p, q), expected, atol=1e-6)


def test_greedy_noise_on_the_argmax_gives_q_equal_p():
    p = torch.tensor([[0.0, 1.0, 0.0]])
    assert mixture_weight(p, torch.tensor([1]), 0.3).item() == 1.0
    assert torch.equal(mixture_probs(p, torch.tensor([1]), 0.3), p)


@pytest.mark.parametrize("alpha", [-0.1, 1.5])
def test_bad_alpha(target, alpha):
    with pytest.raises(ValueError, match="alpha"):
        SyntheticDraft(target, alpha)


def test_emitted_per_iteration_drops_each_rows_last():
    from specnb.methods.results import EmittedToken, GenerationResult, Iteration, Stats

    def it(row, n):
        return Iteration(emitted=[EmittedToken(0, "target")] * n, row=row)
    result = GenerationResult("speculative", [[], []], Stats(),
                              [it(0, 2), it(1, 3), it(0, 5), it(0, 1), it(1, 4)])
    assert emitted_per_iteration(result) == [2, 5, 3]
    assert emitted_per_iteration(result, drop_last=False) == [2, 5, 1, 3, 4]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_loop_measures_the_dialled_alpha(target, prompts, temperature):
    """α̂ is the asked α; tokens per iteration match (1 − α^{γ+1}) / (1 − α) within 4 SE."""
    alpha, gamma = 0.7, 3
    generator = torch.Generator().manual_seed(0)
    batch = [p[0].tolist() for p in prompts] * 8  # enough iterations that 4 SE tell 0.7 from 0.6
    result = specnb.speculative(target, SyntheticDraft(target, alpha), batch, gamma=gamma,
                                max_new_tokens=64, temperature=temperature, generator=generator,
                                trace=True)
    # sampled: exact but where p(r) > α (rare); greedy: λ = α, plus noise landing on the argmax
    assert specnb.estimate_alpha(result) == pytest.approx(alpha, abs=0.01 if temperature
                                                          else 0.05)
    counts = np.array(emitted_per_iteration(result))
    expected = specnb.expected_tokens_per_iteration(alpha, gamma)
    tolerance = 4 * counts.std() / np.sqrt(len(counts))
    assert abs(counts.mean() - expected) < tolerance
    assert tolerance < expected - specnb.expected_tokens_per_iteration(0.6, gamma)


def test_greedy_output_is_still_the_targets(target, prompts):
    generator = torch.Generator().manual_seed(1)
    ids = prompts[1]
    plain = specnb.autoregressive(target, ids, max_new_tokens=20)
    synthetic = specnb.speculative(target, SyntheticDraft(target, 0.5), ids, gamma=4,
                                   max_new_tokens=20, generator=generator)
    assert synthetic.tokens == plain.tokens
