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


class _Loaded:
    """Stand-ins for what `load_pair` returns, settled after `unsettled` calls."""

    def __init__(self, unsettled):
        self.calls, self.unsettled = 0, unsettled

    def load_pair(self, name=None):
        from types import SimpleNamespace

        self.calls += 1
        settled = self.calls > 2 * self.unsettled  # two loads per attempt
        model = SimpleNamespace(specnb_cpu_path="dense", specnb_cpu_path_settled=settled)
        drafter = SimpleNamespace(shape_text=lambda gamma: f"a chain of {gamma}")
        head = SimpleNamespace(recommended=lambda: (drafter, 2),
                               advisor=SimpleNamespace(record=lambda: {"settled": settled}))
        return (model, head, None) if name is None else (None, model, None)


@pytest.mark.parametrize("unsettled, attempts, said", [
    (0, 3, "calibrated for"), (2, 3, "calibrated for"), (3, 3, "did not settle: each load")])
def test_prepare_calibrates_until_this_machine_settles(monkeypatch, capsys, unsettled, attempts,
                                                       said):
    """A calibration on a busy machine is not cached; `--prepare` retries while nothing else
    runs, so the test workers start from settled choices instead of calibrating at every load."""
    import specnb.__main__ as front

    loaded = _Loaded(unsettled)
    monkeypatch.setattr(front, "load_pair", loaded.load_pair)
    monkeypatch.setattr(front, "embedded_checkpoint", lambda: "/cache/model")
    monkeypatch.setattr(front, "default_device", lambda: __import__("torch").device("cpu"))
    front.prepare(attempts)
    out = capsys.readouterr().out
    assert said in out and out.count("did not settle (a busy machine?)") == min(unsettled, attempts)
    assert loaded.calls == 2 * min(unsettled + 1, attempts)
