"""specnb.viz.latency: the latency plot (from hand-made measurements) and the roofline numbers."""

import math

import matplotlib.pyplot as plt
import pytest

from specnb.viz.latency import (plot_checking_cost, plot_forward_latency,
                                plot_recorded_checking_costs, roofline_numbers)


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


RECORD = {"cpu": {"name": "Some CPU", "isa": "avx2"}, "token_counts": [1, 2, 4],
          "paths": {"dense": [10.0, 15.0, 20.0], "prepacked": [12.0, 13.0, 14.0]}}


def test_checking_cost_is_drawn_relative_to_one_token_and_outside_pyplot():
    fig = plot_checking_cost(RECORD)
    relative, _ = fig.axes
    assert [list(line.get_ydata()) for line in relative.get_lines()] == [
        [1.0, 1.5, 2.0], [1.0, 13 / 12, 14 / 12]]
    assert fig not in [plt.figure(n) for n in plt.get_fignums()]  # display(fig) shows it once


def test_recorded_checking_costs_draw_a_line_per_record_and_path():
    other = {**RECORD, "cpu": {"name": "Another CPU", "isa": "avx512f"}}
    fig = plot_recorded_checking_costs({"latency-cpu-some-avx2.json": RECORD,
                                        "latency-cpu-another-avx512.json": other})
    (axes,) = fig.axes
    lines = [line for line in axes.get_lines() if line.get_label().endswith(("dense", "prepacked"))]
    assert [line.get_label() for line in lines] == [
        "some-avx2: dense", "some-avx2: prepacked", "another-avx512: dense",
        "another-avx512: prepacked"]
    assert list(lines[0].get_ydata()) == [1.0, 1.5, 2.0]
    assert lines[0].get_color() != lines[2].get_color()  # a colour per record
    with pytest.raises(ValueError, match="no records"):
        plot_recorded_checking_costs({})
    with pytest.raises(ValueError, match="paths"):
        plot_recorded_checking_costs({"bad.json": {"token_counts": [1]}})
