"""The benchmark harness end to end on a tiny budget, and its plots (numbers are not checked)."""

import json

import matplotlib
import pytest

from specnb import bench
from specnb.viz.speedups import plot_speedup_vs_gamma, plot_speedups, speculative_by_gamma

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    bench.main(["--prompts", "3", "--max-new-tokens", "12", "--gammas", "2", "3",
                "--warmup", "0", "--repeats", "1", "--num-pred", "4", "--block", "4",
                "--device", "cpu", "--out", str(out)])
    assert out.with_suffix(".png").exists()
    return json.loads(out.read_text())


def test_record_has_every_method_and_identical_greedy_outputs(record):
    methods = {row["method"] for row in record["rows"]}
    assert methods == {"ours autoregressive", "ours speculative γ=2", "ours speculative γ=3",
                       "ours prompt lookup k=4", "ours jacobi block=4", "HF generate",
                       "HF assisted γ=2", "HF assisted γ=3", "HF assisted default",
                       "HF prompt lookup k=4"}
    assert all(row["identical"] for row in record["rows"]), "greedy outputs must all agree"
    assert all(row["new_tokens"] == 12 or row["new_tokens"] < 12 for row in record["rows"])
    assert {"device", "versions", "date", "settings", "dtype"} <= set(record)


def test_summary_ratios_are_consistent(record):
    summary = {s["method"]: s for s in record["summary"]["all"]}
    assert summary["ours autoregressive"]["speedup_vs_ours_ar"] == pytest.approx(1.0)
    assert summary["HF generate"]["speedup_vs_hf_greedy"] == pytest.approx(1.0)
    spec = summary["ours speculative γ=2"]
    assert 0.0 <= spec["acceptance"] <= 1.0 and 0.0 <= spec["alpha_hat"] <= 1.0
    assert spec["c_hat"] > 0 and spec["predicted"] > 0
    assert bench.format_summary(record["summary"]["all"]).count("\n") == len(summary) + 1


def test_plots(record):
    fig = plot_speedups(record)
    assert [ax.get_title() for ax in fig.axes] == ["open-ended prompts", "input-grounded prompts"]
    assert all("speedup" in ax.get_xlabel() for ax in fig.axes)
    assert [g for g, _, _ in speculative_by_gamma(record)] == [2, 3]
    fig = plot_speedup_vs_gamma(record)
    assert fig.axes[0].get_xlabel().startswith("γ") and len(fig.axes[0].lines) == 3


def test_plots_reject_records_without_summary():
    with pytest.raises(ValueError, match="summary"):
        plot_speedups({"rows": []})
