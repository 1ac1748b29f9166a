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


def test_calibrate_settles_every_choice_on_a_quiet_machine(monkeypatch, capsys):
    """`--calibrate` loads the pair (the target's path, the head's shape) and the distilled
    draft (its own path) with the quiet-machine rule on, and says what it settled."""
    from types import SimpleNamespace

    import specnb.__main__ as front
    from specnb.models import fast_path

    seen = []  # (what was loaded or measured, with the quiet-machine rule on?)

    def recommended():
        seen.append(("shape", fast_path.on_quiet_machine()))
        return SimpleNamespace(shape_text=lambda gamma: f"a chain of {gamma}"), 2

    def load_pair(name=None):
        seen.append((name, fast_path.on_quiet_machine()))
        target = SimpleNamespace(specnb_cpu_path="prepacked", device="cpu", dtype="float32")
        return target, SimpleNamespace(recommended=recommended), None

    def load_embedded_draft(device, dtype, cpu_path="dense"):  # beside the loaded target
        seen.append((("draft", device, dtype, cpu_path), fast_path.on_quiet_machine()))
        return SimpleNamespace(specnb_cpu_path="dense")

    monkeypatch.setattr(front, "load_pair", load_pair)
    monkeypatch.setattr(front, "load_embedded_draft", load_embedded_draft)
    monkeypatch.setattr(front, "default_device", lambda: __import__("torch").device("cpu"))
    front.calibrate()
    # cpu_path None: $SPECNB_CPU_PATH or "auto", as load_pair gives a draft model.
    assert seen == [(None, True), ("shape", True), (("draft", "cpu", "float32", None), True)]
    assert not fast_path.on_quiet_machine()
    assert "prepacked linears, the head drafts a chain of 2, the distilled draft runs dense" in \
        capsys.readouterr().out
