"""RESULTS.md is generated from data/results/ and cannot go stale: regenerating it must give the
committed file, a changed record must change the page, and a file no command wrote is refused."""

import json
import shutil
from pathlib import Path

import pytest

from specnb.bench import results

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "data" / "results"


def test_the_committed_page_is_what_the_records_give(capsys):
    assert results.main(["--check"]) == 0, capsys.readouterr().err


def test_every_record_is_on_the_page_with_its_command_and_date():
    page = (ROOT / "RESULTS.md").read_text()
    for path in sorted(RECORDS.glob("*.json")):
        record = json.loads(path.read_text())
        assert f"### {path.stem}\n" in page, path.name
        section = page.split(f"### {path.stem}\n", 1)[1].split("\n### ", 1)[0]
        assert f"`{record['command']}`" in section, path.name
        assert str(record["date"])[:10] in section, path.name


@pytest.fixture
def copied(tmp_path):
    folder = tmp_path / "results"
    shutil.copytree(RECORDS, folder, ignore=shutil.ignore_patterns("*.png", "*.tar.gz"))
    return folder


def test_a_changed_record_makes_the_check_fail(copied, tmp_path):
    out = tmp_path / "RESULTS.md"
    assert results.main(["--results", str(copied), "--out", str(out)]) == 0
    assert results.main(["--results", str(copied), "--out", str(out), "--check"]) == 0
    path = copied / "bench-cpu.json"
    record = json.loads(path.read_text())
    slow = next(r for r in record["rows"] if r["method"] != "ours autoregressive")
    slow["seconds"] *= 2  # the method took twice as long: its speedup halves
    path.write_text(json.dumps(record))
    assert results.main(["--results", str(copied), "--out", str(out), "--check"]) == 1


def test_a_file_no_command_wrote_is_refused(copied):
    (copied / "notes.json").write_text(json.dumps({"speedup": 9.9}))
    with pytest.raises(ValueError, match="notes.json: not a record of a known command"):
        results.page(copied)


def test_speedups_come_from_tokens_per_second_with_the_prompts_range():
    """Two prompts: the method is 2× and 1.5× as fast as ours autoregressive there."""
    rows = [{"method": method, "prompt_id": prompt, "group": "open-ended", "new_tokens": 8,
             "seconds": seconds, "spread": 0.0, "target_forwards": 8 if ar else 4, "drafted": 0,
             "accepted": 0, "alpha_hat": float("nan"), "c_hat": float("nan"),
             "gamma": 0 if ar else 1, "identical": True}
            for method, ar in (("ours autoregressive", True), ("ours feature head γ=1", False))
            for prompt, seconds in (("a", 2.0 if ar else 1.0), ("b", 3.0 if ar else 2.0))]
    rows.append({**rows[0], "method": "HF generate"})
    rows.append({**rows[1], "method": "HF generate"})
    record = {"settings": {"max_new_tokens": 8, "temperature": 0.0, "repeats": 1}, "rows": rows}
    table = "\n".join(results.bench_section(record))
    assert "| ours feature head γ=1 | 1.67 | 1.50–2.00 |" in table  # 16 tokens in 3 s vs 5 s


def test_recorded_speedups_read_each_matching_method_from_every_bench_record(copied):
    found = results.recorded_speedups(["jacobi"], copied)
    assert found and all(row["method"].startswith("jacobi") for row in found)
    record = json.loads((copied / "bench-cpu.json").read_text())
    (row,) = [r for r in found if r["record"] == "bench-cpu"]
    (summary,) = [r for r in results.summary_rows(record) if r["method"] == "ours jacobi block=8"]
    assert row["speedup"] == summary["speedup_vs_ours_ar"]
    assert row["low"] <= row["speedup"] <= row["high"]
    assert row["machine"] == results.machine_of(record)
    (copied / "bench-cpu.json").unlink()  # the page's rows come from the files there, not a copy
    assert "bench-cpu" not in {r["record"] for r in results.recorded_speedups(["jacobi"], copied)}
    assert results.recorded_speedups(["no such method"], copied) == []
    with pytest.raises(TypeError, match="a list of name fragments"):
        results.recorded_speedups("jacobi", copied)


def test_a_recorded_race_is_set_against_the_theory_with_the_records_own_curve():
    """Two prompts of a γ = 2 drafter: α̂ 0.5, ĉ 0.1, a curve on which 3 tokens cost 1.25
    one-token forwards; measured 16 tokens in 3 s against ours autoregressive's 5 s."""
    from specnb.theory import predicted_speedup, predicted_with_block_cost
    from specnb.viz.timing import format_clock, plot_clock_against_theory

    rows = [{"method": method, "prompt_id": prompt, "group": "open-ended", "new_tokens": 8,
             "seconds": seconds, "target_forwards": 8 if ar else 4, "drafted": 0 if ar else 8,
             "accepted": 0 if ar else 4, "alpha_hat": float("nan") if ar else 0.5,
             "c_hat": float("nan") if ar else 0.1, "gamma": 0 if ar else 2, "identical": True}
            for method, ar in (("ours autoregressive", True), ("ours feature head γ=2", False))
            for prompt, seconds in (("a", 2.0 if ar else 1.0), ("b", 3.0 if ar else 2.0))]
    rows += [{**row, "method": "HF generate"} for row in rows[:2]]  # every record has the peer
    record = {"settings": {"max_new_tokens": 8, "repeats": 5}, "rows": rows,
              "device": "CPU test", "forward_latency": {"token_counts": [1, 2, 4],
                                                        "median_ms": [10.0, 11.0, 15.0]}}
    clock = results.record_against_theory(record, ["ours feature head γ=2"])
    (row,) = clock["rows"]
    assert (row["name"], row["gamma"], clock["prompts"], clock["repeats"]) == \
        ("feature head γ=2", 2, 2, 5)
    assert (row["speedup"], row["speedup_min"], row["speedup_max"]) == \
        pytest.approx((5 / 3, 1.5, 2.0))
    assert row["checking_cost"] == pytest.approx(1.3)  # t(3) between 11 and 15 ms: 13 / 10
    assert row["predicted"] == pytest.approx(predicted_speedup(0.5, 2, 0.1))
    assert row["predicted_with_checking"] == pytest.approx(1.75 / 1.5)  # (1 + .5 + .25) / (.2 + 1.3)
    text = format_clock(clock)
    assert "checking (curve)" in text and "1.67× (1.50–2.00)" in text and "2 prompts" in text
    assert plot_clock_against_theory(clock).axes  # drawn like a live race
    with pytest.raises(ValueError, match="no 'ours jacobi block=8' rows"):
        results.record_against_theory(record, ["ours jacobi block=8"])
    with pytest.raises(ValueError, match="no forward_latency"):
        results.record_against_theory({**record, "forward_latency": None}, ["ours feature head γ=2"])
    with pytest.raises(TypeError, match="a list of method names"):
        results.record_against_theory(record, "ours feature head γ=2")
