"""specnb.bench_live: the widgets' live runs (speculative summary, race) on tiny models."""

import pytest

from specnb.bench_live import race, speculative_summary
from specnb.viz.timing import format_race
from specnb.viz.trace import format_summary


def test_speculative_summary_with_the_target_as_its_own_draft(target, prompts):
    summary = speculative_summary(target, target, prompts[0], gamma=4, max_new_tokens=10)
    assert summary["alpha_hat"] == 1.0 and summary["acceptance_rate"] == 1.0
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
    assert first["alpha_hat"] == second["alpha_hat"]
    assert first["target_forwards"] == second["target_forwards"]


@pytest.mark.parametrize("kwargs, name", [({"gamma": 0}, "gamma"), ({"gamma": 1.5}, "gamma"),
                                          ({"temperature": -0.1}, "temperature")])
def test_race_bad_input(target, drafts, prompts, kwargs, name):
    with pytest.raises(ValueError, match=name):
        race(target, drafts["perturbed"], prompts[0], **kwargs)
