"""data/prompts: the test split is held out from everything the drafters were made or tuned
on: no prompt, id or eight-word run of it appears in the training prompts, the eval prompts or
the replies the target wrote as self-prompts (data/head-data/self-prompts), and no prompt the
head was trained on holds most of a test prompt's content words (`prompts.too_close`).

The test split came after the head's data: the self-prompt pool excludes only what is near an
eval prompt, and excluding the test prompts too would change the pool, hence the data plan."""

import json
import re

import pytest

from specnb.models.data import DATA_DIR, GROUPS, load_prompts

RUN = 8  # words: a shared run this long would mean a copied passage, not shared phrasing


def runs(text: str) -> set:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i:i + RUN]) for i in range(len(words) - RUN + 1)}


def seen_texts() -> list:
    texts = [p["prompt"] for split in ("train", "eval") for p in load_prompts(split)]
    for chunk in sorted((DATA_DIR / "head-data" / "self-prompts").glob("*/*.json")):
        texts += json.loads(chunk.read_text())
    return texts


def test_the_test_split_is_balanced_and_well_formed():
    test = load_prompts("test")
    assert len(test) == 24 and len({p["id"] for p in test}) == 24
    for group in GROUPS:
        assert len(load_prompts("test", group)) == 12, group
    assert all(p["prompt"].strip() and p["task"] for p in test)


def test_no_test_prompt_was_seen_before():
    test = load_prompts("test")
    seen_ids = {p["id"] for split in ("train", "eval") for p in load_prompts(split)}
    assert not seen_ids & {p["id"] for p in test}
    seen = seen_texts()
    assert len(seen) > 1000  # the self-prompt replies are there to compare with
    seen_runs = set().union(*(runs(t) for t in seen))
    for prompt in test:
        assert prompt["prompt"] not in seen, prompt["id"]
        shared = runs(prompt["prompt"]) & seen_runs
        assert not shared, (prompt["id"], sorted(shared)[:3])


@pytest.mark.embedded
def test_no_training_prompt_covers_a_test_prompt(monkeypatch, tmp_path):
    """Reads the self-written prompts from the replies kept in the repository alone: an empty
    cache (a fresh machine) must give the same 4 000 prompts as a warm one."""
    import specnb.training.prompts
    from specnb.models.loading import load_model
    from specnb.training.prompts import self_written, too_close

    _, tokenizer = load_model()
    kept = DATA_DIR / "head-data"
    before = sorted((kept / "self-prompts").rglob("*.json"))
    monkeypatch.setenv("SPECNB_HEAD_RECORDS", str(kept))  # conftest points it at an empty folder
    monkeypatch.setattr(specnb.training.prompts, "cache_dir", lambda: tmp_path / "empty-cache")
    human = [p["prompt"] for p in load_prompts("train")]
    written = self_written(None, tokenizer, 4000, known=human, generate=False,
                           exclude=[p["prompt"] for p in load_prompts("eval")])
    assert len(written) == 4000  # the pool the head's data was written for
    assert sorted((kept / "self-prompts").rglob("*.json")) == before  # read, nothing written
    seen = written + human + [p["prompt"] for p in load_prompts("eval")]
    for prompt in load_prompts("test"):
        assert not [t for t in seen if too_close(prompt["prompt"], [t])], prompt["id"]
    # The rule at work: the self-prompt "What makes a volcano erupt?" covers a test prompt
    # written first as "How does a volcano erupt?" (replaced since).
    assert too_close("How does a volcano erupt?", written)


def test_the_check_would_catch_a_copied_prompt():
    eval_prompt = load_prompts("eval")[2]["prompt"]  # an input-grounded one, long enough
    assert runs(eval_prompt) & set().union(*(runs(t) for t in seen_texts()))


def test_an_unknown_split_is_refused():
    with pytest.raises(ValueError, match="no prompt split"):
        load_prompts("holdout")
