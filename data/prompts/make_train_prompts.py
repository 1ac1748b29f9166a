"""Build data/prompts/train.jsonl: 320 hand-written-template prompts for distillation.

The topics, templates, passages and code snippets live beside this script in
train_sources.json; all of them were written by hand for specnb. This script only
draws from them. Run from the repository root:

    python data/prompts/make_train_prompts.py            # rewrites data/prompts/train.jsonl
    python data/prompts/make_train_prompts.py OUT.jsonl  # writes elsewhere (the tests do)

The output is deterministic (random.Random(0), standard library only) and must
match the committed train.jsonl exactly, so the order of the random draws below is
part of the format. Prompts here are deliberately on different topics and texts than
data/prompts/eval.jsonl.

- 160 open-ended prompts: each topic of each category once, with a template drawn at
  random (a category without templates holds complete questions); shuffled, first 160.
- 160 input-grounded prompts: code edits (two per snippet), news summaries (two per
  item), questions about passages, rewrites and extractions, each wrapped in a format
  drawn at random; shuffled, first 160.
- The two halves are shuffled together and numbered t001-<kind> ... t320-<kind>.
"""

import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
N_OPEN = 160
N_GROUNDED = 160


def load_sources(path=os.path.join(HERE, "train_sources.json")):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def check_text(text):
    n = len(text.split())
    assert 60 <= n <= 200, (n, text[:60])


def check_code(code):
    lines = code.split("\n")
    nonblank = [l for l in lines if l.strip()]
    assert 8 <= len(nonblank) and len(lines) <= 25, (len(nonblank), len(lines), code[:40])


def lower_first(q):
    return q[0].lower() + q[1:]


def build_open(rng, src):
    items = []
    for category in src["open_categories"]:
        task, templates = category["task"], category["templates"]
        for topic in category["topics"]:
            prompt = topic if templates is None else rng.choice(templates).format(topic)
            items.append({"group": "open-ended", "task": task, "prompt": prompt, "kind": task})
    rng.shuffle(items)
    return items[:N_OPEN]


def build_grounded(rng, src):
    items = []

    def add(task, kind, prompt):
        items.append({"group": "input-grounded", "task": task, "prompt": prompt, "kind": kind})

    for snippet in src["code_snippets"]:
        lang, code, edits = snippet["lang"], snippet["code"], snippet["edits"]
        check_code(code)
        for instr, fmt in zip(edits, rng.sample(src["code_formats"], len(edits))):
            instr = instr + rng.choice(src["code_suffixes"])
            add("code-edit", "code", fmt.format(instr=instr, lang=lang, code=code,
                                                name=src["lang_names"][lang]))

    for text in src["news"]:
        check_text(text)
        for fmt in rng.sample(src["summary_formats"], 2):
            add("summary", "news", fmt.format(text=text))

    for passage in src["qa_passages"]:
        text = passage["text"]
        check_text(text)
        for q in passage["questions"]:
            fmt = rng.choice(src["qa_formats"])
            add("qa", "read", fmt.format(text=text, q=q, ql=lower_first(q)))

    for task in ("rewrite", "extract"):  # kind == task for both
        for entry in src[task + "_texts"]:
            text = entry["text"]
            check_text(text)
            for instr in entry["instructions"]:
                fmt = rng.choice(src[task + "_formats"])
                add(task, task, fmt.format(text=text, instr=instr))

    rng.shuffle(items)
    return items[:N_GROUNDED]


def main(out_path=None):
    src = load_sources()
    rng = random.Random(0)
    open_items = build_open(rng, src)
    grounded_items = build_grounded(rng, src)
    assert len(open_items) == N_OPEN and len(grounded_items) == N_GROUNDED
    items = open_items + grounded_items
    rng.shuffle(items)

    prompts = [it["prompt"] for it in items]
    assert len(set(prompts)) == len(prompts), "duplicate prompt"

    out_path = out_path or os.path.join(HERE, "train.jsonl")
    with open(out_path, "w", encoding="utf-8", newline="\n") as f:
        for i, it in enumerate(items, start=1):
            rec = {
                "id": "t%03d-%s" % (i, it["kind"]),
                "group": it["group"],
                "task": it["task"],
                "prompt": it["prompt"],
            }
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print("wrote %d prompts to %s" % (len(items), out_path))


if __name__ == "__main__":  # optional argument: write somewhere else (the tests do)
    main(sys.argv[1] if len(sys.argv) > 1 else None)
