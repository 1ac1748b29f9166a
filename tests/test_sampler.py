"""Tests of `specnb.core.sampler`: the exponential race samples p exactly; logits -> probs."""

import pytest
import torch

from specnb.core import check_temperature, draw, logits_to_probs, sample
from specnb.core.sampler import greedy_tokens
from specnb.stats import SIGNIFICANCE, binomial_tolerance, chi2_pvalue, equal_mass_bins

NUM_DRAWS = 20_000


def test_token_zero_is_sampleable():
    g = torch.Generator().manual_seed(0)
    p = torch.tensor([1.0, 0.0, 0.0, 0.0])
    assert (sample(p.expand(5_000, 4), generator=g) == 0).all()
    uniform = torch.full((NUM_DRAWS, 4), 0.25)
    ids = sample(uniform, generator=g)
    frac_zero = (ids == 0).double().mean().item()
    assert abs(frac_zero - 0.25) <= binomial_tolerance(0.25, NUM_DRAWS)
    assert chi2_pvalue(ids, uniform[0]) > SIGNIFICANCE


def test_output_dtype_shape_and_seed():
    p = torch.tensor([[0.2, 0.3, 0.5], [0.0, 1.0, 0.0]])
    ids = sample(p, generator=torch.Generator().manual_seed(3))
    assert ids.dtype == torch.int64 and ids.shape == (2,) and ids[1] == 1
    batch = torch.rand(64, 50, generator=torch.Generator().manual_seed(1))
    a = sample(batch, generator=torch.Generator().manual_seed(7))
    b = sample(batch, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a, b)


def test_zero_probability_tokens_never_appear():
    g = torch.Generator().manual_seed(1)
    p = torch.rand(20, generator=g)
    p[::2] = 0.0  # even ids impossible
    p /= p.sum()
    ids = sample(p.expand(NUM_DRAWS, -1), generator=g)
    assert (ids % 2 == 1).all()
    assert set(ids.tolist()) == set(range(1, 20, 2))  # and every possible id does occur


def test_row_with_many_zeros_and_tiny_values():
    """Mostly-zero rows (like a residual) and float32 extremes stay finite and in support."""
    vocab, batch = 50_000, 200
    g = torch.Generator().manual_seed(2)
    probs = torch.zeros(batch, vocab)
    probs[:, vocab - 1] = 0.7
    probs[:, 123] = 0.3
    probs[0] = 0.0
    probs[0, 7] = 1.0  # one-hot
    probs[1] = 0.0
    probs[1, 5] = torch.finfo(torch.float32).tiny  # the only mass is the smallest normal float
    probs[2] = 0.0
    probs[2, 9] = 1e-44  # a subnormal, the only mass of its row
    ids = sample(probs, generator=g)
    assert ids[0] == 7 and ids[1] == 5 and ids[2] == 9
    assert set(ids[3:].tolist()) == {123, vocab - 1}


@pytest.mark.parametrize("shape", [(5,), (2, 3, 4), ()])
def test_bad_shape_raises(shape):
    with pytest.raises(ValueError, match="probs"):
        sample(torch.ones(shape), generator=torch.Generator().manual_seed(0))


# ----------------------------------------------------------------------------------------------
# χ²: the library sampler follows p; the same test rejects two classic wrong "races"
# ----------------------------------------------------------------------------------------------

def broken_sample_plus(probs, *, generator):
    """BROKEN on purpose: argmax(p + E) (a Gumbel-max with the log and the noise law wrong)."""
    race = torch.empty_like(probs).exponential_(generator=generator)
    return (probs + race).argmax(dim=-1)


def broken_sample_times(probs, *, generator):
    """BROKEN on purpose: argmax(p · E) instead of argmax(p / E)."""
    race = torch.empty_like(probs).exponential_(generator=generator)
    return (probs * race).argmax(dim=-1)


SAMPLERS = {"exact": sample, "p_plus_E": broken_sample_plus, "p_times_E": broken_sample_times}


def make_probs(case: str):
    """(p `[V]`, bins or None) for one named case."""
    g = torch.Generator().manual_seed(99)
    if case == "dirichlet_10":
        e = torch.empty(10, dtype=torch.float64).exponential_(generator=g)
        return (e / e.sum()).float(), None
    if case == "with_zeros_20":
        e = torch.empty(20, dtype=torch.float64).exponential_(generator=g)
        e[torch.randperm(20, generator=g)[:8]] = 0.0
        return (e / e.sum()).float(), None
    if case == "zipf_2000":  # 1/rank in a shuffled order, tested in 30 bins of equal mass
        p = (1.0 / torch.arange(1, 2001, dtype=torch.float64))[torch.randperm(2000, generator=g)]
        p = (p / p.sum()).float()
        return p, equal_mass_bins(p, 30)
    raise KeyError(case)


PARAMS = [(s, c) for s in SAMPLERS for c in ("dirichlet_10", "with_zeros_20", "zipf_2000")]


@pytest.mark.parametrize("sampler, case", PARAMS)
def test_sampler_follows_p_and_broken_samplers_are_caught(sampler, case):
    p, bins = make_probs(case)
    g = torch.Generator().manual_seed(4321)
    ids = SAMPLERS[sampler](p.expand(NUM_DRAWS, -1), generator=g)  # one batched call
    pvalue = chi2_pvalue(ids, p, bins)
    print(f"sampler χ² p-value, {sampler}, {case}: {pvalue:.3g}")
    if sampler == "exact":
        assert pvalue > SIGNIFICANCE
    else:
        assert pvalue < SIGNIFICANCE


# ----------------------------------------------------------------------------------------------
# draw, logits_to_probs, check_temperature
# ----------------------------------------------------------------------------------------------

def test_draw_greedy_is_argmax_and_sampled_is_sample():
    probs = torch.softmax(torch.randn(300, 40, generator=torch.Generator().manual_seed(0)), -1)
    assert torch.equal(draw(probs, 0.0), probs.argmax(-1))
    a = draw(probs, 0.7, generator=torch.Generator().manual_seed(5))
    b = sample(probs, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b)


@pytest.mark.parametrize("temperature", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_logits_to_probs_rows_sum_to_one(temperature, dtype):
    logits = (torch.randn(6, 1000, generator=torch.Generator().manual_seed(1)) * 4).to(dtype)
    probs = logits_to_probs(logits, temperature)
    assert probs.dtype == torch.float32 and probs.shape == logits.shape
    assert (probs >= 0).all()
    assert torch.allclose(probs.sum(-1), torch.ones(6), atol=1e-5)
    assert torch.allclose(probs, torch.softmax(logits.float() / temperature, -1))


def test_logits_to_probs_temperature_zero_is_one_hot_argmax():
    logits = torch.tensor([[0.1, 2.0, -1.0, 1.9], [-5.0, -6.0, -7.0, -8.0], [0.0, 0.0, 3.0, 0.0]])
    probs = logits_to_probs(logits, 0)
    assert probs.tolist() == [[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0]]
    assert probs.dtype == torch.float32


def test_greedy_tokens_are_the_argmax_drawn_from_the_one_hot():
    """The drafters' greedy shortcut gives the tokens of the long way, -1 included for rows
    with no distribution (NaN, +inf, all -inf), and ties go to the first index in both."""
    inf, nan = float("inf"), float("nan")
    logits = torch.cat([torch.randn(64, 50, generator=torch.Generator().manual_seed(0)),
                        torch.tensor([[-5.0, -6.0] + [-9.0] * 48, [1.0] * 50,
                                      [0.0, nan] + [0.0] * 48, [0.0, inf] + [0.0] * 48,
                                      [-inf] * 50])])
    expected = draw(logits_to_probs(logits, 0, check=False), 0, check=False)
    assert torch.equal(greedy_tokens(logits), expected)
    assert expected[-5:].tolist() == [0, 0, -1, -1, -1]


def test_temperature_changes_sharpness():
    logits = torch.tensor([1.0, 2.0, 3.0])
    cold, warm = logits_to_probs(logits, 0.5), logits_to_probs(logits, 2.0)
    assert cold[2] > logits_to_probs(logits, 1.0)[2] > warm[2]


@pytest.mark.parametrize("temperature", [-0.1, -1, float("nan"), float("inf"), float("-inf")])
def test_bad_temperature_raises(temperature):
    with pytest.raises(ValueError, match="temperature"):
        logits_to_probs(torch.zeros(1, 3), temperature)
    with pytest.raises(ValueError, match="temperature"):
        check_temperature(temperature)


def test_check_temperature_returns_float():
    assert check_temperature(0) == 0.0 and isinstance(check_temperature(1), float)


@pytest.mark.parametrize("temperature", [-1.0, float("nan")])
def test_draw_rejects_bad_temperature(temperature):
    with pytest.raises(ValueError, match="temperature"):
        draw(torch.full((1, 4), 0.25), temperature, generator=torch.Generator().manual_seed(0))
