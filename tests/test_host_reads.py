"""The loop reads the device once per iteration, and the trace is an observer one asks for.

On a GPU each host read of a tensor (`.tolist()`, `.item()`, `bool()`, a boolean mask) waits for
the device. `specnb.core.host.HostReads(as_accelerator=True)` counts them on the CPU, with the
CPU-only reads (input checks, early exits) switched off as they are on a GPU: the default
drafter's loop, chain or tree, greedy or sampled, makes exactly one per iteration, `to_host`'s.
A loop that reads the cache's lengths again (what rollback did before it was handed the counts)
is caught. On a GPU, scripts/gpu_check.py counts the same with `torch.cuda.set_sync_debug_mode`.
"""

import importlib

import pytest
import torch

import specnb
from specnb.core.batch_kv import BatchedCachedLM
from specnb.core.host import HostReads, reads_are_cheap, to_host
from specnb.drafters import FeatureDrafter
from specnb.methods.results import NoTrace
from specnb.models.pairs import load_embedded_head

# The loop's module (`specnb.methods.speculative` the attribute is the function of that name).
loop = importlib.import_module("specnb.methods.speculative")


def test_to_host_reads_every_tensor_as_tolist_would():
    tensors = dict(ints=torch.tensor([[3, -1], [0, 49151]]), flags=torch.tensor([True, False]),
                   halves=torch.tensor([0.5, 0.25], dtype=torch.float16),
                   scalar=torch.tensor(7), empty=torch.zeros(2, 0, dtype=torch.long),
                   probs=torch.tensor([[0.1, 0.7]]))
    got = to_host(**tensors)
    assert got == {name: t.tolist() for name, t in tensors.items()}
    assert [type(v) for v in got["ints"][0]] == [int, int] and got["flags"] == [True, False]
    assert to_host() == {}


def test_the_counter_sees_each_kind_of_read_and_where_it_happened():
    x = torch.arange(4)
    with HostReads() as reads:
        x.tolist(), x[0].item(), bool(x.any()), int(x[1]), x[x > 1]
        x + 1  # device work, no read
        to_host(a=x, b=x > 1)  # two tensors, one read
    assert reads.total == 6, reads.reads
    assert all(key.startswith("specnb/core/host.py") for key in reads.reads
               if "to_host" in key)
    with HostReads(as_accelerator=True):
        assert not reads_are_cheap("cpu")
    assert reads_are_cheap("cpu") and torch.Tensor.tolist is not None
    x.tolist()  # restored: no counter left behind
    assert reads.total == 6


@pytest.fixture(scope="module")
def head_pair(embedded):
    target, tokenizer = embedded
    ids = specnb.chat_ids(tokenizer, "Explain in three sentences why the sky is blue.")
    return target, load_embedded_head(target), ids


def loop_reads(monkeypatch, target, drafter, ids, **kwargs):
    """(reads inside the loop, its iterations) of one `speculative` call, as on a GPU."""
    seen = {}
    speculate = loop.speculate

    def counted(run):
        with HostReads(as_accelerator=True) as reads:
            speculate(run)
        seen["reads"], seen["iterations"] = reads, run.step

    monkeypatch.setattr(loop, "speculate", counted)
    specnb.speculative(target, drafter, ids, max_new_tokens=28, **kwargs)  # > 5 iterations each
    monkeypatch.setattr(loop, "speculate", speculate)
    return seen["reads"], seen["iterations"]


@pytest.mark.embedded
@pytest.mark.parametrize("shape, temperature", [
    (None, 0.0), (None, 0.7), ((3, 2), 0.0), ((4, 2, 1), 0.7)])
def test_the_default_drafter_reads_the_device_once_per_iteration(head_pair, monkeypatch, shape,
                                                                 temperature):
    target, head, ids = head_pair
    drafter = FeatureDrafter(head.head, tree=shape)  # trimming reads: the CPU only, never here
    reads, iterations = loop_reads(
        monkeypatch, target, drafter, ids, gamma=3 if shape is None else len(shape),
        temperature=temperature, generator=torch.Generator().manual_seed(0))
    assert iterations > 5
    assert reads.total == iterations, dict(reads.reads)
    assert set(reads.reads) == {next(iter(reads.reads))}  # all of them the step's `to_host`
    assert "to_host" in next(iter(reads.reads))


@pytest.mark.embedded
@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_the_distilled_draft_reads_the_device_once_per_iteration(head_pair, embedded_draft,
                                                                 monkeypatch, temperature):
    target, _, ids = head_pair
    reads, iterations = loop_reads(monkeypatch, target, embedded_draft, ids, gamma=4,
                                   temperature=temperature,
                                   generator=torch.Generator().manual_seed(0))
    assert iterations > 5 and reads.total == iterations, dict(reads.reads)


@pytest.mark.embedded
def test_a_loop_that_reads_the_lengths_again_is_caught(head_pair, monkeypatch):
    """Rollback without the counts the loop read falls back to reading the cache's lengths:
    the count must show the second read per iteration."""
    target, head, ids = head_pair
    rollback = BatchedCachedLM.rollback

    def forgetful(self, num_tokens, *, crop=False, counts=None):
        rollback(self, num_tokens, crop=crop)

    monkeypatch.setattr(BatchedCachedLM, "rollback", forgetful)
    reads, iterations = loop_reads(monkeypatch, target, FeatureDrafter(head.head), ids, gamma=3)
    assert reads.total >= 2 * iterations, dict(reads.reads)


@pytest.mark.embedded
@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_the_trace_is_asked_for_and_changes_nothing_else(head_pair, temperature):
    target, head, ids = head_pair
    runs = [specnb.speculative(target, FeatureDrafter(head.head), ids, gamma=3,
                               max_new_tokens=24, temperature=temperature, trace=trace,
                               generator=torch.Generator().manual_seed(1))
            for trace in (False, True)]
    plain, traced = runs
    assert plain.tokens == traced.tokens
    assert (plain.stats.drafted, plain.stats.accepted, plain.stats.iterations) == \
        (traced.stats.drafted, traced.stats.accepted, traced.stats.iterations)
    assert len(traced.trace) == traced.stats.iterations
    assert sum(len(it.emitted) for it in traced.trace) == len(traced.tokens[0])
    with pytest.raises(NoTrace, match="trace=True"):
        plain.trace
    assert not hasattr(plain, "trace")  # an AttributeError: absent to getattr and hasattr
    assert plain.row(0).iterations is None
    with pytest.raises(ValueError, match="trace must be True"):
        specnb.speculative(target, head, ids, gamma=3, max_new_tokens=4, trace="yes")


@pytest.mark.embedded
def test_a_step_costs_the_same_read_from_counters_or_trace(head_pair):
    """The mean decoding step the assignments and the checking cost use: from the counters
    of a plain run, equal to the trace's own figure for a traced one."""
    from specnb.theory import decoding_step_seconds, mean_step_seconds

    target, head, ids = head_pair
    traced = specnb.speculative(target, head, ids, gamma=3, max_new_tokens=16, trace=True)
    steps = decoding_step_seconds(traced)
    assert mean_step_seconds(traced) == pytest.approx(sum(steps) / len(steps))
    jac = specnb.jacobi(target, ids, block=4, max_new_tokens=12, trace=True)
    steps = decoding_step_seconds(jac)
    assert mean_step_seconds(jac) == pytest.approx(sum(steps) / len(steps))


@pytest.mark.embedded
def test_the_engine_metrics_follow_vllms_formulas(head_pair):
    """vLLM's "SpecDecoding metrics" (vllm/v1/spec_decode/metrics.py): a draft is a row's step
    that drafted anything; mean acceptance length 1 + accepted / drafts; per position i, the
    share of drafts that accepted more than i tokens; accepted / drafted tokens. Recomputed here
    from the trace, one row-step at a time, as vLLM's `observe_draft` counts them."""
    target, head, ids = head_pair
    for drafter, gamma in ((FeatureDrafter(head.head), 3), (FeatureDrafter(head.head,
                                                                          tree=(3, 2)), 2)):
        result = specnb.speculative(target, drafter, ids, gamma=gamma, max_new_tokens=32,
                                    trace=True)
        steps = [it for it in result.trace if it.drafted]
        accepted = [sum(d.status == "accepted" for d in it.drafted) for it in steps]
        metrics = result.stats.engine_metrics()
        assert metrics["drafts"] == len(steps) > 3
        assert metrics["mean_acceptance_length"] == pytest.approx(1 + sum(accepted) / len(steps))
        assert metrics["per_position_acceptance"] == pytest.approx(
            [sum(a > i for a in accepted) / len(steps) for i in range(gamma)])
        assert metrics["draft_acceptance_rate"] == pytest.approx(
            sum(accepted) / sum(len(it.drafted) for it in steps))
    plain = specnb.autoregressive(target, ids, max_new_tokens=4).stats
    assert plain.engine_metrics()["per_position_acceptance"] == [] and \
        plain.mean_acceptance_length != plain.mean_acceptance_length  # NaN: nothing drafted
