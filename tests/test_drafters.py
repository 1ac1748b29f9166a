"""The drafter contract: drafters defined here plug into the one loop; limits are the same for
a single prompt and a batch; every row of a batch records its drafts."""

import pytest
import torch

import specnb
from specnb.drafters import Drafter, NgramDrafter, Proposal
from tiny_models import VOCAB, tiny_llama

MAX_NEW = 24


class ConstantDrafter(Drafter):
    """Always proposes the same token: greedy output must not change."""

    def __init__(self, token):
        self.token = token

    def start(self, target, prompts, pending, *, eos_ids, features=None):
        self.device = pending.device

    def propose(self, max_drafts, *, width, temperature, generator):
        rows = max_drafts.shape[0]
        return Proposal(torch.full((rows, width), self.token, device=self.device), max_drafts)

    def update(self, step):
        pass

    def select_rows(self, keep):
        pass


class OracleDrafter(ConstantDrafter):
    """Proposes the target's own greedy continuation (known in advance): all drafts pass."""

    def __init__(self, continuations):
        self.continuations = continuations

    def start(self, target, prompts, pending, *, eos_ids, features=None):
        self.device = pending.device
        self.rows = list(range(len(prompts)))
        self.done = [0] * len(prompts)  # tokens of each row emitted so far

    def propose(self, max_drafts, *, width, temperature, generator):
        drafts = [self.continuations[r][self.done[r]:self.done[r] + width] for r in self.rows]
        drafts = [d + [0] * (width - len(d)) for d in drafts]
        ids = torch.tensor(drafts, dtype=torch.long, device=self.device).view(len(drafts), width)
        return Proposal(ids, max_drafts)

    def update(self, step):
        for i, emitted in enumerate(step.emitted):
            self.done[self.rows[i]] += len(emitted)

    def select_rows(self, keep):
        self.rows = [self.rows[i] for i in keep.tolist()]


@pytest.fixture(scope="module")
def setup():
    target = tiny_llama(1)
    generator = torch.Generator().manual_seed(3)
    prompts = [torch.randint(1, VOCAB, (length,), generator=generator).tolist()
               for length in (5, 11, 17, 8)]
    alone = [specnb.autoregressive(target, p, max_new_tokens=MAX_NEW).tokens[0] for p in prompts]
    return target, prompts, alone


@pytest.mark.parametrize("gamma", [1, 3, 8])
def test_constant_drafter_keeps_greedy_output(setup, gamma):
    target, prompts, alone = setup
    result = specnb.speculative(target, ConstantDrafter(5), prompts, gamma=gamma,
                                max_new_tokens=MAX_NEW)
    assert result.tokens == alone
    assert 0 < result.stats.drafted and result.stats.accepted < result.stats.drafted


@pytest.mark.parametrize("gamma", [1, 3, 8])
def test_oracle_drafter_has_every_draft_accepted(setup, gamma):
    target, prompts, alone = setup
    result = specnb.speculative(target, OracleDrafter(alone), prompts, gamma=gamma,
                                max_new_tokens=MAX_NEW, trace=True)
    assert result.tokens == alone
    assert result.stats.accepted == result.stats.drafted > 0
    # γ+1 tokens per forward for every row (the last forward may be cut by the budget).
    assert result.stats.target_forwards == -(-MAX_NEW // (gamma + 1))
    assert specnb.estimate_alpha(result) == pytest.approx(1.0)


def test_every_row_of_a_batch_records_its_drafts(setup):
    target, prompts, _ = setup
    draft = tiny_llama(2, hidden=16, layers=1)
    batch = specnb.speculative(target, draft, prompts, gamma=3, max_new_tokens=MAX_NEW, trace=True)
    one = specnb.speculative(target, draft, [prompts[0]], gamma=3, max_new_tokens=MAX_NEW,
                             trace=True)
    for b in range(len(prompts)):
        row = batch.row(b)
        assert sum(len(it.emitted) for it in row.trace) == len(batch.tokens[b])
        assert sum(len(it.drafted) for it in row.trace) > 0
        assert 0 <= specnb.estimate_alpha(row) <= 1
    # A batch of one records what the batch's row 0 recorded, iteration by iteration (the
    # timings aside): the same drafts with the same verdicts, the same emitted tokens.
    def what(trace):
        return [([(d.token, d.status) for d in it.drafted],
                 [(e.token, e.kind) for e in it.emitted]) for it in trace]
    assert what(one.trace) == what(batch.row(0).trace)
    assert sum(len(it.drafted) for it in one.trace) > 0
    assert 0 <= specnb.estimate_alpha(batch) <= 1
    assert specnb.estimate_alpha(one) == specnb.estimate_alpha(one.row(0))


def test_drafts_never_exceed_the_remaining_budget(setup):
    target, prompts, alone = setup
    draft = tiny_llama(2, hidden=16, layers=1)
    for batch in ([prompts[0]], prompts):
        result = specnb.speculative(target, draft, batch, gamma=500, max_new_tokens=2, trace=True)
        assert result.tokens == [a[:2] for a in alone[:len(batch)]]
        # A budget of 2 leaves room for 1 draft before the target's own token.
        assert result.stats.draft_forwards <= len(batch) and result.stats.draft_forwards <= 2
        assert all(len(it.drafted) <= 1 for it in result.trace)


def test_a_short_draft_context_is_respected_alone_and_batched(setup):
    target, prompts, alone = setup
    short = tiny_llama(2, hidden=16, layers=1, max_positions=16)
    for batch in ([prompts[0]], prompts):
        result = specnb.speculative(target, short, batch, gamma=4, max_new_tokens=MAX_NEW,
                                    trace=True)
        assert result.tokens == alone[:len(batch)]
        for b, prompt in enumerate(batch):
            length = len(prompt)
            for it in result.row(b).trace:
                if it.drafted:  # a draft at position L - 1 + j needs L - 1 + j < 16
                    assert length + len(it.drafted) <= 17
                length += len(it.emitted)
            assert length > 17  # the row went on past the draft's context, undrafted


def test_prompt_lookup_is_the_loop_with_an_ngram_drafter(setup):
    target, prompts, _ = setup
    repetitive = [[7, 8, 9, 10] * 5, [3, 4] * 9]
    direct = specnb.speculative(target, NgramDrafter(n_max=3, n_min=1), repetitive, gamma=4,
                                max_new_tokens=MAX_NEW)
    wrapped = specnb.prompt_lookup(target, repetitive, num_pred=4, max_new_tokens=MAX_NEW)
    assert direct.tokens == wrapped.tokens
    assert direct.stats.drafted == wrapped.stats.drafted > 0
    assert direct.stats.accepted == wrapped.stats.accepted


@pytest.mark.parametrize("bad, message", [
    (object(), "Drafter or a transformers causal LM"),
    (tiny_llama(2, vocab=VOCAB + 3), "vocabulary"),
])
def test_bad_drafters_are_refused(setup, bad, message):
    target, prompts, _ = setup
    with pytest.raises(ValueError, match=message):
        specnb.speculative(target, bad, prompts[0], gamma=2, max_new_tokens=4)


@pytest.mark.parametrize("kind", ["model", "head"])
def test_early_stop_drafts_less_and_keeps_greedy_output(setup, kind):
    """A row stops drafting after a token its draft gives q < stop_below: greedy output is
    unchanged, fewer tokens are drafted, and every proposal ends at its first doubtful token."""
    from head_fixtures import random_head

    target, prompts, alone = setup
    draft = tiny_llama(2, hidden=16, layers=1)
    make = (lambda stop: specnb.drafters.ModelDrafter(draft, stop_below=stop)) if kind == "model" \
        else (lambda stop: specnb.drafters.FeatureDrafter(random_head(target).head, stop_below=stop))
    full = specnb.speculative(target, make(None), [prompts[1]], gamma=4, max_new_tokens=MAX_NEW,
                              trace=True)
    stopped = specnb.speculative(target, make(0.5), [prompts[1]], gamma=4, max_new_tokens=MAX_NEW,
                                 trace=True)
    assert full.tokens == stopped.tokens == alone[1:2]
    assert stopped.stats.drafted < full.stats.drafted
    assert stopped.stats.draft_forwards < full.stats.draft_forwards
    assert any(len(it.drafted) < 4 for it in stopped.trace if it.drafted)
    # The rule itself: q(token) at T > 0; softmax(logits) at T = 0 (q is one-hot there).
    drafter, eos, token = make(0.5), torch.tensor([99]), torch.tensor([1, 1])
    q = torch.tensor([[0.3, 0.7], [0.6, 0.4]])
    assert drafter.stops(token, token, eos, q=q, logits=q.log(),
                         temperature=0.7).tolist() == [False, True]
    assert drafter.stops(token, token, eos, q=torch.eye(2)[[1, 1]], logits=q.log(),
                         temperature=0.0).tolist() == [False, True]
    assert drafter.stops(torch.tensor([99, 1]), token, eos, q=q, logits=q.log(),
                         temperature=0.7).tolist() == [True, True]


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, True, "0.4", float("nan")])
def test_bad_stop_below_is_refused(bad):
    with pytest.raises(ValueError, match="stop_below must be None or a probability"):
        specnb.drafters.ModelDrafter(tiny_llama(2, hidden=16, layers=1), stop_below=bad)


def test_a_feature_drafter_is_not_taken_for_its_head():
    """load_pair() hands out a FeatureDrafter; re-wrapping it with other settings takes its
    .head, and the error for the drafter itself says so."""
    from head_fixtures import random_head

    drafter = random_head(tiny_llama(1))
    with pytest.raises(ValueError, match=r"got FeatureDrafter \(a drafter's head is its \.head\)"):
        specnb.drafters.FeatureDrafter(drafter, tree=(2,))
    assert specnb.drafters.FeatureDrafter(drafter.head, tree=(2,)).tree == (2,)
