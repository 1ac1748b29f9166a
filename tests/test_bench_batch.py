"""The batched benchmark end to end on a tiny budget (embedded pair), and its plot.

Timings are not checked (they vary); structure, token counts and row equality are."""

import json

import matplotlib
import pytest
import torch

from specnb.bench import batch as bench_batch
from specnb.models.data import DATA_DIR
from specnb.methods.results import GenerationResult, Iteration, Stats
from specnb.viz.batching import (cache_layout, checking_cost, plot_batch_throughput,
                                 plot_checking_cost, plot_mix_sweep)

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
    # 1 token, γ + 1 = 3 and num_pred + 1 = 4 (prompt lookup ran)
    assert set(forward["median_ms"]) == {"1x1", "1x3", "1x4", "3x1", "3x3", "3x4"}
    assert all(ms > 0 for ms in forward["median_ms"].values())
    assert "B=3" in bench_batch.format_table(record)


def test_plot_and_bad_record(record):
    fig = plot_batch_throughput(record)
    assert len(fig.axes) == 3 and all(ax.get_title() for ax in fig.axes)
    with pytest.raises(ValueError, match="specnb.bench.batch"):
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


@pytest.fixture(scope="module")
def mix_record(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "mix.json"
    return bench_batch.main(["--batch-sizes", "1", "2", "--mix", "same", "mixed", "--prompt",
                             "rename-total", "--group", "input-grounded", "--methods",
                             "prompt_lookup", "--num-pred", "3", "--max-new-tokens", "6",
                             "--warmup", "0", "--repeats", "2", "--forward-repeats", "5",
                             "--device", "cpu", "--out", str(out)])


def test_same_mix_copies_one_prompt_and_mixed_takes_the_first_prompts(mix_record):
    rows = mix_record["rows"]
    assert {(r["mix"], r["batch"]) for r in rows} == {("same", 1), ("same", 2), ("mixed", 1),
                                                      ("mixed", 2)}
    lookup = {(r["mix"], r["batch"]): r for r in rows if r["method"] != "ours autoregressive"}
    same = lookup["same", 2]
    assert same["row_tokens"][0] == same["row_tokens"][1]  # copies decode the same text
    assert same["row_tokens_per_forward"][0] == lookup["same", 1]["row_tokens_per_forward"][0]
    assert lookup["mixed", 1]["row_tokens"] == lookup["same", 1]["row_tokens"]  # rename-total first
    for r in rows:
        assert len(r["seconds_samples"]) == 2 and r["identical_rows"] == r["batch"]
        assert sum(r["row_tokens"]) == r["new_tokens"] and r["ms_per_forward"] > 0
        assert max(r["row_forwards"]) == r["target_forwards"]
    assert all(0 <= r["alpha_hat"] <= 1 for r in lookup.values())


def test_forward_keeps_every_repeat_for_each_width(mix_record):
    forward = mix_record["batch_forward"]
    assert forward["tokens_per_row"] == [1, 4, 5]  # 1, γ + 1 and num_pred + 1
    assert forward["repeats"] == 5
    assert all(len(v) == 5 for v in forward["samples_ms"].values())
    cost = checking_cost(forward, 4)
    assert set(cost) == {1, 2} and all(lo <= med <= hi and n == 5 for med, lo, hi, n in
                                       cost.values())
    table = bench_batch.format_table(mix_record)
    assert "same" in table and "mixed" in table and "α̂" in table


def test_mix_plots(mix_record):
    fig = plot_mix_sweep(mix_record)
    assert len(fig.axes) == 3 and all(ax.get_title() for ax in fig.axes)
    assert "n = 2" in fig.axes[2].get_title()
    for along in ("batch", "tokens"):
        fig = plot_checking_cost(mix_record["batch_forward"], along=along)
        assert "n = 5" in fig.axes[0].get_title()
    assert len(plot_batch_throughput(mix_record).axes) == 3


@pytest.mark.parametrize("call, match", [
    (lambda: checking_cost({"batch_sizes": [1], "tokens_per_row": [1, 5], "median_ms": {}}, 3),
     "tokens_per_row"),
    (lambda: plot_checking_cost({"batch_sizes": [1], "tokens_per_row": [1, 5]}, along="rows"),
     "along"),
    (lambda: plot_mix_sweep({"rows": [{"method": "ours autoregressive"}]}), "per-row counts"),
    (lambda: bench_batch.batch_of_prompts(None, 2, "cpu", mix="same", prompt_id="nope"),
     "prompt_id"),
    (lambda: bench_batch.batch_of_prompts(None, 2, "cpu", mix="shuffled"), "mix"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_checking_cost_pairs_repeats():
    forward = {"batch_sizes": [1], "tokens_per_row": [1, 5],
               "samples_ms": {"1x1": [10, 12, 11], "1x5": [15, 18, 22]}}
    assert checking_cost(forward, 5) == {1: (1.5, 1.5, 2.0, 3)}
    medians_only = {"batch_sizes": [2], "tokens_per_row": [1, 5],
                    "median_ms": {"2x1": 10.0, "2x5": 25.0}}
    assert checking_cost(medians_only, 5) == {2: (2.5, 2.5, 2.5, 1)}


def test_per_row_counts_from_the_trace():
    trace = [Iteration(row=0, step=s, target_s=0.01) for s in (1, 2, 3, 4)] + \
            [Iteration(row=1, step=s, target_s=0.01) for s in (1, 2, 3)]
    result = GenerationResult("x", [[1] * 8, [2] * 3], Stats(), trace)
    counts = bench_batch.per_row_counts(result)
    assert counts["row_tokens_per_forward"] == [2.0, 1.0] and counts["row_forwards"] == [4, 3]
    assert counts["ms_per_forward"] == pytest.approx(10.0)


@pytest.mark.parametrize("name", ["bench-batch-cpu-amd-epyc-avx2.json", "bench-batch-cpu.json",
                                  "bench-batch-cpu-input-grounded.json"])
def test_records_written_before_mix_still_read(name):
    import json as _json
    path = DATA_DIR / "results" / name
    if not path.exists():
        pytest.skip(f"{name} not recorded")
    record = _json.loads(path.read_text())
    assert "B=" in bench_batch.format_table(record)
    assert len(plot_batch_throughput(record).axes) == 3


def test_paired_speedup_pairs_repeats():
    base = {"new_tokens": 10, "seconds_samples": [2.0, 4.0, 2.0]}
    row = {"new_tokens": 10, "seconds_samples": [1.0, 1.0, 2.0], "speedup_vs_ours_ar": 9.9}
    assert bench_batch.paired_speedup(row, base) == 2.0  # median of [2, 4, 1]
    assert bench_batch.paired_speedup({"speedup_vs_ours_ar": 1.5}, {}) == 1.5  # old records


def test_an_interrupt_keeps_the_batch_sizes_that_finished(monkeypatch):
    """Ctrl-C (or scripts/gpu_check.py's SIGINT at its budget) during the third batch size:
    the record keeps the two that finished, with the forward curve measured before them, and
    says it stopped. Before any finished there is nothing to keep: the interrupt goes on."""
    from argparse import Namespace

    finished = []

    def time_batch(args, methods, prompts, mix, batch, device, bar):
        if len(finished) == 2:
            raise KeyboardInterrupt
        finished.append(batch)
        return [{"method": "ours autoregressive", "mix": mix, "batch": batch, "seconds": 1.0,
                 "new_tokens": 4 * batch}]
    monkeypatch.setattr(bench_batch, "time_batch", time_batch)
    monkeypatch.setattr(bench_batch, "batch_of_prompts", lambda *args: None)
    monkeypatch.setattr(bench_batch, "measure_batch_forward", lambda *args, **kwargs: "curve")
    target = torch.nn.Linear(1, 1)
    target.device, target.dtype = torch.device("cpu"), torch.float32
    args = Namespace(batch_sizes=[1, 2, 4, 8], gamma=2, num_pred=4, max_new_tokens=4,
                     group=None, mix=["mixed"], prompt=None, methods=["autoregressive"],
                     repeats=1, warmup=0, forward_repeats=5, device="cpu", dtype=None)
    record = bench_batch.run(args, pair=(target, None, None), keep_partial=True)
    assert record["interrupted"] == "stopped after 2 of 4 (mix, batch size) settings"
    assert [row["batch"] for row in record["rows"]] == [1, 2]
    assert record["batch_forward"] == "curve" and record["rows"][1]["tokens_per_s"] == 8.0
    finished.clear()  # a library caller that did not ask for partial results
    with pytest.raises(KeyboardInterrupt):
        bench_batch.run(args, pair=(target, None, None))
    finished[:] = [0, 0]  # the first batch size is interrupted now: nothing to keep
    with pytest.raises(KeyboardInterrupt):
        bench_batch.run(args, pair=(target, None, None), keep_partial=True)
