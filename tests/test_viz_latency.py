"""specnb.viz.latency: the latency plot (from hand-made measurements) and the roofline numbers."""

import math

import matplotlib.pyplot as plt
import pytest

from specnb.viz.latency import plot_forward_latency, roofline_numbers


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
