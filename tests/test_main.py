"""`python -m specnb` (what `make run` runs), on a tiny budget: every output equals AR greedy."""

import pytest

from specnb.__main__ import main

pytestmark = pytest.mark.embedded


def test_make_run_prints_every_method_alone_and_batched(capsys):
    main(["--prompts", "2", "--max-new-tokens", "6", "--gamma", "2", "--num-pred", "3",
          "--block", "3", "--repeats", "2"])
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if "greedy" not in line and " yes" in line]
    assert len(table) == 2 * 5 and " NO" not in out  # 2 prompts × 5 methods, all equal to AR
    clock = out.split("2 interleaved rounds per prompt")[1].split("the same 2 prompts")[0]
    lines = [line for line in clock.splitlines() if "feature head γ=2: " in line]
    assert len(lines) == 3 and lines[-1].strip().startswith("all prompts")  # 2 prompts + total
    assert "DIFFERS" not in clock and all("×" in line and "–" in line for line in lines)
    batched = [line for line in out.splitlines() if "tok/s batched" in line]
    assert len(batched) == 4 and all(line.endswith("rows = AR greedy: 2/2") for line in batched)


def test_make_run_drafts_the_shape_measured_fastest_here(capsys):
    """Without --gamma the head drafts what `speculative(..., gamma=None)` would: the shape
    `specnb.models.tree_shape` measures for this machine (or read from its cache)."""
    main(["--prompts", "1", "--max-new-tokens", "6", "--num-pred", "3", "--block", "3",
          "--repeats", "0"])
    out = capsys.readouterr().out
    assert "(measured fastest here)" in out and " NO" not in out
    assert any(line.startswith("greedy") and "head " in line for line in out.splitlines())
    assert "interleaved rounds" not in out  # --repeats 0: no timed rounds
