"""The benchmark harness end to end on a tiny budget, greedy and sampled, and its plots.

Timings are not checked (they vary); structure, token counts, peers and equality are. The
`record` and `sampled` fixtures run `python -m specnb.bench` on the embedded pair, every method
and its transformers peer: the tests that use them are `embedded` and `slow`."""

import json
import math

import matplotlib
import pytest

import specnb
from specnb.bench import compare as bench
from specnb.models.fast_path import PATHS
from specnb.models.pairs import EMBEDDED_ENGINES_HEAD
from specnb.viz.speedups import (per_prompt_speedups, plot_per_prompt_speedups, plot_speedups,
                                  speculative_by_gamma)
from specnb.viz.timing import plot_speedup_vs_gamma

matplotlib.use("Agg")


def bench_run(test):
    """Mark a test that reads a whole benchmark run of the embedded pair."""
    return pytest.mark.slow(pytest.mark.embedded(test))


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    bench.main(["--ids", "sleep-tips", "rename-total", "--max-new-tokens", "12", "--gammas", "2", "3",
                "--head-gammas", "2",
                "--warmup", "0", "--repeats", "1", "--num-pred", "4", "--block", "4",
                "--lookahead", "3,2,2", "--device", "cpu", "--latency-counts", "1", "2",
                "--out", str(out)])
    assert out.with_suffix(".png").exists()
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "sampled.json"
    bench.main(["--prompts", "2", "--max-new-tokens", "8", "--gammas", "2", "--head-gammas", "2",
                "--temperature",
                "0.7", "--warmup", "0", "--repeats", "1", "--num-pred", "4", "--device", "cpu",
                "--latency-counts", "--out", str(out)])
    return json.loads(out.read_text())


@bench_run
def test_record_has_every_method_and_identical_greedy_outputs(record):
    methods = {row["method"] for row in record["rows"]}
    assert methods == {"ours autoregressive", "ours speculative γ=2", "ours speculative γ=3",
                       "ours feature head γ=2", "ours prompt lookup k=4", "ours jacobi block=4",
                       "ours lookahead W,N,G=3,2,2", "HF generate", "HF assisted γ=2",
                       "HF assisted γ=3", "HF assisted default", "HF prompt lookup k=4"}
    assert all(row["identical"] for row in record["rows"]), "greedy outputs must all agree"
    lengths = {}  # prompt -> the answer lengths of all methods: one, 1..12 (EOS may end it)
    for row in record["rows"]:
        lengths.setdefault(row["prompt_id"], set()).add(row["new_tokens"])
    assert all(len(n) == 1 and 1 <= min(n) <= 12 for n in lengths.values()), lengths
    assert {"device", "versions", "date", "settings", "dtype", "wall_s"} <= set(record)
    assert record["settings"]["temperature"] == 0.0 and record["settings"]["max_new_tokens"] == 12
    assert record["dtype"] == "torch.float32"  # CPU: float32
    assert record["cpu_path"] in PATHS


@bench_run
def test_peer_forwards_are_counted(record):
    for row in record["rows"]:
        if row["method"] == "HF generate":  # one target forward per new token
            assert row["target_forwards"] == row["new_tokens"]
        if row["method"].startswith("HF"):
            assert 1 <= row["target_forwards"] <= row["new_tokens"]


@bench_run
def test_forward_latency_is_recorded(record):
    latency = record["forward_latency"]
    assert latency["token_counts"] == [1, 2] and latency["prefix_len"] == 200
    assert all(ms > 0 for ms in latency["median_ms"])


def test_peer_of():
    assert bench.peer_of("ours speculative γ=4") == "HF assisted γ=4"
    assert bench.peer_of("ours prompt lookup k=10") == "HF prompt lookup k=10"
    assert bench.peer_of("ours autoregressive") == "HF generate"
    assert bench.peer_of("ours feature head γ=2") == "HF assisted γ=2"
    assert bench.peer_of("ours jacobi block=8") is None and bench.peer_of("HF generate") is None


def test_bad_temperature_is_refused(capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(["--temperature", "-1"])
    assert "--temperature must be a finite number >= 0" in capsys.readouterr().err


def summary_row(method, tokens, seconds, prompt="p"):
    return {"method": method, "prompt_id": prompt, "group": "open-ended", "new_tokens": tokens,
            "seconds": seconds, "target_forwards": tokens, "drafted": 0, "accepted": 0,
            "alpha_hat": math.nan, "c_hat": math.nan, "gamma": None, "identical": None}


def test_summary_speedups_are_throughputs_when_lengths_differ():
    """Sampled answers differ in length: 6 tokens in 1 s beat 8 in 2 s by 1.5x, not by 2x."""
    rows = [summary_row("ours autoregressive", 8, 2.0), summary_row("HF generate", 8, 1.6),
            summary_row("ours speculative γ=2", 6, 1.0), summary_row("HF assisted γ=2", 9, 1.5),
            summary_row("ours autoregressive", 4, 1.0, "q"),
            summary_row("HF generate", 4, 1.0, "q"),
            summary_row("ours speculative γ=2", 4, 0.5, "q"),
            summary_row("HF assisted γ=2", 4, 1.0, "q")]
    summary = {s["method"]: s for s in bench.summary_rows({"rows": rows})}
    mine = summary["ours speculative γ=2"]
    assert mine["tokens_per_s"] == pytest.approx(10 / 1.5)
    assert mine["speedup_vs_ours_ar"] == pytest.approx((10 / 1.5) / (12 / 3.0))
    assert mine["speedup_vs_hf_greedy"] == pytest.approx((10 / 1.5) / (12 / 2.6))
    assert mine["speedup_vs_peer"] == pytest.approx((10 / 1.5) / (13 / 2.5))
    assert mine["speedup_vs_best_hf"] == pytest.approx((10 / 1.5) / (13 / 2.5))  # the faster HF
    assert summary["ours autoregressive"]["speedup_vs_ours_ar"] == pytest.approx(1.0)
    # the prompts' own speedups: 6 tokens/s against 4 on p, 8 against 4 on q
    assert (mine["speedup_vs_ours_ar_low"], mine["speedup_vs_ours_ar_high"]) == (1.5, 2.0)
    assert "1.50–2.00" in bench.format_summary(list(summary.values()))
    # The per-prompt view agrees with the summary's total.
    assert per_prompt_speedups({"rows": rows})["ours speculative γ=2"]["total"] == \
        pytest.approx(mine["speedup_vs_ours_ar"])


@bench_run
def test_summary_ratios_are_consistent(record):
    summary = {s["method"]: s for s in record["summary"]["all"]}
    assert summary["ours autoregressive"]["speedup_vs_ours_ar"] == pytest.approx(1.0)
    assert summary["HF generate"]["speedup_vs_hf_greedy"] == pytest.approx(1.0)
    spec = summary["ours speculative γ=2"]
    assert 0.0 <= spec["acceptance"] <= 1.0 and 0.0 <= spec["alpha_hat"] <= 1.0
    assert spec["c_hat"] > 0 and spec["predicted"] > 0
    lookup = summary["ours prompt lookup k=4"]  # α̂ of copied drafts; no draft model, no ĉ
    assert 0.0 <= lookup["alpha_hat"] <= 1.0 and lookup["c_hat"] != lookup["c_hat"]
    assert bench.format_summary(record["summary"]["all"]).count("\n") == len(summary) + 2
    for name, line in summary.items():  # ×peer: the peer's time over ours
        peer = bench.peer_of(name)
        assert line["peer"] == peer
        if peer:
            assert line["speedup_vs_peer"] == pytest.approx(
                line["speedup_vs_ours_ar"] / summary[peer]["speedup_vs_ours_ar"])
    assert summary["HF generate"]["tokens_per_forward"] == pytest.approx(1.0)
    assert set(record["summary"]) == {"all", "open-ended", "input-grounded"}


@bench_run
def test_sampled_mode(sampled):
    """T > 0: every method but Jacobi (greedy only) runs; outputs are not compared."""
    methods = {row["method"] for row in sampled["rows"]}
    assert methods == {"ours autoregressive", "ours speculative γ=2", "ours feature head γ=2",
                       "ours prompt lookup k=4", "HF generate", "HF assisted γ=2",
                       "HF assisted default", "HF prompt lookup k=4"}
    assert all(row["identical"] is None for row in sampled["rows"])
    assert all(1 <= row["new_tokens"] <= 8 for row in sampled["rows"])
    assert sampled["settings"]["temperature"] == 0.7 and sampled["forward_latency"] is None
    table = bench.format_summary(sampled["summary"]["all"])
    assert table.count("(sampled)") == len(methods) and " NO" not in table


@bench_run
def test_plots(record):
    fig = plot_speedups(record)
    assert [ax.get_title() for ax in fig.axes] == ["open-ended prompts", "input-grounded prompts"]
    assert all("speedup" in ax.get_xlabel() for ax in fig.axes)
    assert [g for g, _, _ in speculative_by_gamma(record)] == [2, 3]
    fig = plot_speedup_vs_gamma(record)
    assert fig.axes[0].get_xlabel().startswith("γ") and len(fig.axes[0].lines) >= 4


def test_plots_reject_records_without_summary():
    with pytest.raises(ValueError, match="summary"):
        plot_speedups({"rows": []})


def test_prompt_selection():
    chosen = bench.select_prompts(bench.parse_args(["--ids", "rename-total", "sky-blue"]))
    assert [p["id"] for p in chosen] == ["rename-total", "sky-blue"]
    first = bench.select_prompts(bench.parse_args(["--prompts", "8"]))
    assert {p["group"] for p in first} == {"open-ended", "input-grounded"}
    grounded = bench.select_prompts(bench.parse_args(["--group", "input-grounded"]))
    assert len(grounded) == 12 and {p["group"] for p in grounded} == {"input-grounded"}
    with pytest.raises(ValueError, match="--ids"):
        bench.select_prompts(bench.parse_args(["--ids", "no-such-prompt"]))


@pytest.fixture(scope="module")
def adaptive(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "adaptive.json"
    bench.main(["--methods", "ours feature head", "ours engines head", "ours mixed",
                "--head-gammas", "1",
                "--gammas", "2", "--acceptance", "exact", "typical", "--schedules", "fixed",
                "heuristic", "cost-aware", "--head-trees", "2,1", "--head-int8-trees", "2,1",
                "--trim", "--head-int8-gammas", "1",
                "--head-dynamic", "3,2,2", "--head-int8-dynamic", "3,2,2",
                "--mixed", "2", "--mixed-int8", "2", "--prompts",
                "1", "--max-new-tokens", "8", "--engines-head", str(EMBEDDED_ENGINES_HEAD),
                "--warmup", "0",
                "--repeats", "1", "--device", "cpu", "--latency-counts", "1", "2",
                "--out", str(out)])
    return json.loads(out.read_text())


@bench_run
def test_acceptance_rules_and_gamma_schedules_are_benchmarked(adaptive):
    lines = {line["method"]: line for line in adaptive["summary"]["all"]}
    heads = {f"ours {head} γ={g}{rule}" for head in ("feature head", "engines head")
             for g in ("1", "heuristic", "cost-aware") for rule in ("", " typical")}
    assert set(lines) == heads | {"ours autoregressive", "HF generate",
                                  "ours feature head tree=2,1", "ours feature head dynamic=3,2,2",
                                  "ours feature head int8 tree=2,1", "ours feature head int8 γ=1",
                                  "ours feature head tree=2,1 trimmed",
                                  "ours feature head int8 tree=2,1 trimmed",
                                  "ours feature head int8 dynamic=3,2,2",
                                  "ours mixed tree=2+lookup", "ours mixed int8 tree=2+lookup"}
    assert all(row["identical"] for row in adaptive["rows"])  # greedy: every setting exact
    assert lines["ours feature head γ=1"]["mean_gamma"] == 1.0
    assert lines["ours feature head γ=heuristic"]["mean_gamma"] >= 1.0
    assert math.isnan(lines["ours feature head γ=cost-aware"]["predicted"])  # no single γ
    assert adaptive["settings"]["acceptance"] == ["exact", "typical"]
    # The second head gets rows of its own, under every schedule and rule (the set above).
    assert lines["ours engines head γ=1"]["mean_gamma"] == 1.0


def test_a_second_head_needs_a_saved_head_and_a_gamma(tmp_path, capsys):
    for argv, message in ((["--engines-head", str(tmp_path)], "no saved head there"),
                          (["--engines-head", str(EMBEDDED_ENGINES_HEAD), "--head-gammas"],
                           "give at least one")):
        with pytest.raises(SystemExit):
            bench.parse_args(argv)
        assert message in capsys.readouterr().err


def test_cost_aware_needs_the_one_token_latency(capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(["--schedules", "cost-aware", "--latency-counts", "2", "4"])
    assert "--latency-counts must include 1" in capsys.readouterr().err


def test_early_stop_runs_ours_and_transformers_at_the_same_threshold(monkeypatch, capsys):
    """`--stop-below`: our draft stops after a doubtful token (fewer drafts, same greedy
    tokens) and transformers' assistant gets the same confidence threshold."""
    import torch

    from tiny_models import tiny_llama

    target, draft = tiny_llama(1), tiny_llama(2, hidden=16, layers=1)
    ids = torch.randint(1, 30, (1, 12), generator=torch.Generator().manual_seed(0))
    drafted, tokens = {}, {}
    for stop in ("0", "0.6"):
        args = bench.parse_args(["--gammas", "4", "--head-gammas", "--stop-below", stop,
                                 "--max-new-tokens", "24"], check_prompts=False)
        table = bench.all_methods(args, target, draft, None, {})
        result = table["ours speculative γ=4"][1](ids, None)
        drafted[stop], tokens[stop] = result.stats.drafted, result.tokens
        seen = []
        monkeypatch.setattr(bench, "hf_generate", lambda target, ids, assistant_model, **_:
                            seen.append(assistant_model.generation_config
                                        .assistant_confidence_threshold))
        table["HF assisted γ=4"][1](ids, None)
        assert seen == [float(stop)]
    assert tokens["0"] == tokens["0.6"] and drafted["0.6"] < drafted["0"]
    with pytest.raises(SystemExit):
        bench.parse_args(["--stop-below", "1.5"])
    assert "--stop-below must be a probability in [0, 1]" in capsys.readouterr().err


def test_the_transformers_peer_drafts_gamma_tokens_every_iteration():
    """The peer runs the setting it is named for: with no early stop, γ assistant forwards
    before every target forward (fewer only where max_new_tokens cuts the last ones). The
    obvious call, the same settings passed to generate(), does not: transformers builds its
    candidate generator from the assistant's own generation_config, whose confidence stop (0.4)
    and schedule replace them."""
    import torch

    from tiny_models import tiny_llama

    target, draft = tiny_llama(1), tiny_llama(2, hidden=16, layers=1)
    ids = torch.randint(1, 30, (1, 12), generator=torch.Generator().manual_seed(0))
    args = bench.parse_args(["--gammas", "4", "--head-gammas", "--stop-below", "0",
                             "--max-new-tokens", "24"], check_prompts=False)
    peer = bench.all_methods(args, target, draft, None, {})["HF assisted γ=4"][1]
    counts = bench.drafts_per_target_forward(target, draft, lambda: peer(ids, None))
    assert len(counts) > 8 and set(counts[:-4]) == {4} and counts[-4:] == [3, 2, 1, 0]
    obvious = bench.drafts_per_target_forward(target, draft, lambda: bench.hf_generate(
        target, ids, max_new_tokens=24, temperature=0.0, generator=None, assistant_model=draft,
        num_assistant_tokens=4, assistant_confidence_threshold=0.0))
    assert set(obvious[:-4]) != {4}  # the trap: not what was asked for
    both = bench.assisted_two_ways(target, draft, ids, gamma=4, max_new_tokens=24)
    assert both == {"passed to generate()": obvious, "set on the assistant": counts}


def test_the_test_split_is_selectable():
    args = bench.parse_args(["--split", "test", "--group", "open-ended", "--prompts", "3"])
    chosen = bench.select_prompts(args)
    assert [p["id"] for p in chosen] == [p["id"] for p in specnb.load_prompts("test", "open-ended")[:3]]
    args = bench.parse_args(["--split", "test", "--ids", "sky-blue"])  # an eval prompt
    with pytest.raises(ValueError, match="no test prompt"):
        bench.select_prompts(args)
    assert bench.parse_args([]).split == "eval"


def test_repeats_are_interleaved_across_methods(monkeypatch):
    """Each round times every method once (after every method's warm-up), so a slow moment of
    the machine lands on all of them; each row reports the median of its own method's runs."""
    import torch

    calls = []

    def method(name):
        def run(ids, generator, trace=False):
            calls.append(name)
            return bench.PeerResult([1, 2, 3], 3)
        return run

    monkeypatch.setattr(bench, "methods", lambda *args: {
        "ours autoregressive": (None, method("a")), "HF generate": (None, method("b"))})
    monkeypatch.setattr(bench, "chat_ids", lambda *args, **kwargs: torch.tensor([[1, 2]]))
    # The timed runs of each method take these seconds in turn (medians 2.0, spreads 2.0).
    ticks = {"a": iter([1.0, 3.0, 2.0]), "b": iter([2.0, 1.0, 3.0])}
    monkeypatch.setattr(bench, "timed", lambda function, repeats, device: (
        function(), next(ticks[calls[-1]]), 0.0))  # calls[-1]: the method function() just ran
    target = torch.nn.Linear(1, 1)
    target.device, target.dtype = torch.device("cpu"), torch.float32
    args = bench.parse_args(["--ids", "sleep-tips", "--warmup", "1", "--repeats", "3",
                             "--latency-counts"])
    record = bench.run(args, pair=(target, None, None), progress=False)
    assert calls == ["a", "b"] + ["a", "b"] * 3
    assert [(row["method"], row["seconds"], row["spread"]) for row in record["rows"]] == [
        ("ours autoregressive", 2.0, 2.0), ("HF generate", 2.0, 2.0)]


def test_an_interrupt_keeps_the_prompts_that_finished(monkeypatch, tmp_path, capsys):
    """Ctrl-C (or scripts/gpu_check.py's SIGINT at its budget) during the second prompt: the
    record holds the first prompt's rows and says it stopped; `main` writes it and exits 130.
    Before the first prompt finished there is nothing to keep, and the interrupt goes on."""
    import torch

    timed_prompts = []

    def time_prompt(args, table, ids, prompt, *rest):
        if len(timed_prompts) == 1:
            raise KeyboardInterrupt
        timed_prompts.append(prompt["id"])
        return [bench.Row(name, prompt["id"], prompt["group"], 3, 1.0, 0.0, identical=True)
                for name in ("ours autoregressive", "HF generate")]
    monkeypatch.setattr(bench, "time_prompt", time_prompt)
    monkeypatch.setattr(bench, "methods", lambda *args: {})
    monkeypatch.setattr(bench, "chat_ids", lambda *args, **kwargs: torch.tensor([[1, 2]]))
    target = torch.nn.Linear(1, 1)
    target.device, target.dtype = torch.device("cpu"), torch.float32
    monkeypatch.setattr(bench, "load_pair", lambda *args, **kwargs: (target, None, None))
    out = tmp_path / "bench.json"
    with pytest.raises(SystemExit) as stopped:
        bench.main(["--ids", "sleep-tips", "sky-blue", "rename-total", "--latency-counts",
                    "--head-gammas", "--out", str(out)])
    assert stopped.value.code == 130
    record = json.loads(out.read_text())
    assert record["interrupted"] == "stopped after 1 of 3 prompts"
    assert {row["prompt_id"] for row in record["rows"]} == {"sleep-tips"}
    assert "interrupted: stopped after 1 of 3 prompts" in capsys.readouterr().err
    args = bench.parse_args(["--ids", "sleep-tips", "sky-blue", "--latency-counts"])
    timed_prompts[:] = []  # a library caller that did not ask for partial results
    with pytest.raises(KeyboardInterrupt):
        bench.run(args, pair=(target, None, None), progress=False)
    timed_prompts[:] = ["x"]  # the first prompt is interrupted now: nothing to keep
    with pytest.raises(KeyboardInterrupt):
        bench.run(args, pair=(target, None, None), progress=False, keep_partial=True)


RECORD = {"device": "CPU test", "settings": {"max_new_tokens": 8, "temperature": 0.0}, "rows": [
    {"method": "ours autoregressive", "prompt_id": "a", "new_tokens": 8, "seconds": 2.0},
    {"method": "ours autoregressive", "prompt_id": "b", "new_tokens": 8, "seconds": 4.0},
    {"method": "ours tree", "prompt_id": "a", "new_tokens": 8, "seconds": 1.0},
    {"method": "ours tree", "prompt_id": "b", "new_tokens": 8, "seconds": 4.0},
    {"method": "HF generate", "prompt_id": "a", "new_tokens": 8, "seconds": 2.5},
    {"method": "ours sampled", "prompt_id": "a", "new_tokens": 4, "seconds": 0.5}]}


def test_per_prompt_speedups_and_their_plot():
    speedups = per_prompt_speedups(RECORD)
    assert speedups["ours tree"] == pytest.approx({"a": 2.0, "b": 1.0, "total": 1.2})
    assert speedups["HF generate"] == pytest.approx({"a": 0.8, "total": 0.8})  # the one it ran
    assert speedups["ours sampled"] == pytest.approx({"a": 2.0, "total": 2.0})  # 8 tok/s vs 4
    fig = plot_per_prompt_speedups(RECORD, methods=["ours tree"])
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["ours tree"]
    assert sorted(ax.lines[0].get_xdata()) == [1.0, 2.0]  # a dot per prompt
    assert ax.patches[0].get_width() == pytest.approx(1.2)  # the bar: over all prompts
    with pytest.raises(ValueError, match="no rows for"):
        plot_per_prompt_speedups(RECORD, methods=["ours chain"])
    with pytest.raises(ValueError, match="'ours autoregressive'"):
        per_prompt_speedups({"rows": RECORD["rows"][2:]})  # no autoregressive rows
    with pytest.raises(ValueError, match="rows"):
        per_prompt_speedups({"summary": {}})


def test_engine_metrics_pool_rows_as_vllm_pools_steps():
    """Two prompts: 4 drafts accepting [2, 0, 1, 3] of γ = 3, then 2 accepting [3, 1]."""
    rows = [{"drafts": 4, "accepted": 6, "drafted": 12, "accepted_per_position": [3, 2, 1]},
            {"drafts": 2, "accepted": 4, "drafted": 6, "accepted_per_position": [2, 1, 1]}]
    metrics = bench.engine_metrics(rows)
    assert metrics["mean_acceptance_length"] == pytest.approx(1 + 10 / 6)
    assert metrics["per_position_acceptance"] == pytest.approx([5 / 6, 3 / 6, 2 / 6])
    assert metrics["draft_acceptance_rate"] == pytest.approx(10 / 18)
    old = [{"accepted": 6, "drafted": 12}]  # a record from before rows counted drafts
    assert bench.engine_metrics(old)["per_position_acceptance"] == []
    assert math.isnan(bench.engine_metrics(old)["mean_acceptance_length"])


def test_summed_stats_add_every_counter_and_pad_the_positions():
    """One method over two prompts: the counters add, shorter per-position lists count 0."""
    from specnb.methods.results import Stats

    first = Stats(new_tokens=3, drafted=4, accepted=2, drafting_steps=2, wall_s=0.5,
                  accepted_per_position=[2, 0, 0])
    second = Stats(new_tokens=5, drafted=6, accepted=5, drafting_steps=2,
                   accepted_per_position=[2, 2, 1, 0])
    total = Stats.summed([first, second])
    assert (total.new_tokens, total.drafted, total.accepted, total.drafting_steps) == (8, 10, 7, 4)
    assert total.accepted_per_position == [4, 2, 1, 0] and total.wall_s == 0.5
    assert total.mean_acceptance_length == pytest.approx(1 + 7 / 4)
    assert Stats.summed([]) == Stats()
