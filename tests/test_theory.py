"""Tests of `specnb.theory`: the closed forms of Leviathan et al. (2023), checked by hand."""

import math

import pytest

from specnb.theory import expected_tokens_per_iteration, optimal_gamma, predicted_speedup


def test_docstring_examples():
    assert expected_tokens_per_iteration(0.5, 2) == pytest.approx(1.75, abs=1e-12)
    # (1 − 0.8^5) / 0.2 = 3.3616 tokens per iteration, over 4 · 0.05 + 1 = 1.2: 2.80133...
    assert predicted_speedup(0.8, 4, 0.05) == pytest.approx(3.3616 / 1.2, rel=1e-12)


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.5, 0.9, 0.999])
@pytest.mark.parametrize("gamma", [0, 1, 2, 5, 17])
def test_expected_tokens_is_the_geometric_sum(alpha, gamma):
    """(1 − α^{γ+1}) / (1 − α) = 1 + α + ... + α^γ: the token at j needs j leading accepts."""
    assert expected_tokens_per_iteration(alpha, gamma) == pytest.approx(
        sum(alpha ** j for j in range(gamma + 1)), rel=1e-9)


@pytest.mark.parametrize("gamma", [0, 1, 4, 64])
def test_alpha_one_gives_gamma_plus_one_and_is_continuous(gamma):
    assert expected_tokens_per_iteration(1.0, gamma) == gamma + 1
    assert expected_tokens_per_iteration(1 - 1e-9, gamma) == pytest.approx(gamma + 1, rel=1e-6)
    assert expected_tokens_per_iteration(0.0, gamma) == 1.0


@pytest.mark.parametrize("alpha", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("cost_ratio", [0.0, 0.1, 2.0])
def test_gamma_zero_is_autoregressive(alpha, cost_ratio):
    assert expected_tokens_per_iteration(alpha, 0) == 1.0
    assert predicted_speedup(alpha, 0, cost_ratio) == 1.0


def test_speedup_formula_by_hand():
    # α = 0.5, γ = 3, c = 0.25: (1 + .5 + .25 + .125) / (3 · 0.25 + 1) = 1.875 / 1.75
    assert predicted_speedup(0.5, 3, 0.25) == pytest.approx(1.875 / 1.75, rel=1e-12)
    # Free drafts (c = 0): the speedup is the tokens per iteration.
    assert predicted_speedup(0.7, 5, 0.0) == pytest.approx(expected_tokens_per_iteration(0.7, 5))
    # α = 1, c = 1: every γ breaks even.
    assert predicted_speedup(1.0, 6, 1.0) == pytest.approx(1.0)


def test_optimal_gamma_hand_computed():
    # α = 0.8, c = 0.05: speedups 1, 1.714, 2.218, 2.567, 2.801, 2.951, 3.040, 3.082,
    # 3.092 (γ = 8), 3.078, 3.047, ...: the maximum is at γ = 8.
    assert optimal_gamma(0.8, 0.05) == 8
    assert predicted_speedup(0.8, 8, 0.05) > predicted_speedup(0.8, 7, 0.05)
    assert predicted_speedup(0.8, 8, 0.05) > predicted_speedup(0.8, 9, 0.05)
    # α = 0.3, c = 0.5: γ = 1 gives 1.3 / 1.5 < 1, so drafting never pays.
    assert optimal_gamma(0.3, 0.5) == 0
    # c = 0 and α < 1: drafting is free but a useless draft (α = 0) gains nothing, and among
    # equal speedups the smallest γ is returned; a useful free draft takes the largest γ allowed.
    assert optimal_gamma(0.0, 0.0) == 0
    assert optimal_gamma(0.5, 0.0, max_gamma=10) == 10
    assert optimal_gamma(1.0, 0.0, max_gamma=10) == 10
    assert optimal_gamma(0.9, 0.05, max_gamma=3) == 3  # capped by max_gamma


@pytest.mark.parametrize("cost_ratio", [0.001, 0.01, 0.05, 0.2, 0.5])
def test_optimal_gamma_grows_with_alpha(cost_ratio):
    alphas = [i / 100 for i in range(101)]
    gammas = [optimal_gamma(a, cost_ratio) for a in alphas]
    assert all(g1 <= g2 for g1, g2 in zip(gammas, gammas[1:]))
    assert gammas[0] == 0 and gammas[-1] == 64  # from "never draft" to "draft the maximum"


@pytest.mark.parametrize("alpha", [0.3, 0.6, 0.9, 0.99])
def test_optimal_gamma_shrinks_as_drafts_get_costlier(alpha):
    gammas = [optimal_gamma(alpha, c / 100) for c in range(1, 101)]
    assert all(g1 >= g2 for g1, g2 in zip(gammas, gammas[1:]))
    assert gammas[0] > gammas[-1]


@pytest.mark.parametrize("call, word", [
    (lambda: expected_tokens_per_iteration(-0.1, 2), "alpha"),
    (lambda: expected_tokens_per_iteration(1.1, 2), "alpha"),
    (lambda: expected_tokens_per_iteration(math.nan, 2), "alpha"),
    (lambda: expected_tokens_per_iteration(0.5, -1), "gamma"),
    (lambda: expected_tokens_per_iteration(0.5, 2.5), "gamma"),
    (lambda: predicted_speedup(0.5, 2, -0.1), "cost_ratio"),
    (lambda: predicted_speedup(0.5, 2, math.nan), "cost_ratio"),
    (lambda: predicted_speedup(2.0, 2, 0.1), "alpha"),
    (lambda: optimal_gamma(-0.5, 0.1), "alpha"),
    (lambda: optimal_gamma(0.5, -0.1), "cost_ratio"),
])
def test_bad_inputs_raise(call, word):
    with pytest.raises(ValueError, match=word):
        call()


def test_optimal_gamma_rejects_negative_max_gamma_by_name():
    with pytest.raises(ValueError, match="max_gamma"):
        optimal_gamma(0.5, 0.1, max_gamma=-1)


def run_of(*milliseconds, prompt=None):
    """A one-row run whose decoding steps (1, 2, ...) took these target times, as the loop
    writes its trace; `prompt`: a step 0 first, holding the prompt's forward (Jacobi's trace)."""
    from specnb.methods.results import GenerationResult, Iteration, Stats
    steps = [Iteration(target_s=ms / 1e3, step=step + 1) for step, ms in enumerate(milliseconds)]
    if prompt is not None:
        steps.insert(0, Iteration(target_s=prompt / 1e3, step=0))
    return GenerationResult("x", [[]], Stats(), steps)


def test_in_loop_checking_cost_leaves_the_prompt_out_and_pairs_the_runs():
    from specnb.theory import decoding_step_seconds, in_loop_checking_cost
    assert decoding_step_seconds(run_of(12, 14)) == pytest.approx([0.012, 0.014])
    assert decoding_step_seconds(run_of(12, 14, prompt=90)) == pytest.approx([0.012, 0.014])
    # the docstring's example; a prompt's forward of any length changes nothing
    paid = in_loop_checking_cost([run_of(12, 14, prompt=500)], [run_of(10, 10, 10)])
    assert paid["median"] == pytest.approx(1.3) and paid["n"] == 1
    paid = in_loop_checking_cost([run_of(12), run_of(30), run_of(15)],
                                 [run_of(10), run_of(10), run_of(10)])
    assert (paid["low"], paid["median"], paid["high"]) == pytest.approx((1.2, 1.5, 3.0))
    with pytest.raises(ValueError, match="as many runs"):
        in_loop_checking_cost([run_of(1, 2)], [])
    with pytest.raises(ValueError, match="at least one decoding step"):
        in_loop_checking_cost([run_of(prompt=1)], [run_of(1, 2)])


def test_position_counts_by_hand_and_against_the_loops_own_counters():
    """Three steps of γ = 3 (accept 2 then reject; accept all; none drafted) and a short last
    block; then a real run, whose counters the loop keeps apart from its trace."""
    from specnb.methods.results import DraftedToken, GenerationResult, Iteration, Stats
    from specnb.theory import position_counts

    def step(*statuses):
        return Iteration(step=1, drafted=[DraftedToken(0, 1.0, 1.0, 1.0, 1.0, s)
                                          for s in statuses])
    a, r, u = "accepted", "rejected", "unverified"
    run = GenerationResult("x", [[]], Stats(), [step(a, a, r), step(a, a, a), step(), step(r, u)])
    counts = position_counts(run, 3)
    assert (counts.reached, counts.accepted, counts.beyond, counts.drafting_steps) == \
        ([3, 2, 2], [2, 2, 1], [2, 2, 1], 3)
    assert counts.conditional == pytest.approx([2 / 3, 1.0, 0.5])
    assert counts.per_draft == pytest.approx([2 / 3, 2 / 3, 1 / 3])
    empty = position_counts(GenerationResult("x", [[]], Stats(), [step()]), 2)
    assert all(math.isnan(v) for v in empty.conditional + empty.per_draft)

    import torch
    import specnb
    from tiny_models import tiny_llama
    target = tiny_llama(11, vocab=6, std=0.5)
    draft = tiny_llama(13, vocab=6, std=0.3, hidden=16, layers=1)
    ids = torch.tensor([[1, 4, 2, 1, 4]])
    result = specnb.speculative(target, draft, ids, gamma=3, max_new_tokens=40, temperature=1.0,
                                generator=torch.Generator().manual_seed(3), trace=True)
    counts = position_counts(result, 3)
    assert counts.drafting_steps == result.stats.drafting_steps
    assert counts.per_draft == pytest.approx(result.stats.per_position_acceptance)
    assert sum(counts.accepted) == result.stats.accepted
