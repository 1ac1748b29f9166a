"""specnb.models.tree_shape: the head's shape chosen from this machine's checking cost and its
measured acceptance by rank; `speculative(..., gamma=None)` drafting it; and the ranks record
(`specnb.training.head_ranks`). Tiny models; the clock is replaced where the choice is tested."""

import json

import pytest
import torch

import specnb
from specnb.drafters import FeatureDrafter
from specnb.models import tree_shape
from specnb.drafters.dynamic_tree import DynamicTree
from specnb.training.head_ranks import measure_dynamic, measure_ranks
from head_fixtures import random_head

RANKS = {"shape_measured": [2, 1], "acceptance": [[0.3, 0.6], [0.5]]}
FLAT = [1.0, 1.0, 1.0, 1.0]  # t(k) for k = 1..4
STEEP = [1.0, 1.0, 1.05, 2.0]


def test_candidates_are_every_shape_within_the_measured_one():
    assert tree_shape.candidate_shapes((2, 1)) == [(1,), (2,), (1, 1), (2, 1)]
    assert len(tree_shape.candidate_shapes((4, 2, 2))) == 4 + 8 + 16


def fake_clock(monkeypatch, curves, c=0.05):
    """Each round reads the next curve; the head's cost ratio is c."""
    calls = iter(curves)

    def latency(model, prefix_len, token_counts, repeats):
        counts = list(token_counts)
        return {"token_counts": counts, "median_ms": next(calls)[:len(counts)]}
    monkeypatch.setattr(tree_shape, "measure_forward_latency", latency)
    monkeypatch.setattr(tree_shape, "estimate_cost_ratio", lambda *args: c)


@pytest.mark.parametrize("curve, shape", [(FLAT, (2, 1)), (STEEP, (2,))])
def test_the_curve_picks_the_shape_and_the_choice_is_cached(target, monkeypatch, tmp_path,
                                                            curve, shape):
    head = random_head(target)
    fake_clock(monkeypatch, [curve, curve])
    cache = tmp_path / "tree-shape.json"
    first = tree_shape.recommend_shape(target, head, ranks=RANKS, cache_file=cache)
    assert first["shape"] == shape and not first["cached"]
    assert first["predicted"]["(2, 1)"] == pytest.approx(
        (1 + 0.6 + 0.3 * 0.5) / (2 * 0.05 + curve[3]), abs=1e-4)
    fake_clock(monkeypatch, [])  # a second call measures nothing
    again = tree_shape.recommend_shape(target, head, ranks=RANKS, cache_file=cache)
    assert again["shape"] == shape and again["cached"]


# A dynamic tree of 2 nodes that accepts 0.8 drafts per iteration (measured, not from ranks).
DYNAMIC_RANKS = {**RANKS, "dynamic": [{"dynamic": [2, 2, 1], "accepted_per_iteration": 0.8,
                                       "iterations": 40}]}


@pytest.mark.parametrize("accepted, chosen", [(0.8, DynamicTree(2, 2, 1)), (0.1, (2, 1))])
def test_dynamic_trees_compete_with_the_static_shapes(target, monkeypatch, tmp_path, accepted,
                                                      chosen):
    ranks = {**DYNAMIC_RANKS, "dynamic": [{**DYNAMIC_RANKS["dynamic"][0],
                                           "accepted_per_iteration": accepted}]}
    fake_clock(monkeypatch, [FLAT, FLAT])
    cache = tmp_path / "tree-shape.json"
    first = tree_shape.recommend_shape(target, random_head(target), ranks=ranks, cache_file=cache)
    assert first["predicted"]["dynamic (2, 2, 1)"] == pytest.approx(
        (1 + accepted) / (2 * 0.05 + 1.0), abs=1e-4)
    assert first["predicted"]["(2, 1)"] == pytest.approx(1.75 / 1.1, abs=1e-4)
    assert (first["dynamic"] or first["shape"]) == chosen and not first["cached"]
    assert (first["shape"] is None) == isinstance(chosen, DynamicTree)
    fake_clock(monkeypatch, [])
    again = tree_shape.recommend_shape(target, random_head(target), ranks=ranks,
                                       cache_file=cache)
    assert (again["dynamic"] or again["shape"]) == chosen and again["cached"]


def test_a_new_dynamic_record_is_measured_again(target, monkeypatch, tmp_path):
    fake_clock(monkeypatch, [FLAT, FLAT, STEEP, STEEP])
    cache = tmp_path / "tree-shape.json"
    tree_shape.recommend_shape(target, random_head(target), ranks=RANKS, cache_file=cache)
    record = tree_shape.recommend_shape(target, random_head(target), ranks=DYNAMIC_RANKS,
                                        cache_file=cache)
    assert not record["cached"] and len(json.loads(cache.read_text())) == 2


def test_rounds_that_disagree_are_not_cached(target, monkeypatch, tmp_path):
    fake_clock(monkeypatch, [FLAT, STEEP])
    cache = tmp_path / "tree-shape.json"
    record = tree_shape.recommend_shape(target, random_head(target), ranks=RANKS,
                                        cache_file=cache)
    assert record["shape"] in tree_shape.candidate_shapes((2, 1)) and not cache.exists()
    assert record["settled"] is False


def test_on_a_quiet_machine_rounds_that_disagree_are_cached(target, monkeypatch, tmp_path):
    from specnb.models.fast_path import quiet_machine

    fake_clock(monkeypatch, [FLAT, STEEP])
    cache = tmp_path / "tree-shape.json"
    with quiet_machine():
        record = tree_shape.recommend_shape(target, random_head(target), ranks=RANKS,
                                            cache_file=cache)
    assert record["settled"] and cache.exists()


def test_rounds_that_pick_a_tie_are_cached(target, monkeypatch, tmp_path):
    # One round picks (2, 1), the other (2,), and pooled they lie within 2 %: either will do.
    ranks = {"shape_measured": [2, 1], "acceptance": [[0.3, 0.6], [0.5]]}
    nearly = [1.0, 1.0, 1.0, 1.06]  # t(4)/t(1) under which (2,) wins this round, by a hair
    fake_clock(monkeypatch, [FLAT, nearly], c=0.05)
    cache = tmp_path / "tree-shape.json"
    record = tree_shape.recommend_shape(target, random_head(target), ranks=ranks,
                                        cache_file=cache)
    predicted = record["predicted"]
    assert abs(predicted["(2, 1)"] - predicted["(2,)"]) <= tree_shape.TIE * max(
        predicted["(2, 1)"], predicted["(2,)"])
    assert record["shape"] in [(2,), (2, 1)] and cache.exists()
    monkeypatch.setattr(tree_shape, "TIE", 0.0)  # without the tie rule the rounds disagree
    fake_clock(monkeypatch, [FLAT, nearly], c=0.05)
    strict = tmp_path / "strict.json"
    tree_shape.recommend_shape(target, random_head(target), ranks=ranks, cache_file=strict)
    assert not strict.exists()


def test_a_real_measurement_on_a_tiny_model(target, tmp_path):
    record = tree_shape.recommend_shape(target, random_head(target), ranks=RANKS,
                                        cache_file=tmp_path / "c.json")
    assert record["shape"] in tree_shape.candidate_shapes((2, 1)) and record["c"] > 0
    assert set(record["checking_cost"]) == {1, 2, 3, 4} and record["checking_cost"][1] == 1.0


def test_missing_ranks_name_the_command(tmp_path):
    with pytest.raises(ValueError, match="specnb.training.head_ranks"):
        tree_shape.load_ranks(tmp_path / "ranks.json")


def test_speculative_without_gamma_drafts_the_recommended_shape(target, prompts):
    head = random_head(target, std=0.05)
    plain = specnb.autoregressive(target, prompts[1], max_new_tokens=12, trace=True)
    for shape in [(2, 1), (1, 1)]:
        head.advisor = lambda temperature, shape=shape: shape
        chosen = specnb.speculative(target, head, prompts[1], max_new_tokens=12, trace=True)
        tree = shape if max(shape) > 1 else None
        explicit = specnb.speculative(target, FeatureDrafter(head.head, tree=tree), prompts[1],
                                      gamma=len(shape), max_new_tokens=12, trace=True)
        assert chosen.tokens == explicit.tokens == plain.tokens
        assert [len(it.drafted) for it in chosen.trace] == \
            [len(it.drafted) for it in explicit.trace]
        assert all(d.parent is None for it in chosen.trace for d in it.drafted) == (tree is None)


def test_speculative_without_gamma_drafts_a_recommended_dynamic_tree(target, prompts):
    head = random_head(target, std=0.05)
    plain = specnb.autoregressive(target, prompts[1], max_new_tokens=12, trace=True)
    head.advisor = lambda temperature: DynamicTree(3, 2, 2)
    drafter, gamma = head.recommended()
    assert drafter.dynamic == DynamicTree(3, 2, 2) and gamma == 2
    assert drafter.shape_text(gamma) == "dynamic tree (3, 2, 2)"
    chosen = specnb.speculative(target, head, prompts[1], max_new_tokens=12, trace=True)
    explicit = specnb.speculative(target, FeatureDrafter(head.head, dynamic=(3, 2, 2)),
                                  prompts[1], gamma=2, max_new_tokens=12, trace=True)
    assert chosen.tokens == explicit.tokens == plain.tokens
    assert [[d.parent for d in it.drafted] for it in chosen.trace] == \
        [[d.parent for d in it.drafted] for it in explicit.trace]


def test_drafters_without_a_recommendation_ask_for_gamma(target, drafts, prompts):
    with pytest.raises(ValueError, match="no recommended shape"):
        specnb.speculative(target, random_head(target), prompts[0], max_new_tokens=4)
    with pytest.raises(ValueError, match="pass gamma"):
        specnb.speculative(target, drafts["random"], prompts[0], max_new_tokens=4)
    tree = FeatureDrafter(random_head(target).head, tree=(2, 2))  # a tree: γ is its depth
    assert tree.recommended() == (tree, 2)


def test_measure_ranks_on_a_tiny_head(target, prompts):
    # A random head is rarely right, so one depth (always reached) is what it can measure.
    record = measure_ranks(target, random_head(target), [p for p in prompts], shape=(3,),
                           max_new_tokens=10)
    assert record["shape_measured"] == [3] and record["prompts"] == 3
    assert len(record["acceptance"][0]) == 3 and record["reached"][0] >= 10
    hits = sum(record["hits"][0].values())
    assert record["acceptance"][0][-1] == pytest.approx(hits / record["reached"][0])
    assert json.loads(json.dumps(record)) == record
    with pytest.raises(ValueError, match="at least one prompt"):
        measure_ranks(target, random_head(target), [], max_new_tokens=4)


def test_measure_dynamic_on_a_tiny_head(target, prompts):
    rows = measure_dynamic(target, random_head(target), list(prompts), dynamic=[(2, 2, 2)],
                           max_new_tokens=10)
    (row,) = rows
    assert row["dynamic"] == [2, 2, 2] and row["iterations"] >= 3
    assert 0 <= row["accepted_per_iteration"] <= 2  # at most the tree's depth
    assert json.loads(json.dumps(rows)) == rows
    with pytest.raises(ValueError, match="at least one prompt"):
        measure_dynamic(target, random_head(target), [], max_new_tokens=4)


@pytest.mark.embedded
def test_the_shipped_ranks_measure_the_shipped_head():
    """data/head/ranks.json must be re-measured whenever the head is retrained."""
    from specnb.training.head_ranks import MEASURED_SHAPE, head_digest
    ranks = tree_shape.load_ranks()
    assert ranks["head"] == head_digest(), "re-run python -m specnb.training.head_ranks"
    assert tuple(ranks["shape_measured"]) == MEASURED_SHAPE and ranks["greedy"]
    assert ranks["reached"][0] >= 500 and all(ranks["reached"])
    for row in ranks["acceptance"]:
        assert all(0 <= a <= b <= 1 for a, b in zip(row, row[1:]))
    from specnb.training.head_ranks import DYNAMIC
    assert [tuple(row["dynamic"]) for row in ranks["dynamic"]] == list(DYNAMIC)
    assert all(row["iterations"] >= 300 for row in ranks["dynamic"])
    # the head's int8 copy, measured the same way (specnb.models.int8_draft)
    int8 = ranks["int8"]
    assert tuple(int8["shape_measured"]) == MEASURED_SHAPE and int8["reached"][0] >= 500
    for row, float_row in zip(int8["acceptance"], ranks["acceptance"]):
        assert all(0 <= a <= b <= 1 for a, b in zip(row, row[1:]))
        assert all(abs(a - b) < 0.1 for a, b in zip(row, float_row))  # a close copy


def test_sampling_takes_the_best_chain_greedy_the_choice():
    record = {"shape": None, "dynamic": DynamicTree(2, 2, 2),
              "predicted": {"(1,)": 1.30, "(2,)": 1.35, "(1, 1)": 1.33, "(1, 1, 1)": 1.10,
                            "(2, 1)": 1.20, "dynamic (2, 2, 2)": 1.37}}
    assert tree_shape.shape_for(record, 0.0) == DynamicTree(2, 2, 2)
    assert tree_shape.shape_for(record, 0.7) == (1, 1)
    static = {**record, "shape": (2,), "dynamic": None}
    assert tree_shape.shape_for(static, 0.0) == (2,)
    with pytest.raises(ValueError, match="no chain"):
        tree_shape.shape_for({"shape": (2,), "dynamic": None, "predicted": {"(2,)": 1.2}}, 1.0)


def test_speculative_asks_the_advisor_for_its_temperature(target, prompts):
    head = random_head(target, std=0.05)
    asked = []

    def advisor(temperature):
        asked.append(temperature)
        return (1, 1) if temperature > 0 else (2, 1)
    head.advisor = advisor
    sampled = specnb.speculative(target, head, prompts[1], max_new_tokens=8, temperature=0.8,
                                 generator=torch.Generator().manual_seed(0), trace=True)
    greedy = specnb.speculative(target, head, prompts[1], max_new_tokens=8, trace=True)
    assert asked == [0.8, 0.0]
    assert all(d.parent is None for it in sampled.trace for d in it.drafted)  # a chain
    assert any(d.parent is not None for it in greedy.trace for d in it.drafted)  # the tree
    with pytest.raises(ValueError, match="temperature"):
        specnb.speculative(target, head, prompts[1], max_new_tokens=8, temperature=-1.0,
                           trace=True)
