"""specnb.models.checking_curve: one checking-cost curve per machine and model, kept and shared."""

import json

from tiny_models import tiny_llama

from specnb.models import checking_curve as curves
from specnb.theory import relative_cost


def test_the_curve_is_measured_once_then_read_by_every_caller(tmp_path):
    cache = tmp_path / "checking-curve.json"
    model = tiny_llama(0)
    first = curves.checking_curve(model, cache_file=cache)
    assert not first["cached"] and first["token_counts"] == list(curves.TOKEN_COUNTS)
    assert first["relative"][0] == 1.0 and first["prefix_len"] == curves.PREFIX_LEN
    again = curves.checking_curve(model, cache_file=cache)  # another notebook, the same curve
    assert again["cached"] and again["median_ms"] == first["median_ms"]
    assert relative_cost(again, 4) == relative_cost(first, 4)
    fresh = curves.checking_curve(model, refresh=True, cache_file=cache)
    assert not fresh["cached"] and json.loads(cache.read_text())[fresh["key"]]["median_ms"] == \
        fresh["median_ms"]  # the new measurement replaced the kept one


def test_another_model_shape_gets_its_own_curve_and_a_broken_cache_is_measured_again(tmp_path):
    cache = tmp_path / "checking-curve.json"
    small, wide = tiny_llama(0), tiny_llama(0, hidden=64)
    assert curves.curve_key(small) != curves.curve_key(wide)
    curves.checking_curve(small, cache_file=cache)
    assert not curves.checking_curve(wide, cache_file=cache)["cached"]
    assert len(json.loads(cache.read_text())) == 2
    cache.write_text("{torn")
    assert not curves.checking_curve(small, cache_file=cache)["cached"]
    assert curves.checking_curve(small, cache_file=cache)["cached"]
