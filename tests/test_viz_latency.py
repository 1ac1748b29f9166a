"""specnb.viz.latency: the latency measurement (tiny model), its plot and the roofline numbers."""

import math

import matplotlib.pyplot as plt
import pytest
import torch

from specnb.viz.latency import measure_forward_latency, plot_forward_latency, roofline_numbers


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


def test_plot_has_titles_labels_and_one_point_per_count():
    data = {"token_counts": [1, 2, 4, 8], "median_ms": [10.0, 11.0, 12.0, 20.0],
            "ms_per_token": [10.0, 5.5, 3.0, 2.5], "prefix_len": 200, "device": "cpu",
            "dtype": "float32"}
    fig = plot_forward_latency(data)
    per_forward, per_token = fig.axes
    assert "forward" in per_forward.get_title() and "200" in per_forward.get_title()
    assert per_token.get_title() == "Cost per scored token"
    assert per_forward.get_ylabel() == "time per forward (ms)"
    assert per_token.get_ylabel() == "time per token (ms)"
    for axes in fig.axes:
        assert axes.get_xlabel() == "new tokens scored in one forward, k"
        assert axes.get_xscale() == "log"
    measured, linear = per_forward.get_lines()
    assert list(measured.get_ydata()) == data["median_ms"]
    assert list(linear.get_ydata()) == [10.0, 20.0, 40.0, 80.0]  # k × the one-token cost
    assert list(per_token.get_lines()[0].get_ydata()) == data["ms_per_token"]
    plt.close(fig)


def test_plot_rejects_mismatched_data():
    with pytest.raises(ValueError, match="token_counts"):
        plot_forward_latency({"token_counts": [1, 2], "median_ms": [1.0]})


def test_roofline_hand_computed():
    # 1e9 params in bf16 (2 B) on 2 TB/s and 200 TFLOP/s:
    numbers = roofline_numbers(1e9, 2, 2e12, 2e14)
    assert numbers["weight_bytes"] == 2e9
    assert numbers["flops_per_token"] == 2e9
    assert numbers["intensity_flop_per_byte"] == 1.0
    assert numbers["ridge_flop_per_byte"] == 100.0
    assert math.isclose(numbers["memory_floor_s"], 1e-3)
    assert math.isclose(numbers["compute_s_per_token"], 1e-5)
    assert numbers["tokens_until_compute_bound"] == 100.0
    assert math.isclose(numbers["max_tokens_per_s_one_per_forward"], 1000.0)
    # float32 weights: half the FLOPs per byte read, so twice as many tokens fit under the ridge.
    assert roofline_numbers(1e9, 4, 2e12, 2e14)["tokens_until_compute_bound"] == 200.0


@pytest.mark.parametrize("name", ["num_params", "bytes_per_param", "bandwidth_bytes_per_s",
                                  "flops_per_s"])
def test_roofline_bad_input(name):
    args = {"num_params": 1e6, "bytes_per_param": 2, "bandwidth_bytes_per_s": 1e9,
            "flops_per_s": 1e12, name: 0}
    with pytest.raises(ValueError, match=name):
        roofline_numbers(**args)
