"""The feature-reading draft head: greedy equality, its cache rollback, the training path, and
its files. (Its whole-loop χ² exactness is in test_speculative_exact.py.)"""

import pytest
import torch

import specnb
from head_fixtures import random_head
from specnb.drafters import FeatureDrafter
from specnb.drafters.feature import right_align
from tiny_models import VOCAB, tiny_llama

MAX_NEW = 30


@pytest.fixture(scope="module")
def setup():
    target = tiny_llama(1)
    generator = torch.Generator().manual_seed(3)
    prompts = [torch.randint(1, VOCAB, (length,), generator=generator).tolist()
               for length in (5, 11, 17, 1)]
    alone = [specnb.autoregressive(target, p, max_new_tokens=MAX_NEW).tokens[0] for p in prompts]
    return target, prompts, alone


@pytest.mark.parametrize("gamma", [1, 2, 3, 5, 8])
def test_random_head_keeps_greedy_output_alone_and_batched(setup, gamma):
    target, prompts, alone = setup
    drafter = random_head(target)
    for prompt, expected in zip(prompts, alone):
        assert specnb.speculative(target, drafter, prompt, gamma=gamma,
                                  max_new_tokens=MAX_NEW).tokens == [expected]
    batch = specnb.speculative(target, drafter, prompts, gamma=gamma, max_new_tokens=MAX_NEW)
    assert batch.tokens == alone
    assert batch.stats.drafted > 0 and batch.stats.draft_forwards > 0


def test_oracle_drafts_through_the_head_state_are_all_accepted(setup):
    """The head's state machine (cache, rollbacks, features) runs underneath while the drafts
    are the target's own continuation: every draft passes and the output is unchanged."""
    target, prompts, alone = setup

    class Perfect(FeatureDrafter):
        def propose(self, max_drafts, *, width, temperature, generator):
            proposal = super().propose(max_drafts, width=width, temperature=temperature,
                                       generator=generator)
            rows = [self.rows_alive[i] for i in range(len(self.rows_alive))]
            ids = torch.tensor([alone[r][self.done[r]:self.done[r] + proposal.token_ids.shape[1]]
                                for r in rows]).view(len(rows), -1)
            proposal.token_ids, proposal.probs = ids, None
            return proposal

        def start(self, target, prompts, pending, **kw):
            super().start(target, prompts, pending, **kw)
            self.rows_alive, self.done = list(range(len(prompts))), [0] * len(prompts)

        def update(self, step):
            for i, emitted in enumerate(step.emitted):
                self.done[self.rows_alive[i]] += len(emitted)
            super().update(step)

        def select_rows(self, keep):
            self.rows_alive = [self.rows_alive[i] for i in keep.tolist()]
            super().select_rows(keep)

    result = specnb.speculative(target, Perfect(random_head(target).head), prompts[:3], gamma=3,
                                max_new_tokens=MAX_NEW)
    assert result.tokens == alone[:3] and result.stats.accepted == result.stats.drafted


def target_features(target, sequence, layers):
    with torch.no_grad():
        out = target(torch.tensor([sequence]), output_hidden_states=True)
    return torch.stack([out.hidden_states[i] for i in layers], 2)  # [1, L, layers, H]


def test_after_a_rejection_the_next_proposal_equals_one_from_scratch(setup):
    target, prompts, _ = setup
    drafter = random_head(target, seed=5)
    seen = []

    class Recording(FeatureDrafter):
        def update(self, step):
            super().update(step)
            self.catch_up()  # what the next proposal starts from
            seen.append((step.num_accepted.tolist(), step.proposed_width,
                         self.next_logits.clone()))

    recording = Recording(drafter.head)
    result = specnb.speculative(target, recording, prompts[1], gamma=3, max_new_tokens=20,
                                trace=True)
    sequence, checked = list(prompts[1]), 0
    for it, (accepted, width, logits) in zip(result.trace, seen):
        sequence += [e.token for e in it.emitted]
        if accepted[0] < width:  # a rejection: the head's own entries were dropped
            fresh = FeatureDrafter(drafter.head)
            fresh.start(target, [sequence], torch.tensor([sequence[-1]]), eos_ids=set(),
                        features=target_features(target, sequence[:-1],
                                                 drafter.feature_layers))
            torch.testing.assert_close(fresh.next_logits, logits, atol=1e-4, rtol=1e-4)
            checked += 1
    assert checked >= 3


def test_training_path_matches_the_cached_path(setup):
    """`unrolled` (training-time test) computes what the cache computes step by step."""
    target, prompts, _ = setup
    head = random_head(target, seed=2).head
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, VOCAB, (1, 12), generator=generator)
    features = torch.randn(1, 12, 3, target.config.hidden_size, generator=generator)
    with torch.no_grad():
        outputs = head.unrolled(tokens, features, torch.ones(1, 12, dtype=torch.bool), steps=3,
                                offset=2)
        for anchor in (3, 7):
            lm = specnb.core.BatchedCachedLM(head)
            lm.forward(tokens[:, :anchor + 1], features=features[:, :anchor + 1])
            chain = [lm.model_output.hidden[:, -1]]
            for step in (1, 2):
                lm.forward(tokens[:, anchor + step:anchor + step + 1],
                           hidden=chain[-1].unsqueeze(1))
                chain.append(lm.model_output.hidden[:, -1])
            for k, output in enumerate(chain):
                torch.testing.assert_close(output, outputs[k][:, anchor - 2], atol=1e-4,
                                           rtol=1e-4)


def test_right_align():
    values = torch.tensor([[1, 2, 3], [4, 5, 6]])
    block, valid = right_align(values, torch.tensor([1, 3]))
    assert block[valid].tolist() == [1, 4, 5, 6]
    assert block[1].tolist() == [4, 5, 6] and valid.tolist() == [[False, False, True]] + [[True] * 3]


def test_save_and_load_round_trip(setup, tmp_path):
    target, prompts, alone = setup
    drafter = random_head(target, seed=4)
    drafter.save_pretrained(tmp_path)
    loaded = FeatureDrafter.from_pretrained(tmp_path, target)
    assert torch.equal(loaded.head.draft_to_target, drafter.head.draft_to_target)
    result = specnb.speculative(target, loaded, prompts[0], gamma=3, max_new_tokens=MAX_NEW)
    assert result.tokens == [alone[0]]
    with pytest.raises(ValueError, match="no feature head"):
        FeatureDrafter.from_pretrained(tmp_path / "missing", target)


def test_an_lm_head_at_its_start_is_left_out_and_rebuilt_bit_for_bit(setup, tmp_path):
    """The LM head starts as the target's rows of the draft vocabulary and stays frozen unless
    trained: saved as it started, it is the target's and is not stored; trained, it is."""
    from safetensors.torch import load_file

    target, *_ = setup
    drafter = random_head(target, seed=5)
    head = drafter.head
    with torch.no_grad():
        head.lm_head.weight.copy_(target.get_input_embeddings().weight[head.draft_to_target])
    drafter.save_pretrained(tmp_path / "start")
    assert "lm_head.weight" not in load_file(tmp_path / "start" / "model.safetensors")
    loaded = FeatureDrafter.from_pretrained(tmp_path / "start", target).head
    assert torch.equal(loaded.lm_head.weight, head.lm_head.weight.to(torch.bfloat16).float())
    with torch.no_grad():
        head.lm_head.weight[0, 0] += 1.0  # trained (--train-lm-head): its own, so stored
    drafter.save_pretrained(tmp_path / "trained")
    stored = load_file(tmp_path / "trained" / "model.safetensors")["lm_head.weight"]
    assert torch.equal(stored, head.lm_head.weight.to(torch.bfloat16))
    loaded = FeatureDrafter.from_pretrained(tmp_path / "trained", target).head
    assert torch.equal(loaded.lm_head.weight, stored.float())


def test_steps_without_drafts_cost_the_head_nothing_and_it_catches_up_exactly(setup):
    """γ = 0 steps (a disabled batch, a cost-aware schedule) feed the head nothing; the entries
    wait and go in with the next proposal, which then equals one computed from scratch."""
    from specnb.methods.schedules import GammaSchedule

    target, prompts, alone = setup
    drafter = random_head(target, seed=6)
    caught_up = []

    class EveryThird(GammaSchedule):
        def start(self, num_rows):
            self.calls = 0

        def gammas(self, rows):
            self.calls += 1
            return [3 if self.calls % 3 == 0 else 0] * len(rows)

    class Recording(FeatureDrafter):
        updates = 0

        def update(self, step):
            super().update(step)
            self.updates += 1

        def catch_up(self):
            waiting = self.unfed is not None
            super().catch_up()
            if waiting:
                caught_up.append((self.updates, self.next_logits.clone()))

    result = specnb.speculative(target, Recording(drafter.head), prompts[1], gamma=EveryThird(),
                                max_new_tokens=MAX_NEW, trace=True)
    assert result.tokens == [alone[1]]
    drafting_steps = sum(1 for it in result.trace if it.gamma and it.drafted)
    assert len(result.trace) >= 3 * drafting_steps - 2  # two of three steps drafted nothing
    # Per drafting step: one catch-up forward, then one per draft after the first.
    assert len(caught_up) == drafting_steps >= 3
    assert result.stats.draft_forwards <= 3 * drafting_steps
    for updates, logits in caught_up:
        sequence = list(prompts[1]) + [e.token for it in result.trace[:updates] for e in it.emitted]
        fresh = FeatureDrafter(drafter.head)
        fresh.start(target, [sequence], torch.tensor([sequence[-1]]), eos_ids=set(),
                    features=target_features(target, sequence[:-1], drafter.feature_layers))
        torch.testing.assert_close(fresh.next_logits, logits, atol=1e-4, rtol=1e-4)
    disabled = specnb.speculative(target, drafter, prompts[:3], gamma=3, max_new_tokens=MAX_NEW,
                                  disable_by_batch_size=3, trace=True)
    assert disabled.tokens == alone[:3] and disabled.stats.draft_forwards == 0
