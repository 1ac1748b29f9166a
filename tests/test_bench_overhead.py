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
    before = (Run.record, Run.draft_budget, BatchedCachedLM.forward, torch.Tensor.tolist)
    prompts = [[3, 4, 5, 6], [7, 8, 9]]
    run = overhead.profile(target, drafter, prompts, gamma=gamma, max_new_tokens=8)
    assert (Run.record, Run.draft_budget, BatchedCachedLM.forward, torch.Tensor.tolist) == before
    assert run["iterations"] >= 2 * 8 / (gamma + 1) - 2
    assert sum(run["sections_ms"].values()) == pytest.approx(run["overhead_ms"])
    assert run["target_forward_ms"] > 0 and (run["draft_ms"] > 0) == (gamma > 0)
    assert {"verify", "record", "emit", "budget"} <= set(run["sections_ms"])
    assert run["syncs_per_iteration"] == {}  # timed runs do not count


def test_host_reads_are_counted_by_site_and_to_host_once(pair):
    target, drafter = pair
    run = overhead.profile(target, drafter, [[3, 4, 5, 6]], gamma=2, max_new_tokens=8,
                           count_syncs=True)
    syncs = run["syncs_per_iteration"]
    # Run.record reads ten tensors in one `to_host`: one wait per iteration, not ten.
    assert syncs["specnb/core/host.py to_host (one wait for all its tensors)"] == 1.0
    assert not any(site.startswith("specnb/core/host.py:") for site in syncs)
    # The cache's own read (whether to compact after a rollback) is counted where it happens.
    assert any(site.startswith("specnb/core/batch_kv.py:") and site.endswith(" _tidy .__int__")
               for site in syncs), syncs


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
