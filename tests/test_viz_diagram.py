"""specnb.viz.diagram: the draft → check → emit picture of one iteration, from plain arguments."""

import matplotlib.pyplot as plt
import pytest

from specnb import DraftedToken, EmittedToken, Iteration
from specnb.viz import diagram


def texts(fig):
    return [t.get_text() for t in fig.axes[0].texts]


def test_a_rejection_emits_the_kept_prefix_and_the_targets_token():
    fig = diagram.draft_check_figure(["The", " answer", " to"],
                                     ["accepted", "rejected", "unverified"], " sky", "resampled")
    shown = texts(fig)
    assert shown.count("'The'") == 2  # drafted, then emitted
    assert shown.count("' answer'") == 1 and "' sky'" in shown  # rejected: not emitted
    assert {"✓ kept", "✗ rejected", "· not checked"} <= set(shown)
    assert "1 of 3 guesses kept, 2 token(s) emitted" in fig.axes[0].get_title()
    plt.close(fig)


def test_all_kept_adds_a_bonus_token():
    fig = diagram.draft_check_figure(["a", "b"], ["accepted", "accepted"], "c", "bonus")
    assert texts(fig).count("'c'") == 1 and "3 token(s) emitted" in fig.axes[0].get_title()
    plt.close(fig)


@pytest.mark.parametrize("tokens, statuses, kind, fragment", [
    ([], [], "bonus", "non-empty"),
    (["a"], ["accepted", "accepted"], "bonus", "one length"),
    (["a", "b"], ["kept", "accepted"], "bonus", "one of"),
    (["a", "b"], ["rejected", "accepted"], "resampled", "at most one rejection"),
    (["a", "b"], ["accepted", "unverified"], "resampled", "at most one rejection"),
    (["a", "b"], ["accepted", "rejected"], "bonus", "'resampled'"),
    (["a", "b"], ["accepted", "accepted"], "resampled", "'bonus'"),
])
def test_bad_arguments(tokens, statuses, kind, fragment):
    with pytest.raises(ValueError, match=fragment):
        diagram.draft_check_figure(tokens, statuses, "x", kind)


def test_iteration_parts_reads_a_trace_iteration():
    iteration = Iteration(
        drafted=[DraftedToken(5, 0.5, 0.6, 1.0, 0.8, "accepted"),
                 DraftedToken(6, 0.5, 0.1, 0.2, 0.4, "rejected")],
        emitted=[EmittedToken(5, "accepted"), EmittedToken(7, "resampled")])
    parts = diagram.iteration_parts(iteration, lambda t: f"t{t}")
    assert parts == {"draft_tokens": ["t5", "t6"], "statuses": ["accepted", "rejected"],
                     "target_token": "t7", "target_kind": "resampled"}
    plt.close(diagram.draft_check_figure(**parts))
    with pytest.raises(ValueError, match="drafted nothing"):
        diagram.iteration_parts(Iteration(emitted=[EmittedToken(7, "target")]), str)


def test_the_readme_picture_is_drawn_by_its_script(tmp_path):
    """book/_static/one-iteration.png, the README's picture, comes from scripts/readme_figure.py."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("readme_figure", root / "scripts" / "readme_figure.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = script.main(tmp_path / "one-iteration.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert script.OUT.is_file() and 'src="book/_static/one-iteration.png"' in (
        root / "README.md").read_text()
