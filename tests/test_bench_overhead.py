"""`python -m specnb.bench.overhead`: the clocks wrap the loop from outside and go away again,
sections add up to the overhead, and host reads are counted where they happen. (Its bad
command lines are rows of tests/test_bad_commands.py.)"""

import pytest
import torch

from specnb.bench import overhead
from specnb.core.batch_kv import BatchedCachedLM
from specnb.drafters import ModelDrafter
from specnb.methods.run import Run
from tiny_models import tiny_llama


@pytest.fixture(scope="module")
def pair():
    return tiny_llama(1), ModelDrafter(tiny_llama(2, hidden=16, layers=1))


@pytest.mark.parametrize("gamma", [0, 2])
def test_sections_add_up_and_the_loop_is_left_as_it_was(pair, gamma):
    target, drafter = pair
    before = (Run.read_step, Run.draft_budget, BatchedCachedLM.forward, torch.Tensor.tolist)
    prompts = [[3, 4, 5, 6], [7, 8, 9]]
    run = overhead.profile(target, drafter, prompts, gamma=gamma, max_new_tokens=8)
    assert (Run.read_step, Run.draft_budget, BatchedCachedLM.forward, torch.Tensor.tolist) == \
        before
    assert run["iterations"] >= 2 * 8 / (gamma + 1) - 2
    assert sum(run["sections_ms"].values()) == pytest.approx(run["overhead_ms"])
    assert run["target_forward_ms"] > 0 and (run["draft_ms"] > 0) == (gamma > 0)
    assert {"verify", "read", "state", "emit", "budget"} <= set(run["sections_ms"])
    assert run["syncs_per_iteration"] == {}  # timed runs do not count


def test_host_reads_are_counted_by_site_and_to_host_once(pair):
    target, drafter = pair
    run = overhead.profile(target, drafter, [[3, 4, 5, 6]], gamma=2, max_new_tokens=8,
                           count_syncs=True)
    syncs = run["syncs_per_iteration"]
    # Run.read_step reads its tensors in one `to_host`: one wait per iteration, not five; the
    # caches then know their lengths from it (no read to decide on compacting).
    assert syncs["specnb/core/host.py to_host (one wait for all its tensors)"] == 1.0
    assert not any(site.startswith("specnb/core/host.py:") for site in syncs)
    assert not any(" _tidy " in site or " compact " in site for site in syncs), syncs


def test_profiling_keeps_the_loop_s_greedy_verification(pair, monkeypatch):
    """The clocks wrap the rule `generate` chose (the greedy one at T = 0), not the module's
    `verify`, which `generate` would then no longer recognise: no race may run."""
    import importlib

    verify_module = importlib.import_module("specnb.core.verify")  # the module, not the function

    def no_race(*args, **kwargs):
        raise AssertionError("greedy verification drew the exponential race")
    monkeypatch.setattr(verify_module, "sample", no_race)
    target, drafter = pair
    run = overhead.profile(target, drafter, [[3, 4, 5, 6]], gamma=2, max_new_tokens=8)
    assert run["sections_ms"]["verify"] > 0


class FakeTokenizer:
    """What `main` asks of a tokenizer: `chat_ids` is patched, so nothing."""


def run_main(monkeypatch, target, drafter, argv):
    """`overhead.main` on a tiny pair: the eval prompts' ids replaced by short token lists."""
    monkeypatch.setattr(overhead, "load_pair", lambda name: (target, drafter, FakeTokenizer()))
    monkeypatch.setattr(overhead, "chat_ids", lambda tokenizer, prompt: [3, 4, 5, 6])
    return overhead.main(argv)


def test_default_profiles_the_shape_speculative_drafts_without_gamma(monkeypatch, tmp_path):
    from head_fixtures import random_head
    from specnb.drafters import TreeCost
    from specnb.drafters.feature import Advice

    target = tiny_llama(1, hidden=32, layers=3)
    head = random_head(target, std=0.05)
    head.advisor = lambda temperature: Advice((2, 1), trim=TreeCost((1.0, 1.02, 1.05, 1.1), 0.0))
    out = tmp_path / "overhead.json"
    record = run_main(monkeypatch, target, head, [
        "--default", "--gammas", "1", "--prompts", "1", "--max-new-tokens", "6",
        "--repeats", "1", "--out", str(out)])
    methods = [run["method"] for run in record["runs"]]
    assert methods == ["autoregressive", "γ=1", "default: tree (2, 1), trimmed"]
    default = record["runs"][-1]
    assert default["gamma"] == 2 and default["draft_ms"] > 0
    assert sum(default["sections_ms"].values()) == pytest.approx(default["overhead_ms"])
    assert "default: tree (2, 1), trimmed: target" in overhead.format_report(record)
    assert out.exists()


def test_default_needs_a_drafter_with_a_recommended_shape(monkeypatch, capsys, pair):
    target, drafter = pair  # a ModelDrafter: no advisor, no recommended shape
    with pytest.raises(SystemExit) as exited:
        run_main(monkeypatch, target, drafter, ["--default", "--repeats", "1"])
    assert exited.value.code == 2 and "--default" in capsys.readouterr().err
