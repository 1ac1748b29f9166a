"""specnb.viz.trace: token traces as text and HTML, lookup spans, Jacobi grids and the plots.

Hand-made traces check exact renderings; tiny random models (conftest) check that the views
agree with what the real loops record. No model files are loaded.
"""

import math

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

import specnb
from specnb import DraftedToken, EmittedToken, GenerationResult, Iteration, Stats
from specnb.viz import jacobi_grid, trace

NAN = float("nan")


class FakeTokenizer:
    """Token t decodes to 't<t>', except 10 -> newline and 11 -> '<&>' (to test escaping)."""

    special = {10: "\n", 11: "<&>"}

    def decode(self, ids, skip_special_tokens=False):
        return "".join(self.special.get(int(t), f"t{int(t)}") for t in ids)


TOKENIZER = FakeTokenizer()


def drafted(token, status):
    return DraftedToken(token, q=0.5, p=0.25, accept_prob=0.5, overlap=0.75, status=status)


@pytest.fixture
def speculative_result():
    steps = [Iteration(drafted=[drafted(5, "accepted"), drafted(6, "rejected"),
                                drafted(7, "unverified")],
                       emitted=[EmittedToken(5, "accepted"), EmittedToken(10, "resampled")]),
             Iteration(drafted=[drafted(8, "accepted"), drafted(9, "accepted")],
                       emitted=[EmittedToken(8, "accepted"), EmittedToken(9, "accepted"),
                                EmittedToken(11, "bonus")])]
    return GenerationResult("speculative", [[5, 10, 8, 9, 11]], Stats(), steps)


@pytest.fixture
def lookup_result():
    """Prompt [1, 2, 3, 4, 1, 2]: the tail [1, 2] occurred at 0, so [3, 4] is copied from 2."""
    steps = [Iteration(drafted=[drafted(3, "accepted"), drafted(4, "rejected")],
                       emitted=[EmittedToken(3, "accepted"), EmittedToken(7, "resampled")],
                       info={"ngram_size": 2, "match_start": 0, "source_start": 2}),
             Iteration(emitted=[EmittedToken(8, "bonus")],
                       info={"ngram_size": 0, "match_start": -1, "source_start": -1})]
    return GenerationResult("prompt_lookup", [[3, 7, 8]], Stats(), steps)


@pytest.fixture
def jacobi_result():
    """Final tokens [4, 9, 5, 1], block 3 (see the grid in the test)."""
    def step(guesses, refreshed, converged, emitted):
        return Iteration(emitted=[EmittedToken(t, "accepted") for t in emitted],
                         info={"guesses": guesses, "refreshed": refreshed,
                               "num_converged": converged})
    steps = [step([0, 0, 0], [4, 7, 7], 1, [4]), step([7, 7, 7], [9, 5, 3], 1, [9]),
             step([5, 3, 3], [5, 1, 2], 2, [5, 1])]
    return GenerationResult("jacobi", [[4, 9, 5, 1]], Stats(), steps)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_trace_text_marks_every_status_and_kind(speculative_result):
    assert trace.trace_text(speculative_result, TOKENIZER) == (
        "speculative: 2 iterations, 5 tokens\n"
        "iter   0 | ✓'t5' ✗'t6' ·'t7' -> 't5' ~'\\n'\n"
        "iter   1 | ✓'t8' ✓'t9' -> 't8' 't9' +'<&>'")
    short = trace.trace_text(speculative_result, TOKENIZER, max_iterations=1)
    assert short.splitlines()[-1] == "... 1 more iterations"
    with pytest.raises(ValueError, match="max_iterations"):
        trace.trace_text(speculative_result, TOKENIZER, max_iterations=0)


def test_trace_html_colours_and_escapes(speculative_result):
    page = trace.trace_html(speculative_result, TOKENIZER)
    colours = trace.COLOURS
    # legend once each, plus: 3 accepted drafts + 3 accepted emitted, 1 rejected, ...
    assert page.count(colours["accepted"]) == 1 + 6
    assert page.count(colours["rejected"]) == 1 + 1
    assert page.count(colours["unverified"]) == 1 + 1
    assert page.count(colours["resampled"]) == 1 + 1
    assert page.count(colours["bonus"]) == 1 + 1
    assert page.count("<tr>") == 3  # header + 2 iterations
    assert "&lt;&amp;&gt;" in page and "<&>" not in page
    assert ">\\n</span>" in page  # a newline token is shown, not swallowed
    assert "q=0.500 p=0.250 min(1,p/q)=0.500" in page


def test_format_summary_is_rounded_and_has_no_timing():
    summary = {"gamma": 2, "temperature": 0.7, "new_tokens": 9, "iterations": 4,
               "target_forwards": 4, "draft_forwards": 8, "draft_yield": 0.123456,
               "alpha_hat": 1 / 3, "tokens_per_iteration": 2.25,
               "expected_tokens_per_iteration": 13 / 9, "wall_s": 1.234}
    lines = trace.format_summary(summary).splitlines()
    assert len(lines) == 10 and not any("wall" in line for line in lines)
    assert lines[7].split() == ["alpha_hat", "0.3333"]
    assert lines[6].split() == ["draft_yield", "0.1235"]  # an older record, read by its old key


def test_plot_speculative_summary_bars_and_law():
    summary = {"gamma": 3, "temperature": 0.0, "alpha_hat": 0.5,
               "emitted_counts": {1: 2, 2: 1, 4: 1},
               "accepted_by_position": [[2, 4], [1, 2], [0, 0]]}
    fig = trace.plot_speculative_summary(summary)
    left, right = fig.axes
    assert [p.get_height() for p in left.patches] == [0.5, 0.25, 0.0, 0.25]
    law = left.lines[0].get_ydata()
    assert np.allclose(law, [0.5, 0.25, 0.125, 0.125]) and math.isclose(sum(law), 1.0)
    heights = [p.get_height() for p in right.patches]
    assert heights[:2] == [0.5, 0.5] and math.isnan(heights[2])  # position 3 never reached
    assert "γ = 3" in left.get_title() and left.get_xlabel() and left.get_ylabel()
    assert right.get_title() == "Per-position acceptance" and right.get_ylabel()
    # each bar carries its n: iterations per size on the left, times reached on the right
    assert [t.get_text() for t in left.texts] == ["n=2", "n=1", "n=0", "n=1"]
    assert [t.get_text() for t in right.texts][:2] == ["n=4", "n=2"]  # unreached: no bar


def test_plot_gamma_curves_follow_the_theorem():
    fig = trace.plot_gamma_curves([0.6, 0.9], 0.1, measured_alpha=0.3, max_gamma=8)
    ax = fig.axes[0]
    curves = [line for line in ax.lines if len(line.get_xdata()) == 9]
    assert [line.get_label() for line in curves] == ["α = 0.60", "α = 0.90",
                                                     "measured α̂ = 0.300"]
    for line, alpha in zip(curves, (0.6, 0.9, 0.3)):
        assert np.allclose(line.get_ydata(), [specnb.predicted_speedup(alpha, g, 0.1)
                                              for g in range(9)])
    stars = [line for line in ax.lines if line.get_marker() == "*"]
    assert [int(s.get_xdata()[0]) for s in stars] == [specnb.optimal_gamma(a, 0.1, 8)
                                                      for a in (0.6, 0.9, 0.3)]
    assert "c = 0.100" in ax.get_title() and "γ" in ax.get_xlabel() and "×" in ax.get_ylabel()
    with pytest.raises(ValueError, match="alphas"):
        trace.plot_gamma_curves([], 0.1)


def test_lookup_spans_and_text(lookup_result):
    prompt = torch.tensor([[1, 2, 3, 4, 1, 2]])
    first, second = trace.lookup_spans(lookup_result, prompt)
    assert first == {"sequence": [1, 2, 3, 4, 1, 2], "tail": (4, 6), "ngram": (0, 2),
                     "source": (2, 4), "statuses": ["accepted", "rejected"]}
    assert second["sequence"] == [1, 2, 3, 4, 1, 2, 3, 7] and second["source"] is None
    assert trace.lookup_text(lookup_result, TOKENIZER, prompt, [0, 1]).splitlines() == [
        "iter   0 | tail 't1t2' (n=2) found at 0 -> copy 't3t4' ✓✗",
        "iter   1 | no draft (no earlier match, or no room left)"]
    page = trace.lookup_html(lookup_result, TOKENIZER, prompt, [0, 1], context=10)
    assert page.count(trace.COLOURS["ngram"]) == 2 + 2  # the earlier n-gram and the tail
    assert page.count(trace.COLOURS["accepted"]) == 1 and page.count(trace.COLOURS["rejected"]) == 1
    assert "iteration 1</b>: no draft" in page
    assert ">↵\n</span>" in trace._span("\n", "#fff", line_breaks=True)  # text keeps its lines


def test_lookup_views_refuse_other_methods(speculative_result):
    with pytest.raises(ValueError, match="prompt_lookup"):
        trace.lookup_spans(speculative_result, torch.tensor([[1, 2]]))


def test_lookup_spans_match_a_real_run(target):
    prompt = torch.tensor([[7, 8, 9, 10, 11, 12, 7, 8, 9, 10, 11, 12, 7, 8]])
    result = specnb.prompt_lookup(target, prompt, num_pred=4, max_new_tokens=12, trace=True)
    items = trace.lookup_spans(result, prompt)
    assert any(item["source"] for item in items)
    for item, it in zip(items, result.trace):
        if item["source"]:
            sequence = item["sequence"]
            assert sequence[slice(*item["ngram"])] == sequence[slice(*item["tail"])]
            assert sequence[slice(*item["source"])] == [d.token for d in it.drafted]


def test_jacobi_grid_by_hand(jacobi_result):
    expected = np.array([[2, 0, 0, NAN], [NAN, 2, 1, 0], [NAN, NAN, 2, 2]])
    assert np.array_equal(jacobi_grid.jacobi_grid(jacobi_result), expected, equal_nan=True)
    fig = jacobi_grid.plot_jacobi_convergence(jacobi_result)
    grid_ax, bars_ax = fig.axes
    assert np.array_equal(grid_ax.images[0].get_array().filled(np.nan), expected,
                          equal_nan=True)
    assert "block of 3" in grid_ax.get_title()
    assert grid_ax.get_xlabel() and grid_ax.get_ylabel() and bars_ax.get_xlabel() == "tokens"
    assert [p.get_width() for p in bars_ax.patches] == [1, 1, 2]


@pytest.mark.parametrize("block", [1, 3, 5])
def test_jacobi_grid_of_a_real_run(target, prompts, block):
    result = specnb.jacobi(target, prompts[2], block=block, max_new_tokens=11, trace=True)
    grid = jacobi_grid.jacobi_grid(result)
    assert grid.shape == (len(result.trace), 11)
    assert [int((row == 2).sum()) for row in grid] == [len(it.emitted) for it in result.trace]
    assert (np.nan_to_num(grid, nan=0) == 2).sum(axis=0).tolist() == [1] * 11  # each once


def test_jacobi_grid_refuses_other_methods(speculative_result):
    with pytest.raises(ValueError, match="jacobi"):
        jacobi_grid.jacobi_grid(speculative_result)


def test_plot_grouped_bars():
    fig = trace.plot_grouped_bars(["a", "b", "c"], {"x": [1, 2, 3], "y": [3, 2, 1]},
                                  title="T", xlabel="X (units)", ylabel="Y (units)", reference=1)
    ax = fig.axes[0]
    assert [p.get_height() for p in ax.patches] == [1, 2, 3, 3, 2, 1]
    assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == ("T", "X (units)", "Y (units)")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert len(ax.lines) == 1  # the reference line
    with pytest.raises(ValueError, match="series"):
        trace.plot_grouped_bars(["a"], {"x": [1, 2]}, title="T", xlabel="X", ylabel="Y")
