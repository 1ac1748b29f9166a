"""specnb.core.latency: forward latency against tokens per forward, on a tiny model."""

import math

import pytest
import torch

from specnb.core.latency import measure_forward_latency


@pytest.fixture(scope="module")
def measurements(target):
    return measure_forward_latency(target, prefix_len=12, token_counts=[1, 2, 4], repeats=3,
                                   generator=torch.Generator().manual_seed(0))


def test_measurement_shapes_and_values(measurements):
    assert set(measurements) == {"token_counts", "median_ms", "ms_per_token", "samples_ms",
                                 "prefix_len", "repeats", "device", "dtype"}
    assert measurements["token_counts"] == [1, 2, 4]
    assert measurements["prefix_len"] == 12 and measurements["repeats"] == 3
    assert measurements["device"] == "cpu" and measurements["dtype"] == "float32"
    assert [len(s) for s in measurements["samples_ms"]] == [3, 3, 3]
    for samples, median, per_token, k in zip(measurements["samples_ms"],
                                             measurements["median_ms"],
                                             measurements["ms_per_token"], [1, 2, 4]):
        assert all(ms > 0 for ms in samples)
        assert median == sorted(samples)[1]
        assert math.isclose(per_token, median / k)


def test_each_forward_runs_exactly_k_tokens_after_the_cached_prefix(target, monkeypatch):
    """One prefix forward, then (warmup + repeats) rounds of one forward per k."""
    from specnb.core import kv

    seen = []
    original = kv.CachedLM.logits

    def spy(self, sequence, keep=1):
        out = original(self, sequence, keep)
        seen.append((self.log.num_tokens[-1], out.shape[1]))
        return out

    monkeypatch.setattr(kv.CachedLM, "logits", spy)
    measure_forward_latency(target, prefix_len=7, token_counts=[3, 1], repeats=2, warmup=1)
    assert seen == [(7, 1)] + [(3, 3), (1, 1)] * 3


@pytest.mark.parametrize("kwargs, name", [
    ({"prefix_len": 0}, "prefix_len"), ({"token_counts": []}, "token_counts"),
    ({"token_counts": [0, 1]}, "token_counts"), ({"repeats": 0}, "repeats"),
    ({"prefix_len": 250, "token_counts": [8]}, "context"),
])
def test_bad_input(target, kwargs, name):
    args = {"prefix_len": 4, "token_counts": [1], "repeats": 1, **kwargs}
    with pytest.raises(ValueError, match=name):
        measure_forward_latency(target, **args)
