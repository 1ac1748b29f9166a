"""Data for the feature head: continuous batching writes the target's own greedy answers, its
features and top-k are those of a teacher-forced forward, sampled rows do not depend on their
batch, shards resume and survive added prompts, and self-written prompts are cleaned."""

import pytest
import torch
from tiny_models import random_prompts, tiny_llama

from specnb.training import head_data, head_records, prompts
from specnb.training.slots import generate_stream

EOS = 5
LAYERS = (0, 1, 2)  # entering layers 0 and 1, and the final normed state (2 layers)


@pytest.fixture(scope="module")
def target():
    return tiny_llama(1, eos_token_id=EOS)


def test_greedy_rows_equal_generate_and_features_equal_a_teacher_forced_forward(target):
    """3 slots for 7 prompts: rows are refilled mid-run, and each answer still equals
    transformers' greedy generate; features and top-k equal a forward over the whole text."""
    rows = random_prompts(7)
    examples = head_data.generate_with_features(target, rows, max_new_tokens=20, temperature=0.0,
                                                generator=None, eos_id=EOS, layers=LAYERS, rows=3)
    for prompt, example in zip(rows, examples):
        expected = target.generate(torch.tensor([prompt]), attention_mask=torch.ones(
            1, len(prompt), dtype=torch.long), do_sample=False, max_new_tokens=20,
            eos_token_id=EOS, pad_token_id=0)[0].tolist()
        assert example["ids"] == expected
        assert example["answer_start"] == len(prompt)
        n = len(example["ids"])
        out = target(torch.tensor([example["ids"][:-1]]), output_hidden_states=True)
        features = torch.stack([out.hidden_states[i][0] for i in LAYERS], 1)
        assert example["features"].dtype == torch.float16
        assert example["features"].shape == (n - 1, len(LAYERS), target.config.hidden_size)
        torch.testing.assert_close(example["features"].float(), features, rtol=2e-3, atol=2e-3)
        top = out.logits[0].log_softmax(-1).topk(16, -1)
        scored = len(prompt) - 1
        assert (example["top_ids"][:scored] == -1).all()
        assert torch.equal(example["top_ids"][scored:].long(), top.indices[scored:])
        torch.testing.assert_close(example["top_logp"][scored:].float(), top.values[scored:],
                                   rtol=2e-3, atol=2e-3)


def test_eager_attention_gives_the_same_answers():
    """The slots' mask is additive, so eager attention (which adds the mask to the scores)
    writes the same answers as SDPA; a bool mask would have counted as +1/+0 there."""
    rows = random_prompts(4, seed=1)
    answers = {}
    for implementation in ("sdpa", "eager"):
        model = tiny_llama(1, eos_token_id=EOS)
        model.config._attn_implementation = implementation
        answers[implementation] = [e["ids"] for e in head_data.generate_with_features(
            model, rows, max_new_tokens=12, temperature=0.0, generator=None, eos_id=EOS,
            layers=LAYERS, rows=2)]
    assert answers["eager"] == answers["sdpa"]


def test_sampled_rows_do_not_depend_on_the_batch(target):
    rows = random_prompts(6, seed=1)
    answers = [[e["ids"] for e in head_data.generate_with_features(
        target, rows, max_new_tokens=12, temperature=1.0, eos_id=EOS, layers=LAYERS, rows=size,
        generator=torch.Generator().manual_seed(3))] for size in (1, 4, 6)]
    assert answers[0] == answers[1] == answers[2]
    assert answers[0] != [e["ids"] for e in head_data.generate_with_features(
        target, rows, max_new_tokens=12, temperature=1.0, eos_id=EOS, layers=LAYERS, rows=4,
        generator=torch.Generator().manual_seed(4))]


def build(target, prompt_ids, folder, **overrides):
    settings = dict(tokens=None, num_rounds=2, max_new_tokens=10, eos_id=EOS, rows=6,
                    layers=LAYERS, folder=folder, progress=False)
    return head_data.build(target, prompt_ids, **{**settings, **overrides})


def test_shards_resume_and_survive_added_prompts(target, tmp_path):
    rows = random_prompts(head_data.SHARD_SIZE * 2, seed=2)
    paths, record = build(target, rows, tmp_path)
    assert len(paths) == 4 and record["answer_tokens_cached"] == record["answer_tokens_made"]
    before = {p: (p.stat().st_mtime_ns, [e["ids"] for e in torch.load(p)]) for p in paths}
    lost = paths[3]  # a sampled shard
    lost_tokens = head_data.shard_info(lost)["answer_tokens"]
    lost.unlink()
    head_records.answers_path(lost).unlink()  # else it is rebuilt (test_head_data_persist.py)
    again, record = build(target, rows, tmp_path, rows=4)  # other slots: the same answers
    assert again == paths and record["answer_tokens_made"] == lost_tokens
    for p in paths:
        assert [e["ids"] for e in torch.load(p)] == before[p][1]
        assert p == lost or p.stat().st_mtime_ns == before[p][0]
    more, record = build(target, rows + random_prompts(70, seed=3), tmp_path)
    assert set(paths) < set(more) and len(more) == 8  # 2 new blocks × 2 rounds
    assert not list(tmp_path.glob("*.partial"))


def test_build_stops_at_the_token_goal(target, tmp_path):
    rows = random_prompts(head_data.SHARD_SIZE * 3, seed=4)
    paths, record = build(target, rows, tmp_path, tokens=50)
    assert len(paths) == 1 and record["answer_tokens_cached"] >= 50
    assert head_data.cached_shards(rows, 2, 10, layers=LAYERS, folder=tmp_path) == paths


@pytest.mark.parametrize("overrides,fragment", [
    ({"rows": 0}, "rows must be"), ({"num_rounds": 0}, "num_rounds must be"),
    ({"max_new_tokens": 0}, "max_new_tokens must be"), ({"tokens": 0}, "tokens must be"),
])
def test_build_refuses_bad_arguments(target, tmp_path, overrides, fragment):
    with pytest.raises(ValueError, match=fragment):
        build(target, random_prompts(3), tmp_path, **overrides)


def test_a_prompt_too_long_for_the_slots_is_refused(target):
    with pytest.raises(ValueError, match="columns"):
        list(generate_stream(target, [(0, [7] * 30, 0.0, None)], rows=2, max_new_tokens=8,
                             eos_id=EOS, layers=LAYERS, columns=32))


@pytest.mark.parametrize("line,cleaned", [
    ('"Why do cats purr so much?"', "Why do cats purr so much?"),
    ("1. How do I water a cactus in winter?", "How do I water a cactus in winter?"),
    ("- What makes bread rise in the oven?", "What makes bread rise in the oven?"),
    ("* 1. 2) Explain how yeast works.", "Explain how yeast works."),
    ("Pick up the shovel and dig.", None),  # neither a question nor a request
    ("DO: How to care for a healthy plant is simple?", None),  # a colon
    ("Here are five questions about cooking:", None),  # talks about the task
    ("Why?", None),  # too short
    ("How do volcanoes form under the sea floor", None),  # no end mark: cut off
    ("  ", None),
    ("What " + "very " * 45 + "big?", None),  # too long
])
def test_clean(line, cleaned):
    assert prompts.clean(line) == cleaned


def test_select_drops_duplicates_and_prompts_close_to_eval():
    evals = ["What are three simple tips for getting better sleep?",
             "Why is the sky blue? Please explain it simply."]
    replies = ["Sure! Here are five questions.\n"
               "1. What are three simple tips for getting better sleep at night?",  # content
               "Could you tell me why is the sky blue? Please explain it simply, thanks.",  # 8-gram
               "How do bees make honey?", "how do bees make HONEY?",  # duplicate
               "Who was Ada Lovelace?",  # a human train prompt
               "What is a good way to learn chess openings?"]
    kept = prompts.select(replies, 10, evals, known=["Who was Ada Lovelace?"])
    assert kept == ["How do bees make honey?", "What is a good way to learn chess openings?"]
    assert prompts.select(replies, 1, evals) == ["How do bees make honey?"]
    assert all(prompts.too_close(e, evals) for e in evals)


def test_requests_cycle_templates_and_topics():
    first = prompts.requests(0, 4)
    assert first[0].startswith("Write five different questions") and "cooking" in first[0]
    assert "cooking" in first[2] and "baking bread" in first[3]
    assert len(set(prompts.requests(0, 3 * len(prompts.TOPICS)))) == 3 * len(prompts.TOPICS)


def test_self_written_refuses_a_negative_count(target):
    with pytest.raises(ValueError, match="count must be"):
        prompts.self_written(target, None, -1, exclude=[])


@pytest.mark.embedded
def test_greedy_rows_equal_generate_on_the_embedded_model(embedded):
    """Three training prompts (one long, input-grounded) through 2 slots, 24 tokens each."""
    from specnb.models.data import load_prompts
    from specnb.models.loading import chat_ids

    model, tokenizer = embedded
    texts = [p["prompt"] for p in load_prompts("train")[:3]]
    rows = [chat_ids(tokenizer, text)[0].tolist() for text in texts]
    examples = head_data.generate_with_features(
        model, rows, max_new_tokens=24, temperature=0.0, generator=None,
        eos_id=tokenizer.eos_token_id, rows=2)
    for prompt, example in zip(rows, examples):
        expected = model.generate(torch.tensor([prompt]), attention_mask=torch.ones(
            1, len(prompt), dtype=torch.long), do_sample=False, max_new_tokens=24,
            eos_token_id=tokenizer.eos_token_id)[0].tolist()
        assert example["ids"] == expected
        assert example["features"].shape == (len(expected) - 1, len(head_data.FEATURE_LAYERS),
                                              model.config.hidden_size)
