"""specnb.viz.timing: γ tables from hand-made records, plots, the race table, loading."""

import json
import math

import matplotlib.pyplot as plt
import pytest

import specnb
from specnb.viz.timing import (format_beside, format_clock, format_race, gamma_table, load_records,
                               plot_clock_against_theory, plot_latency_curves,
                               plot_speedup_vs_gamma)
from specnb.theory import predicted_from_counts, predicted_with_block_cost, relative_cost


def spec_line(gamma, speedup, predicted, alpha, cost):
    return {"method": f"ours speculative γ={gamma}", "speedup_vs_ours_ar": speedup,
            "predicted": predicted, "alpha_hat": alpha, "c_hat": cost}


RECORD = {"device": "CPU test", "summary": {"all": [
    {"method": "ours autoregressive", "speedup_vs_ours_ar": 1.0, "predicted": math.nan,
     "alpha_hat": math.nan, "c_hat": math.nan},
    spec_line(4, 0.8, 0.9, 0.4, 0.2), spec_line(2, 0.9, 1.0, 0.6, 0.1),
    {"method": "HF assisted γ=2", "speedup_vs_ours_ar": 0.7, "predicted": math.nan,
     "alpha_hat": math.nan, "c_hat": math.nan}]}}


def test_gamma_table_hand_computed():
    table = gamma_table(RECORD)
    assert table["gammas"] == [2, 4]  # sorted by γ
    assert table["ours"] == [0.9, 0.8] and table["predicted"] == [1.0, 0.9]
    assert table["hf_assisted"][0] == 0.7 and math.isnan(table["hf_assisted"][1])
    assert table["alpha_hat"] == pytest.approx(0.5) and table["c_hat"] == pytest.approx(0.15)


def test_gamma_table_bad_input():
    with pytest.raises(ValueError, match="group"):
        gamma_table(RECORD, "input-grounded")
    with pytest.raises(ValueError, match="speculative"):
        gamma_table({"summary": {"all": RECORD["summary"]["all"][:1]}})


def test_speedup_vs_gamma_plot():
    fig = plot_speedup_vs_gamma(RECORD, max_gamma=6)
    axes = fig.axes[0]
    curve, per_run, ours, hf, _ = axes.get_lines()
    assert list(curve.get_xdata()) == list(range(7))
    # pooled α̂ = 0.5, ĉ = 0.15: γ = 1 -> 1.5 / 1.15
    assert curve.get_ydata()[1] == pytest.approx(1.5 / 1.15)
    assert list(ours.get_ydata()) == [0.9, 0.8] and list(per_run.get_ydata()) == [1.0, 0.9]
    assert axes.get_xlabel().startswith("γ") and "speedup" in axes.get_ylabel()
    assert "CPU test" in axes.get_title()
    plt.close(fig)


def test_latency_curves_plot():
    cpu = {"token_counts": [1, 2, 4], "median_ms": [10.0, 12.0, 20.0]}
    gpu = {"token_counts": [1, 4, 16], "median_ms": [2.0, 2.0, 3.0]}
    fig = plot_latency_curves({"cpu": cpu, "gpu": gpu})
    absolute, relative = fig.axes
    assert list(absolute.get_lines()[1].get_ydata()) == [2.0, 2.0, 3.0]
    assert list(relative.get_lines()[0].get_ydata()) == [1.0, 1.2, 2.0]
    assert list(relative.get_lines()[2].get_ydata()) == [1, 2, 4, 16]  # the k× line
    for axes in fig.axes:
        assert axes.get_xlabel() == "new tokens scored in one forward, k" and axes.get_title()
    plt.close(fig)
    with pytest.raises(ValueError, match="k = 1"):
        plot_latency_curves({"no k=1": {"token_counts": [2], "median_ms": [1.0]}})
    with pytest.raises(ValueError, match="at least one"):
        plot_latency_curves({})


def test_format_race_from_a_hand_made_result():
    names = ["ours autoregressive", "ours speculative γ=2", "HF assisted γ=2"]
    result = {"gamma": 2, "temperature": 0.0, "seconds": dict(zip(names, [2.0, 1.0, 1.6])),
              "new_tokens": dict.fromkeys(names, 8), "target_forwards": dict(zip(names, [8, 4, 5])),
              "tokens_per_s": dict(zip(names, [4.0, 8.0, 5.0])), "speedup": 2.0,
              "speedup_vs_hf_assisted": 1.6, "alpha_hat": 0.5, "c_hat": 0.1,
              "predicted": 1.75 / 1.2, "identical": True}
    lines = format_race(result).splitlines()
    assert lines[0] == "γ = 2, T = 0.0" and len(lines) == 7
    assert lines[3].split()[-4:] == ["8", "4", "1.000", "8.0"]  # ours speculative
    assert "2.000x our autoregressive (predicted 1.458x" in lines[5]
    assert lines[6] == "outputs identical to autoregressive: yes"
    assert format_race({**result, "identical": None}).endswith("(sampled: not compared)")


def test_load_records(tmp_path):
    assert load_records(tmp_path) == {}
    (tmp_path / "bench-gpu-h100.json").write_text(json.dumps({"device": "H100"}))
    (tmp_path / "bench-cpu.json").write_text(json.dumps({"device": "CPU"}))
    assert load_records(tmp_path) == {"bench-gpu-h100.json": {"device": "H100"}}
    assert list(load_records(tmp_path, "bench-*.json")) == ["bench-cpu.json", "bench-gpu-h100.json"]
    with pytest.raises(ValueError, match="does not exist"):
        load_records(tmp_path / "missing")


def test_relative_cost_interpolates():
    latency = {"token_counts": [1, 2, 4], "median_ms": [10.0, 12.0, 20.0]}
    assert relative_cost(latency, 1) == 1.0 and relative_cost(latency, 4) == 2.0
    assert relative_cost(latency, 3) == pytest.approx(1.6)
    with pytest.raises(ValueError, match="outside"):
        relative_cost(latency, 8)


def test_predicted_from_counts_divides_by_the_cost_of_what_is_fed():
    latency = {"token_counts": [1, 2, 4, 12], "median_ms": [10.0, 12.0, 20.0, 30.0]}
    assert predicted_from_counts(1.0, 1, latency) == 1.0  # autoregressive decoding
    assert predicted_from_counts(1.2, 8, latency) == pytest.approx(1.2 / 2.5)
    with pytest.raises(ValueError, match="outside"):
        predicted_from_counts(1.2, 16, latency)
    with pytest.raises(ValueError, match="tokens_per_forward"):
        predicted_from_counts(0.0, 2, latency)


def test_predicted_with_block_cost_hand_computed():
    assert predicted_with_block_cost(0.5, 2, 0.1, 1.25) == pytest.approx(1.75 / 1.45)
    assert predicted_with_block_cost(0.8, 4, 0.05, 1.0) == pytest.approx(
        specnb.predicted_speedup(0.8, 4, 0.05))
    with pytest.raises(ValueError, match="block_cost"):
        predicted_with_block_cost(0.5, 2, 0.1, 0.0)
    with pytest.raises(ValueError, match="alpha"):
        predicted_with_block_cost(1.5, 2, 0.1, 1.0)


def test_latency_band_from_samples():
    cpu = {"token_counts": [1, 2], "median_ms": [10.0, 12.0],
           "samples_ms": [[9.0, 10.0, 11.0], [12.0, 12.0, 15.0]]}
    fig = plot_latency_curves({"cpu": cpu})
    absolute = fig.axes[0]
    assert len(absolute.collections) == 1  # the min–max band
    assert "median of 3" in absolute.get_title()
    plt.close(fig)


CLOCK = {"repeats": 5, "max_new_tokens": 24, "autoregressive_median_s": 1.2,
         "rows": [{"name": "draft γ=2", "gamma": 2, "median_s": 1.5, "speedup": 0.8,
                   "speedup_min": 0.7, "speedup_max": 0.9, "tokens_per_forward": 1.4,
                   "draft_yield": 0.2, "alpha_hat": 0.3, "c_hat": 0.1, "checking_cost": 1.6,
                   "checking_cost_min": 1.5, "checking_cost_max": 1.7, "checking_cost_curve": 1.9,
                   "predicted": 1.1, "predicted_with_checking": 0.75, "identical": True}]}


def test_format_clock_from_a_hand_made_result():
    lines = format_clock(CLOCK).splitlines()
    assert len(lines) == 3 and "α̂" in lines[0] and "draft yield" in lines[0]
    assert "checking, in loop" in lines[0] and "curve" in lines[0]
    assert lines[1].split()[2:] == ["1.40", "0.200", "0.300", "0.100", "1.60", "(1.50–1.70)",
                                    "1.90", "1.10×", "0.75×", "0.80×", "(0.70–0.90)"]
    without_curve = {**CLOCK, "rows": [{**CLOCK["rows"][0], "checking_cost_curve": math.nan}]}
    assert "curve" not in format_clock(without_curve).splitlines()[0]
    assert "timed 5 times" in lines[2] and lines[2].endswith("yes")
    with pytest.raises(ValueError, match="clock_against_theory"):
        format_clock({"rows": []})


def test_plot_clock_against_theory_draws_spread_and_n():
    fig = plot_clock_against_theory(CLOCK, title="t")
    axes = fig.axes[0]
    heights = [bar.get_height() for bar in axes.patches]
    assert heights == pytest.approx([1.1, 0.75, 0.8])  # Thm 3.8, with checking, measured
    assert any(t.get_text() == "n=5" for t in axes.texts)
    assert axes.get_title() == "t" and "speedup" in axes.get_ylabel() and axes.get_xlabel()
    assert len(axes.lines) >= 2  # the error bar's caps
    plt.close(fig)


def test_format_beside_sets_two_machines_side_by_side():
    def record(speedups):
        return {"summary": {"all": [
            {"method": m, "speedup_vs_ours_ar": ar, "speedup_vs_peer": peer}
            for m, (ar, peer) in speedups.items()]}}
    cpu = record({"ours autoregressive": (1.0, 1.01), "ours speculative γ=2": (1.4, 1.05),
                  "HF generate": (0.99, float("nan"))})
    gpu = record({"ours autoregressive": (1.0, 0.97), "ours speculative γ=2": (2.6, 1.1)})
    lines = format_beside({"CPU (AMD EPYC)": cpu, "GPU (H100)": gpu}).splitlines()
    assert "CPU (AMD EPYC)" in lines[0] and "GPU (H100)" in lines[0]
    assert [line.split()[0] for line in lines[2:]] == ["ours", "ours"]  # only the shared methods
    assert lines[3].split()[-4:] == ["1.40", "1.05", "2.60", "1.10"]
    assert format_beside({"CPU": cpu}).splitlines()[-1].split()[-1] == "0.99"  # no peer
