"""specnb.bench.live: the widgets' live runs (speculative summary, race) on tiny models."""

import math

import pytest

from specnb import theory
from specnb.bench import live
from specnb.core.latency import measure_forward_latency
from specnb.bench.live import clock_against_theory, interleaved_clock, overlap_by_temperature, \
    race, speculative_summary
from specnb.theory import relative_cost
from specnb.viz.timing import format_clock, format_race
from specnb.viz.trace import format_summary


def test_speculative_summary_with_the_target_as_its_own_draft(target, prompts):
    summary = speculative_summary(target, target, prompts[0], gamma=4, max_new_tokens=10)
    assert summary["alpha_hat"] == 1.0 and summary["draft_yield"] == 1.0
    assert summary["iterations"] == 2 and summary["new_tokens"] == 10
    assert summary["emitted_counts"] == {5: 2}
    assert summary["accepted_by_position"] == [[2, 2]] * 4
    assert summary["tokens_per_iteration"] == summary["expected_tokens_per_iteration"] == 5.0


def test_speculative_summary_counts_are_consistent(target, drafts, prompts):
    summary = speculative_summary(target, drafts["random"], prompts[1], gamma=3,
                                  temperature=1.0, seed=1, max_new_tokens=16)
    counts = summary["emitted_counts"]
    assert sum(counts.values()) == summary["iterations"]
    assert sum(k * v for k, v in counts.items()) == summary["new_tokens"] == 16
    assert 0.0 <= summary["alpha_hat"] <= 1.0
    accepted = sum(a for a, _ in summary["accepted_by_position"])
    assert accepted == sum((k - 1) * v for k, v in counts.items())
    again = speculative_summary(target, drafts["random"], prompts[1], gamma=3,
                                temperature=1.0, seed=1, max_new_tokens=16)
    assert format_summary(again) == format_summary(summary)  # seeded


def test_race_greedy_is_identical(target, drafts, prompts):
    pristine = drafts["perturbed"].generation_config
    result = race(target, drafts["perturbed"], prompts[1], gamma=3, max_new_tokens=10)
    assert result["identical"] is True
    assert set(result["new_tokens"].values()) == {10}
    forwards = result["target_forwards"]
    assert forwards["ours autoregressive"] == 10
    assert 1 <= forwards["ours speculative γ=3"] <= 10 and 1 <= forwards["HF assisted γ=3"] <= 10
    assert 0 <= result["alpha_hat"] <= 1 and result["c_hat"] > 0 and result["predicted"] > 0
    assert result["speedup"] > 0 and result["speedup_vs_hf_assisted"] > 0
    assert drafts["perturbed"].generation_config is pristine  # restored after the HF run
    text = format_race(result)
    assert "γ = 3" in text and text.endswith("yes") and len(text.splitlines()) == 7


def test_race_sampled_is_reproducible(target, drafts, prompts):
    first = race(target, drafts["perturbed"], prompts[0], gamma=2, temperature=0.8,
                 max_new_tokens=8, seed=3)
    second = race(target, drafts["perturbed"], prompts[0], gamma=2, temperature=0.8,
                  max_new_tokens=8, seed=3)
    assert first["identical"] is None and "(sampled" in format_race(first)
    rate = first["tokens_per_s"]  # answers may differ in length: speedups are throughputs
    assert first["speedup"] == pytest.approx(rate["ours speculative γ=2"]
                                             / rate["ours autoregressive"])
    assert first["speedup_vs_hf_assisted"] == pytest.approx(rate["ours speculative γ=2"]
                                                            / rate["HF assisted γ=2"])
    assert first["alpha_hat"] == second["alpha_hat"]
    assert first["target_forwards"] == second["target_forwards"]


@pytest.mark.parametrize("kwargs, name", [({"gamma": 0}, "gamma"), ({"gamma": 1.5}, "gamma"),
                                          ({"temperature": -0.1}, "temperature")])
def test_race_bad_input(target, drafts, prompts, kwargs, name):
    with pytest.raises(ValueError, match=name):
        race(target, drafts["perturbed"], prompts[0], **kwargs)


def test_clock_against_theory_on_tiny_models(target, drafts, prompts):
    latency = measure_forward_latency(target, prefix_len=8, token_counts=[1, 2, 4], repeats=1)
    clock = clock_against_theory(target, {"same γ=3": (drafts["same"], 3),
                                          "perturbed γ=1": (drafts["perturbed"], 1)},
                                 prompts[1], latency, repeats=2, warmup=0, max_new_tokens=8)
    assert clock["repeats"] == 2 and set(clock["seconds"]) == {"autoregressive", "same γ=3",
                                                                "perturbed γ=1"}
    assert all(len(s) == 2 for s in clock["seconds"].values())
    assert len(clock["autoregressive_tokens"]) == 8
    same, perturbed = clock["rows"]
    assert same["alpha_hat"] == 1.0 and same["draft_yield"] == 1.0 and same["identical"]
    assert same["tokens_per_forward"] == pytest.approx(8 / 2)  # two iterations of 4 tokens
    assert perturbed["identical"] and 0 <= perturbed["alpha_hat"] <= 1
    for row in clock["rows"]:
        assert row["speedup_min"] <= row["speedup"] <= row["speedup_max"]
        assert row["checking_cost_min"] <= row["checking_cost"] <= row["checking_cost_max"]
        assert row["checking_cost"] > 0 and row["predicted_with_checking"] > 0
        assert row["checking_cost_curve"] == relative_cost(latency, row["gamma"] + 1)
    assert "outputs identical to autoregressive: yes" in format_clock(clock)
    assert "curve" in format_clock(clock).splitlines()[0]


def test_the_clock_charges_the_checking_cost_its_own_rounds_paid(target, drafts, prompts,
                                                                monkeypatch):
    timed_rounds = []  # what the clock's own interleaved rounds returned

    def spy(*args, **kwargs):
        timed_rounds.append(interleaved_clock(*args, **kwargs))
        return timed_rounds[-1]
    monkeypatch.setattr(live, "interleaved_clock", spy)
    clock = clock_against_theory(target, {"same γ=3": (drafts["same"], 3)}, prompts[1],
                                 repeats=3, warmup=0, max_new_tokens=8)
    (row,) = clock["rows"]
    (timing,) = timed_rounds
    paid = theory.in_loop_checking_cost(timing["rounds"]["same γ=3"],
                                        timing["rounds"]["autoregressive"])
    assert paid["n"] == 3
    assert (row["checking_cost"], row["checking_cost_min"], row["checking_cost_max"]) == (
        paid["median"], paid["low"], paid["high"])
    assert math.isnan(row["checking_cost_curve"]) and "curve" not in format_clock(clock)
    rounds = interleaved_clock(target, {"same γ=3": (drafts["same"], 3)},
                                              prompts[1], repeats=2, warmup=0, max_new_tokens=8)
    assert [len(r) for r in rounds["rounds"].values()] == [2, 2]
    assert rounds["results"]["same γ=3"] is rounds["rounds"]["same γ=3"][-1]
    expected = theory.predicted_with_block_cost(row["alpha_hat"], 3, row["c_hat"],
                                                row["checking_cost"])
    assert row["predicted_with_checking"] == pytest.approx(expected)


@pytest.mark.parametrize("kwargs, name", [({"drafters": {}}, "drafters"),
                                          ({"drafters": {"x": (None, 0)}}, "gamma"),
                                          ({"repeats": 0}, "repeats"), ({"warmup": -1}, "warmup")])
def test_clock_against_theory_bad_input(target, drafts, prompts, kwargs, name):
    arguments = {"drafters": {"same γ=1": (drafts["same"], 1)}, "repeats": 1, **kwargs}
    latency = {"token_counts": [1, 2], "median_ms": [1.0, 1.0]}
    with pytest.raises(ValueError, match=name):
        clock_against_theory(target, arguments.pop("drafters"), prompts[0], latency, **arguments)


def test_overlap_by_temperature(target, drafts, prompts):
    answer = [3, 5, 7, 2, 9]
    same = overlap_by_temperature(target, drafts["same"], prompts[0], answer, [0.0, 0.7, 1.0])
    assert list(same) == [0.0, 0.7, 1.0] and all(v == pytest.approx(1.0) for v in same.values())
    other = overlap_by_temperature(target, drafts["random"], prompts[0], answer, [0.0, 1.0])
    assert all(0.0 <= v <= 1.0 for v in other.values()) and other[1.0] < 1.0
    # at T = 0 the overlap is the top-1 agreement along the answer: a multiple of 1/5
    assert other[0.0] * 5 == pytest.approx(round(other[0.0] * 5))
    with pytest.raises(ValueError, match="temperatures"):
        overlap_by_temperature(target, drafts["same"], prompts[0], answer, [-0.5])
    with pytest.raises(ValueError, match="answer_tokens"):
        overlap_by_temperature(target, drafts["same"], prompts[0], [], [0.0])


def test_interleaved_clock_times_chains_and_trees(target, drafts, prompts):
    from specnb.bench.live import interleaved_clock
    from tree_drafters import TopKTree
    clock = interleaved_clock(target, {"chain": (drafts["perturbed"], 2),
                                       "tree": (TopKTree(drafts["random"], 2, 2), 2)},
                              prompts[1], repeats=2, warmup=0, max_new_tokens=8)
    assert list(clock["seconds"]) == ["autoregressive", "chain", "tree"]
    assert all(len(s) == 2 for s in clock["seconds"].values())
    assert clock["identical"] == {"chain": True, "tree": True}
    assert clock["speedups"]["tree"] == [a / b for a, b in zip(clock["seconds"]["autoregressive"],
                                                                 clock["seconds"]["tree"])]
    assert clock["traced"]["tree"].trace[1].drafted[0].parent is not None
    assert clock["traced"]["tree"].tokens == clock["results"]["tree"].tokens
    assert all(r.iterations is None for rs in clock["rounds"].values() for r in rs)  # plain


@pytest.mark.parametrize("drafters, kwargs, name", [
    ({}, {}, "drafters"), ({"x": (None, 0)}, {}, "gamma"),
    ({"autoregressive": (None, 1)}, {}, "reference"),
    ({"x": (None, 1)}, {"repeats": 0}, "repeats")])
def test_interleaved_clock_bad_input(target, prompts, drafters, kwargs, name):
    from specnb.bench.live import interleaved_clock
    with pytest.raises(ValueError, match=name):
        interleaved_clock(target, drafters, prompts[0], **kwargs)
