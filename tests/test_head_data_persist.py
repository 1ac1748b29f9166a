"""The head's data survives a new machine through the repository: each shard's token record is
written as it is saved, a shard missing from the cache is rebuilt from its record (teacher
forcing, no generation) equal to the generated one up to float rounding, `--export` writes what
is missing and skips what exists, and the target's replies come from the repo copy."""

import gzip
import json
from types import SimpleNamespace

import pytest
import torch
from tiny_models import random_prompts, tiny_llama

from specnb.training import head_data, head_records, prompts

EOS = 5
LAYERS = (0, 1, 2)
SETTINGS = dict(num_rounds=2, max_new_tokens=10, eos_id=EOS, rows=16, layers=LAYERS)


@pytest.fixture(scope="module")
def target():
    return tiny_llama(1, eos_token_id=EOS)


ROWS = random_prompts(head_data.SHARD_SIZE + 6, seed=7)  # 2 blocks × 2 rounds: 4 shards


def build(target, folder, records, rows=ROWS, **overrides):
    return head_data.build(target, rows, **{**SETTINGS, "tokens": None, "folder": folder,
                                           "records": records, "progress": False, **overrides})


def plan_shards(folder, rows=ROWS):
    return head_data.plan_shards(rows, SETTINGS["num_rounds"], SETTINGS["max_new_tokens"],
                                 layers=LAYERS, folder=folder)


@pytest.fixture(scope="module")
def generated(target, tmp_path_factory):
    """Shards generated once, with the token records written beside: {path: examples}."""
    folder, records = tmp_path_factory.mktemp("cache"), tmp_path_factory.mktemp("records")
    paths, record = build(target, folder, records)
    assert len(paths) == 4 and record["answer_tokens_rebuilt"] == 0
    return folder, records, {p: torch.load(p) for p in paths}


@pytest.fixture
def no_generation(monkeypatch):
    """Generation fails the test as soon as a row is asked for."""
    def refuse(target, jobs, **kwargs):
        for _ in jobs:
            raise AssertionError("a shard was generated, not rebuilt")
        yield from ()
    monkeypatch.setattr(head_data, "generate_stream", refuse)


def fresh_cache(generated, tmp_path):
    """A new machine: an empty shard folder, and the repo's token records copied."""
    _, records, shards = generated
    copy = tmp_path / "records"
    for path in shards:
        target_file = head_records.answers_path(path, copy)
        target_file.parent.mkdir(parents=True, exist_ok=True)
        target_file.write_bytes(head_records.answers_path(path, records).read_bytes())
    return tmp_path / "cache", copy


def test_each_saved_shard_has_its_token_record(generated):
    _, records, shards = generated
    for path, examples in shards.items():
        record = head_records.read_answers(head_records.answers_path(path, records))
        assert record["examples"] == [{"answer_start": e["answer_start"], "ids": e["ids"]}
                                      for e in examples]
        r, t = int(path.name.split("-")[0][1:]), float(path.name.split("-")[1][1:])
        assert record["settings"] == {"round": r, "temperature": t, "seed": 0,
                                      "max_new_tokens": 10, "layers": [0, 1, 2], "top_k": 16}
        tokens = sum(len(e["ids"]) for e in examples)
        assert head_records.answers_path(path, records).stat().st_size < 4 * tokens + 200


def test_a_fresh_cache_is_rebuilt_from_the_records_without_generating(
        target, generated, tmp_path, no_generation):
    folder, records = fresh_cache(generated, tmp_path)
    shards = generated[2]
    paths, record = build(target, folder, records)
    assert [p.name for p in paths] == [p.name for p in shards]
    assert record["answer_tokens_made"] == 0
    assert record["answer_tokens_rebuilt"] == record["answer_tokens_cached"] > 0
    for old, new in zip(shards, paths):
        assert head_records.mismatches(shards[old], torch.load(new)) == []
        assert head_data.shard_info(new) == json.loads(old.with_suffix(".json").read_text())
    again, record = build(target, folder, records)  # all cached now: nothing to do
    assert again == paths and record["answer_tokens_rebuilt"] == 0


def test_rebuild_stops_at_the_goal(target, generated, tmp_path, no_generation):
    folder, records = fresh_cache(generated, tmp_path)
    first = next(iter(generated[2]))
    paths, record = build(target, folder, records, tokens=1)
    assert [p.name for p in paths] == [first.name] and len(list(folder.glob("*.pt"))) == 1
    assert record["answer_tokens_rebuilt"] == head_data.shard_info(first)["answer_tokens"]


def test_without_rebuild_recorded_shards_count_and_only_new_ones_are_generated(
        target, generated, tmp_path):
    folder, records = fresh_cache(generated, tmp_path)
    shards = list(generated[2])
    lost = head_records.answers_path(shards[3], records)
    lost.unlink()
    paths, record = build(target, folder, records, rebuild=False)
    assert [p.name for p in paths] == [shards[3].name]  # the only shard on disk: the new one
    assert record["answer_tokens_rebuilt"] == 0
    assert record["answer_tokens_made"] == head_data.shard_info(shards[3])["answer_tokens"]
    assert record["answer_tokens_recorded_not_rebuilt"] == sum(
        head_data.shard_info(p)["answer_tokens"] for p in shards[:3])
    assert lost.exists()
    # The goal counts the records: nothing is generated once they reach it.
    again, record = build(target, tmp_path / "other", records, rebuild=False,
                          tokens=head_data.shard_info(shards[0])["answer_tokens"])
    assert again == [] and record["answer_tokens_made"] == 0


def test_a_shard_without_a_record_is_generated_and_recorded(target, generated, tmp_path):
    folder, records = fresh_cache(generated, tmp_path)
    shards = list(generated[2])
    lost = head_records.answers_path(shards[3], records)
    lost.unlink()
    paths, record = build(target, folder, records)
    assert record["answer_tokens_made"] == head_data.shard_info(shards[3])["answer_tokens"]
    assert record["answer_tokens_rebuilt"] == sum(
        head_data.shard_info(p)["answer_tokens"] for p in shards[:3])
    assert lost.read_bytes() == head_records.answers_path(shards[3], generated[1]).read_bytes()


def shift_features(example):
    """Features of the position before (position 0 repeated)."""
    return {**example, "features": torch.cat([example["features"][:1],
                                              example["features"][:-1]])}


def late_top_k(example):
    """Top-k after the first answer token onwards, one position late."""
    top_ids, top_logp = example["top_ids"].clone(), example["top_logp"].clone()
    top_ids[1:], top_logp[1:] = example["top_ids"][:-1].clone(), example["top_logp"][:-1].clone()
    return {**example, "top_ids": top_ids, "top_logp": top_logp}


def one_rounding_step(example):
    """Every feature moved by one fp16 step (away from 0 if positive, towards it if negative):
    float rounding, which must pass."""
    return {**example, "features": (example["features"].view(torch.int16) + 1).view(
        torch.float16)}


@pytest.mark.parametrize("variant,fragment", [
    (shift_features, "features differ"), (late_top_k, "top_ids differ"),
    (one_rounding_step, None)])
def test_the_comparison_catches_a_broken_rebuild(target, generated, variant, fragment):
    path, examples = next(iter(generated[2].items()))
    record = head_records.read_answers(head_records.answers_path(path, generated[1]))
    rebuilt = head_records.rebuild_examples(target, record["examples"], layers=LAYERS, top_k=16,
                                            batch_size=5)
    assert head_records.mismatches(examples, rebuilt) == []
    found = head_records.mismatches(examples, [variant(e) for e in rebuilt])
    if fragment is None:
        assert found == []
    else:  # every example with two positions or more (there are some)
        longer = sum(len(e["features"]) > 1 for e in examples)
        assert longer > 0 and sum(fragment in f for f in found) == longer


def test_rebuild_matches_a_forward_over_the_whole_text(target):
    """Checked against transformers' own forward too (not only against generate_stream)."""
    example = {"ids": [7, 8, 9, 10, 11, 12], "answer_start": 3}
    [rebuilt] = head_records.rebuild_examples(target, [example], layers=LAYERS, top_k=4)
    with torch.no_grad():
        out = target(torch.tensor([example["ids"][:-1]]), output_hidden_states=True)
    features = torch.stack([out.hidden_states[i][0] for i in LAYERS], 1)
    torch.testing.assert_close(rebuilt["features"].float(), features, rtol=2e-3, atol=2e-3)
    top = out.logits[0].log_softmax(-1).topk(4, -1)
    assert (rebuilt["top_ids"][:2] == -1).all() and (rebuilt["top_logp"][:2] == 0).all()
    assert torch.equal(rebuilt["top_ids"][2:].long(), top.indices[2:])


def test_export_writes_what_is_missing_and_skips_what_exists(generated, tmp_path, monkeypatch):
    folder, records, shards = generated
    monkeypatch.setenv("SPECNB_CACHE", str(tmp_path / "cache"))
    chunk = tmp_path / "cache" / "self-prompts" / "abc123" / "chunk0.json"
    chunk.parent.mkdir(parents=True)
    chunk.write_text(json.dumps(["1. Why do cats purr?"]))
    out = tmp_path / "out"
    written = head_records.export(plan_shards(folder), out)
    tokens = sum(head_data.shard_info(p)["answer_tokens"] for p in shards)
    assert written["answer_tokens_written"] == written["answer_tokens_recorded"] == tokens
    assert written["chunks_written"] == ["self-prompts/abc123/chunk0.json"]
    assert len(written["answers_written"]) == written["finished_shards_in_plan"] == 4
    for path in shards:  # the same bytes as the records written while generating
        assert (head_records.answers_path(path, out).read_bytes()
                == head_records.answers_path(path, records).read_bytes())
    kept = head_records.answers_path(next(iter(shards)), out)
    kept.write_bytes(gzip.compress(gzip.decompress(kept.read_bytes()), mtime=1))  # other bytes
    before = kept.read_bytes()
    again = head_records.export(plan_shards(folder), out)
    assert again["answers_written"] == [] and again["chunks_written"] == []
    assert again["answer_tokens_recorded"] == tokens and kept.read_bytes() == before
    other = head_records.export(plan_shards(folder)[:1], tmp_path / "other")
    assert other["cached_shards_outside_the_plan"] == 3 and len(other["answers_written"]) == 1


def test_the_export_command_writes_records_and_generates_nothing(tmp_path, monkeypatch, capsys):
    pool = random_prompts(5, seed=9)
    monkeypatch.setenv("SPECNB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SPECNB_HEAD_RECORDS", str(tmp_path / "records"))
    [(path, _)] = head_data.plan_shards(pool, 1, 10)
    path.parent.mkdir(parents=True)
    torch.save([{"ids": p + [EOS], "answer_start": len(p)} for p in pool], path)
    calls = []
    monkeypatch.setattr(head_data, "load_model", lambda **_: (None, None))
    monkeypatch.setattr(head_data, "prompt_pool",
                        lambda *args, **kwargs: calls.append(kwargs) or pool)
    monkeypatch.setattr(head_data, "build", lambda *a, **k: pytest.fail("built"))
    head_data.main(["--export", "--rounds", "1", "--max-new-tokens", "10"])
    out, err = capsys.readouterr()
    printed = json.loads(out)
    assert "5 of 4000 self-written prompts are in the replies kept" in err
    assert printed["answers_written"] == [f"answers/{path.stem}.json.gz"]
    assert printed["answer_tokens_recorded"] == 5 and calls[0]["generate"] is False
    assert head_records.answers_path(path).parent == tmp_path / "records" / "answers"


class ChatTokenizer:
    """Enough of a tokenizer for `self_written`: every request is [7, 8, 9]."""
    eos_token_id = EOS

    def apply_chat_template(self, messages, add_generation_prompt, return_tensors):
        return torch.tensor([[7, 8, 9]])

    def decode(self, ids, skip_special_tokens):
        return "1. Why do cats purr so loudly?\n2. How do bees make honey?"


def test_replies_come_from_the_cache_else_the_repo_else_the_target(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECNB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SPECNB_HEAD_RECORDS", str(tmp_path / "records"))
    key = prompts.chunk_key(0, 120)
    kept = tmp_path / "records" / "self-prompts" / key / "chunk0.json"
    assert prompts.self_written(None, None, 2, exclude=[], generate=False) == []
    kept.parent.mkdir(parents=True)
    kept.write_text(json.dumps(["1. What makes bread rise in the oven?\n2. Why is the sea salty?"]))
    # target None: generating would fail, so these come from the repo copy
    assert prompts.self_written(None, None, 2, exclude=[]) == [
        "What makes bread rise in the oven?", "Why is the sea salty?"]
    cached = tmp_path / "cache" / "self-prompts" / key / "chunk0.json"
    assert cached.read_bytes() == kept.read_bytes()

    def fake_stream(target, jobs, **kwargs):
        for key_, prompt, *_ in jobs:
            yield key_, {"ids": prompt + [10], "answer_start": len(prompt)}
    monkeypatch.setattr(prompts, "generate_stream", fake_stream)
    written = prompts.self_written(SimpleNamespace(device=torch.device("cpu")),
                                   ChatTokenizer(), 4, exclude=[])
    assert written[2:] == ["Why do cats purr so loudly?", "How do bees make honey?"]
    second = kept.with_name("chunk1.json")  # generated, then kept in the repo at once
    assert second.read_bytes() == cached.with_name("chunk1.json").read_bytes()
    assert len(json.loads(second.read_text())) == prompts.CHUNK


def example(ids=(7, 8, 9), answer_start=2):
    return {"ids": list(ids), "answer_start": answer_start}


GOOD = {"round": 0, "temperature": 0.0, "seed": 0, "max_new_tokens": 10, "layers": [0, 1, 2],
        "top_k": 16}


@pytest.mark.parametrize("call,fragment", [
    (lambda t, d: head_records.write_answers(d / "a.pt", [example()], {"round": 0}, d),
     "settings must hold"),
    (lambda t, d: head_records.write_answers(d / "a.pt", [], GOOD, d), "examples must hold"),
    (lambda t, d: head_records.write_answers(d / "a.pt", [example(answer_start=3)], GOOD, d),
     "answer_start must be"),
    (lambda t, d: head_records.write_answers(d / "a.pt", [example(answer_start=0)], GOOD, d),
     "answer_start must be"),
    (lambda t, d: head_records.rebuild_examples(t, [example()], layers=LAYERS, top_k=16,
                                                batch_size=0), "batch_size must be"),
    (lambda t, d: head_records.rebuild_examples(t, [example()], layers=LAYERS, top_k=0),
     "top_k must be"),
    (lambda t, d: head_records.read_answers(d / "no-such.json.gz"), "is not a token record"),
    (lambda t, d: build(t, d / "cache", d / "a-file"), "records must be a folder"),
])
def test_bad_inputs_are_refused(target, tmp_path, call, fragment):
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(ValueError, match=fragment):
        call(target, tmp_path)


def test_a_record_made_with_other_settings_is_refused(target, generated, tmp_path):
    folder, records = fresh_cache(generated, tmp_path)
    first = head_records.answers_path(next(iter(generated[2])), records)
    body = json.loads(gzip.decompress(first.read_bytes()))
    body["settings"]["top_k"] = 8
    first.write_bytes(gzip.compress(json.dumps(body).encode()))
    with pytest.raises(ValueError, match="remove the record"):
        build(target, folder, records)


@pytest.mark.embedded
def test_rebuild_equals_generation_on_the_embedded_model(embedded):
    """Three training prompts (one long, input-grounded), 24 greedy tokens each: generated
    through 2 slots, then rebuilt from their tokens alone."""
    from specnb.models.data import load_prompts
    from specnb.models.loading import chat_ids

    model, tokenizer = embedded
    rows = [chat_ids(tokenizer, p["prompt"])[0].tolist() for p in load_prompts("train")[:3]]
    generated = head_data.generate_with_features(
        model, rows, max_new_tokens=24, temperature=0.0, generator=None,
        eos_id=tokenizer.eos_token_id, rows=2)
    rebuilt = head_records.rebuild_examples(
        model, [{"ids": e["ids"], "answer_start": e["answer_start"]} for e in generated],
        layers=head_data.FEATURE_LAYERS, top_k=head_data.TOP_K)
    assert head_records.mismatches(generated, rebuilt) == []
    assert head_records.mismatches(generated, [shift_features(e) for e in rebuilt]) != []
