"""Typical acceptance, skipping and disabling speculation, dynamic γ (issue "Relaxing and adapting").

The shape of the vLLM/aphrodite spec-decode e2e suite on tiny random models: greedy output
equals transformers' `generate(do_sample=False)` under every setting; typical acceptance at
T = 1 is shown *not* to sample from p, next to the exact rule passing the same χ² test.
"""

import importlib
from types import SimpleNamespace

import pytest
import torch

import specnb
from specnb.core import verify
from specnb.core.typical import typical_law, typical_threshold, typical_verify
from specnb.methods.schedules import CostAwareGamma, FixedGamma, HeuristicGamma, as_schedule
from specnb.stats import chi2_pvalue
from test_batched import eos_hit_at_different_iterations, hf_batched_greedy, ragged_prompts
from tiny_models import perturbed, tiny_llama

MAX_NEW = 24
P_MIN = 1e-3


@pytest.fixture(scope="module")
def pair():
    target = tiny_llama(41)
    return target, perturbed(target, 42, 0.1)


@pytest.fixture(scope="module")
def batch8(pair):
    prompts = ragged_prompts(8, 7)
    return prompts, hf_batched_greedy(pair[0], prompts, MAX_NEW)


# --- typical acceptance -------------------------------------------------------------------

@pytest.mark.parametrize("gamma", [1, 2, 3])
def test_typical_acceptance_is_greedy_exact_alone_and_batched(pair, batch8, gamma):
    target, draft = pair
    prompts, expected = batch8
    alone = specnb.speculative(target, draft, prompts[0], gamma=gamma, max_new_tokens=MAX_NEW,
                               acceptance="typical", trace=True)
    assert alone.tokens == [expected[0]]
    batched = specnb.speculative(target, draft, prompts, gamma=gamma, max_new_tokens=MAX_NEW,
                                 acceptance="typical", trace=True)
    assert batched.tokens == expected
    statuses = {d.status for it in batched.trace for d in it.drafted}
    assert {"accepted", "rejected"} <= statuses  # both branches of the rule ran


def test_typical_law_by_hand_and_on_bad_input():
    p, q = torch.tensor([0.6, 0.3, 0.1]), torch.tensor([0.2, 0.2, 0.6])
    assert torch.allclose(typical_law(p, q), q)  # every token clears the bar 0.09
    # A bar of 0.2 (posterior_threshold 0.2, alpha 1): p(x3) = 0.1 fails, its q goes to argmax p.
    law = typical_law(p, q, posterior_threshold=0.2, posterior_alpha=1.0)
    assert torch.allclose(law, torch.tensor([0.8, 0.2, 0.0]))
    with pytest.raises(ValueError, match="one \\[V\\] law each"):
        typical_law(p.view(1, 3), q.view(1, 3))
    with pytest.raises(ValueError, match="posterior_threshold"):
        typical_law(p, q, posterior_threshold=0)


# p and q where the rule must differ from p: every token clears the bar (H(p) = 1.03, bar
# 0.09), so the first token simply follows q, and TV(q, p) = 0.5 − 1/3.
P_CASE = torch.tensor([0.5, 0.3, 0.2])
Q_CASE = torch.full((3,), 1 / 3)
ROWS = 20_000


def first_tokens(verify_fn, p, q, seed):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.multinomial(q, ROWS, replacement=True, generator=generator).view(ROWS, 1)
    bonus = torch.multinomial(p, ROWS, replacement=True, generator=generator).view(ROWS, 1)
    verdict = verify_fn(p.expand(ROWS, 1, -1), q.expand(ROWS, 1, -1), ids, bonus,
                        generator=generator)
    return verdict.tokens[:, 0]


def test_typical_acceptance_at_t1_is_not_exact_and_exact_acceptance_is():
    law = typical_law(P_CASE, Q_CASE)
    tv = 0.5 * (law - P_CASE).abs().sum().item()
    assert tv > 0.15  # the stated bound: here the rule's law is q, 0.167 away from p
    typical = first_tokens(typical_verify, P_CASE, Q_CASE, 0)
    assert chi2_pvalue(typical, law) > P_MIN  # its samples follow the enumerated law ...
    assert chi2_pvalue(typical, P_CASE) < P_MIN  # ... which the χ² test tells apart from p
    assert chi2_pvalue(first_tokens(verify, P_CASE, Q_CASE, 0), P_CASE) > P_MIN


def test_typical_loop_on_tiny_models_follows_its_enumerated_law_not_p(pair):
    """End to end: the first token of `speculative(acceptance="typical")` at T = 1, over many
    independent rows, follows the law enumerated from the tiny target's p and draft's q, and
    that law is measurably away from p."""
    target, draft = pair[0], tiny_llama(44, hidden=16)  # a draft that often disagrees
    prompt = torch.tensor([[3, 17, 5, 42, 8]])
    with torch.no_grad():
        p = torch.softmax(target(prompt).logits[0, -1].double(), -1)
        q = torch.softmax(draft(prompt).logits[0, -1].double(), -1)
    law = typical_law(p, q)
    tv = 0.5 * float((law - p).abs().sum())
    assert tv > 0.02, f"this case must separate the laws (TV {tv:.4f})"
    rows = 6_000
    result = specnb.speculative(target, draft, prompt.expand(rows, -1), gamma=1, max_new_tokens=2,
                                temperature=1.0, generator=torch.Generator().manual_seed(3),
                                acceptance="typical")
    first = torch.tensor([row[0] for row in result.tokens])
    assert chi2_pvalue(first, law) > P_MIN
    assert chi2_pvalue(first, p) < P_MIN


def test_typical_rule_by_hand():
    """Confident p: only tokens above 0.09 pass; a rejection emits the argmax, not a draw."""
    p = torch.tensor([[[0.85, 0.1, 0.05], [0.85, 0.1, 0.05]]])
    bar = typical_threshold(p[0, 0])
    assert float(bar) == pytest.approx(0.09)  # 0.3·exp(−H) = 0.18 > 0.09
    verdict = typical_verify(p, None, torch.tensor([[1, 2]]), torch.tensor([[2]]))
    assert verdict.tokens.tolist() == [[1, 0, -1]]  # 0.1 passes, 0.05 fails -> argmax 0
    uniform = torch.full((4,), 0.25)
    assert float(typical_threshold(uniform)) == pytest.approx(0.075)  # 0.3 / 4


@pytest.mark.parametrize("kwargs, message", [
    ({"acceptance": "lossy"}, "acceptance"),
    ({"acceptance": "typical", "posterior_threshold": 0}, "posterior_threshold"),
    ({"acceptance": "typical", "posterior_alpha": 1.5}, "posterior_alpha"),
    ({"acceptance": "typical", "posterior_alpha": True}, "posterior_alpha"),
])
def test_bad_acceptance_settings(pair, kwargs, message):
    with pytest.raises(ValueError, match=message):
        specnb.speculative(*pair, torch.tensor([[1, 2, 3]]), gamma=2, max_new_tokens=4, **kwargs)


# --- skipping past the draft's context ----------------------------------------------------

def test_rows_past_the_drafts_context_continue_without_drafts(pair, batch8):
    target, _ = pair
    prompts, expected = batch8
    short = perturbed(target, 42, 0.1)
    short.config.max_position_embeddings = 22  # shorter than prompt + generation for every row
    result = specnb.speculative(target, short, prompts, gamma=3, max_new_tokens=MAX_NEW,
                                trace=True)
    assert result.tokens == expected
    assert_some_rows_skip_while_others_draft(result, prompts, limit=22)


def test_draft_max_len_skips_rows_as_the_drafts_context_does(pair, batch8):
    target, draft = pair
    prompts, expected = batch8
    result = specnb.speculative(target, draft, prompts, gamma=3, max_new_tokens=MAX_NEW,
                                draft_max_len=22, trace=True)
    assert result.tokens == expected
    assert_some_rows_skip_while_others_draft(result, prompts, limit=22)
    alone = specnb.speculative(target, draft, prompts[0], gamma=3, max_new_tokens=MAX_NEW,
                               draft_max_len=prompts[0].shape[1],
                               trace=True)  # skips at once, still runs
    assert alone.tokens == [expected[0]] and alone.stats.drafted <= 1


def assert_some_rows_skip_while_others_draft(result, prompts, limit):
    lengths = [p.shape[1] for p in prompts]
    skipped_steps = 0
    for row, length in enumerate(lengths):
        for it in result.row(row).trace:
            if length > limit:
                assert not it.drafted  # past the limit: one target token per iteration
            length += len(it.emitted)
    for step in {it.step for it in result.trace}:
        rows = [it for it in result.trace if it.step == step]
        skipped_steps += any(not it.drafted for it in rows) and any(it.drafted for it in rows)
    assert skipped_steps > 0  # some rows skipped while others drafted in the same step


# --- disabling speculation by batch size --------------------------------------------------

def test_disable_by_batch_size_above_and_below_the_threshold(pair, batch8):
    target, draft = pair
    prompts, expected = batch8
    off = specnb.speculative(target, draft, prompts, gamma=3, max_new_tokens=MAX_NEW,
                             disable_by_batch_size=8)
    assert off.tokens == expected and off.stats.draft_forwards == 0
    on = specnb.speculative(target, draft, prompts, gamma=3, max_new_tokens=MAX_NEW,
                            disable_by_batch_size=9)
    assert on.tokens == expected and on.stats.draft_forwards > 0


def test_disabled_batch_drafts_again_once_rows_finish(pair):
    """Rows hit EOS at different steps, so the batch crosses the threshold mid-run."""
    target, draft = pair
    prompts = ragged_prompts(8, 11)
    eos = eos_hit_at_different_iterations(target, prompts)
    expected = hf_batched_greedy(target, prompts, MAX_NEW, eos_token_id=eos)
    result = specnb.speculative(target, draft, prompts, gamma=3, max_new_tokens=MAX_NEW,
                                disable_by_batch_size=5, eos_token_id=eos, trace=True)
    assert result.tokens == expected
    running = {}
    for it in result.trace:
        running.setdefault(it.step, []).append(it)
    for step, rows in running.items():
        if len(rows) >= 5:
            assert all(not it.drafted and it.gamma == 0 for it in rows)
    assert any(len(rows) < 5 and any(it.drafted for it in rows) for rows in running.values())


# --- dynamic γ ----------------------------------------------------------------------------

def cost_aware():
    return CostAwareGamma(0.1, {1: 1.0, 2: 1.1, 4: 1.3, 8: 1.9}, maximum=8)


@pytest.mark.parametrize("schedule", ["heuristic", "cost-aware"])
def test_dynamic_gamma_is_greedy_exact_and_varies_per_row(pair, batch8, schedule):
    target, draft = pair
    prompts, expected = batch8
    gamma = "heuristic" if schedule == "heuristic" else cost_aware()
    alone = specnb.speculative(target, draft, prompts[0], gamma=gamma, max_new_tokens=MAX_NEW,
                               trace=True)
    assert alone.tokens == [expected[0]]
    result = specnb.speculative(target, draft, prompts, gamma=gamma, max_new_tokens=MAX_NEW,
                                trace=True)
    assert result.tokens == expected
    per_row = [[it.gamma for it in result.row(b).trace] for b in range(len(prompts))]
    assert any(len(set(g)) > 1 for g in per_row)  # γ moved during a row's generation
    assert len({tuple(g) for g in per_row}) > 1  # and rows moved differently


def test_heuristic_follows_transformers_rule():
    schedule = HeuristicGamma(initial=5)
    schedule.start(2)
    schedule.update([0, 1], [5, 5], [5, 2])  # row 0 all accepted: +2; row 1 not: −1
    assert schedule.gammas([0, 1]) == [7, 4]
    for _ in range(6):
        schedule.update([1], [4], [0])
    assert schedule.gammas([1]) == [1]  # never below 1
    schedule.update([0], [0], [0])  # nothing drafted: no evidence, no change
    assert schedule.gammas([0]) == [7]


def test_cost_aware_gamma_picks_the_formulas_best():
    schedule = cost_aware()
    schedule.start(1)
    assert schedule.best_gamma(0.95) > schedule.best_gamma(0.5) >= schedule.best_gamma(0.05)
    assert schedule.best_gamma(0.05) == 0  # drafting does not pay: autoregressive is faster
    expensive = CostAwareGamma(0.1, {1: 1.0, 2: 1.6, 3: 2.0}, maximum=8)
    assert expensive.best_gamma(0.8) < schedule.best_gamma(0.8)  # costly checking, shorter γ
    assert schedule.block_cost(3) == pytest.approx(1.2) and schedule.block_cost(10) > 1.9
    schedule.update([0], [4], [1])  # accepted 1, rejected the 2nd: 2 verified positions
    assert schedule.alpha(0) == pytest.approx((1 + 2) / (2 + 4))


def test_cost_aware_gamma_reads_a_noisy_latency_curve_as_non_decreasing():
    """A dip in a measured curve (k = 5 cheaper than k = 4) is noise: it must neither lower the
    cost of k = 5 nor, extended beyond the measured range, make long blocks look cheap."""
    latency = {"token_counts": [1, 2, 3, 4, 5], "median_ms": [50.0, 90.0, 107.0, 77.5, 66.0]}
    run = SimpleNamespace(stats=SimpleNamespace(draft_forwards=10, draft_s=0.04))
    schedule = CostAwareGamma.from_latency(latency, run)
    assert [schedule.checking[k] for k in range(1, 6)] == pytest.approx([1.0, 1.8, 2.14, 2.14, 2.14])
    assert schedule.cost_ratio == pytest.approx(0.004 / 0.05)
    assert all(schedule.block_cost(k) >= schedule.block_cost(5) for k in range(6, 12))
    # Broken variant: the raw curve, extended as before, prices 9 tokens below 1 token.
    raw = CostAwareGamma(0.08, {k: ms / 50.0 for k, ms in zip(latency["token_counts"],
                                                              latency["median_ms"])})
    (k0, v0), (k1, v1) = list(raw.checking.items())[-2:]
    assert v0 + (v1 - v0) / (k1 - k0) * (9 - k0) < 1.0 <= schedule.block_cost(9)
    schedule.start(1)
    assert schedule.best_gamma(0.3) == 0  # at α̂ = 0.3 nothing pays for a check of 1.8


def test_cost_aware_gamma_in_loop_takes_the_costs_the_loop_paid(pair, monkeypatch):
    """`cost_aware_in_loop` prices a check of γ + 1 tokens by the γ run's own steps over autoregressive
    decoding's (a dip read as noise, as for a latency curve); its schedule stays greedy-exact."""
    import specnb.theory

    target, draft = pair
    ids = ragged_prompts(1, 7)[0]
    schedule = specnb.cost_aware_in_loop(target, draft, ids, gammas=(1, 2, 4), max_new_tokens=12)
    assert set(schedule.checking) == {1, 2, 3, 5} and schedule.checking[1] == 1.0
    values = list(schedule.checking.values())
    assert values == sorted(values) and schedule.cost_ratio > 0
    run = specnb.speculative(target, draft, [ids], gamma=schedule, max_new_tokens=MAX_NEW,
                             trace=True)
    assert run.tokens == specnb.autoregressive(target, [ids], max_new_tokens=MAX_NEW,
                                               trace=True).tokens

    paid = {1: 1.3, 2: 1.2, 4: 1.6}  # what each γ run paid: γ = 2 a noisy dip
    calibrate = importlib.import_module("specnb.methods.calibrate")
    gamma_of, speculative = {}, calibrate.speculative  # each run's γ, by the run

    def remembered(*args, gamma, **kwargs):
        result = speculative(*args, gamma=gamma, **kwargs)
        gamma_of[id(result)] = gamma
        return result
    monkeypatch.setattr(calibrate, "speculative", remembered)
    monkeypatch.setattr(specnb.theory, "in_loop_checking_cost",
                        lambda runs, refs: {"median": paid[gamma_of[id(runs[0])]]})
    schedule = specnb.cost_aware_in_loop(target, draft, ids, gammas=(4, 1, 2), max_new_tokens=12)
    assert schedule.checking == pytest.approx({1: 1.0, 2: 1.3, 3: 1.3, 5: 1.6})
    with pytest.raises(ValueError, match="gammas"):
        specnb.cost_aware_in_loop(target, draft, ids, gammas=(0,))
    with pytest.raises(ValueError, match="runs"):
        CostAwareGamma.from_runs(None, {})


def test_cost_aware_gamma_stops_drafting_where_it_does_not_pay_but_keeps_probing():
    schedule = CostAwareGamma(0.1, {1: 1.0, 2: 1.6, 3: 2.0}, probe_every=4)
    schedule.start(1)
    for _ in range(10):
        schedule.update([0], [1], [0])  # every draft rejected: α̂ falls towards 0
    asked = []
    for _ in range(8):
        asked += schedule.gammas([0])
        schedule.update([0], asked[-1:], [0])
    assert asked == [0, 0, 0, 1, 0, 0, 0, 1]  # a probe every 4th iteration


@pytest.mark.parametrize("gamma, message", [("fast", "heuristic"), (2.0, "gamma"),
                                            (True, "gamma"), (-1, "gamma")])
def test_bad_gamma(pair, gamma, message):
    with pytest.raises(ValueError, match=message):
        specnb.speculative(*pair, torch.tensor([[1, 2, 3]]), gamma=gamma, max_new_tokens=4)


def test_schedules_are_taken_as_given():
    assert as_schedule(3).gammas([0, 1]) == [3, 3]
    fixed = FixedGamma(2)
    assert as_schedule(fixed) is fixed
    with pytest.raises(ValueError, match="checking"):
        CostAwareGamma(0.1, {2: 1.3})


# --- exact acceptance: the e2e suite's γ and batch sizes ------------------------------------

@pytest.mark.parametrize("batch", [1, 8, 32])
@pytest.mark.parametrize("gamma", [1, 2, 3, 4, 5, 6, 7, 8, 9, 63])
def test_exact_acceptance_greedy_for_the_e2e_gammas_and_batches(pair, gamma, batch):
    target, draft = pair
    prompts = ragged_prompts(batch, 1000 + batch)
    expected = hf_batched_greedy(target, prompts, 16)
    assert specnb.speculative(target, draft, prompts, gamma=gamma, max_new_tokens=16).tokens \
        == expected
