"""The batched benchmark end to end on a tiny budget (embedded pair), and its plot.

Timings are not checked (they vary); structure, token counts and row equality are."""

import json

import matplotlib
import pytest
import torch

from specnb import bench_batch
from specnb.viz.batching import cache_layout, plot_batch_throughput

matplotlib.use("Agg")

pytestmark = pytest.mark.embedded


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "batch.json"
    bench_batch.main(["--batch-sizes", "1", "3", "--gamma", "2", "--num-pred", "3",
                      "--max-new-tokens", "8", "--warmup", "0", "--repeats", "1",
                      "--device", "cpu", "--out", str(out)])
    assert out.with_suffix(".png").exists()
    return json.loads(out.read_text())


def test_every_row_of_every_method_equals_batched_autoregressive(record):
    methods = {r["method"] for r in record["rows"]}
    assert methods == {"ours autoregressive", "ours speculative γ=2", "ours prompt lookup k=3",
                       "HF generate"}
    for r in record["rows"]:
        assert r["identical_rows"] == r["batch"], r
        assert 0 < r["new_tokens"] <= 8 * r["batch"]
    assert {"device", "versions", "date", "settings", "dtype", "batch_forward"} <= set(record)


def test_speedups_are_relative_to_autoregressive_of_the_same_batch(record):
    for r in record["rows"]:
        if r["method"] == "ours autoregressive":
            assert r["speedup_vs_ours_ar"] == pytest.approx(1.0)
        assert r["tokens_per_s"] == pytest.approx(r["new_tokens"] / r["seconds"])


def test_batch_forward_times_every_shape(record):
    forward = record["batch_forward"]
    assert set(forward["median_ms"]) == {"1x1", "1x3", "3x1", "3x3"}
    assert all(ms > 0 for ms in forward["median_ms"].values())
    assert "B=3" in bench_batch.format_table(record)


def test_plot_and_bad_record(record):
    fig = plot_batch_throughput(record)
    assert len(fig.axes) == 3 and all(ax.get_title() for ax in fig.axes)
    with pytest.raises(ValueError, match="bench_batch"):
        plot_batch_throughput({"rows": []})


def test_cache_layout_draws_holes():
    text = cache_layout(torch.tensor([[1, 1, 0, 1], [1, 0, 0, 1]], dtype=torch.bool))
    assert text.splitlines() == ["row 0 |██·█|  3 tokens", "row 1 |█··█|  2 tokens"]


def test_methods_and_group_select_what_runs(tmp_path):
    out = tmp_path / "pl.json"
    record = bench_batch.main(["--batch-sizes", "2", "--methods", "prompt_lookup", "--group",
                               "input-grounded", "--num-pred", "3", "--max-new-tokens", "6",
                               "--warmup", "0", "--device", "cpu", "--out", str(out)])
    assert {r["method"] for r in record["rows"]} == {"ours autoregressive",
                                                     "ours prompt lookup k=3"}
    assert record["settings"]["group"] == "input-grounded"
    assert all(r["identical_rows"] == 2 for r in record["rows"])
