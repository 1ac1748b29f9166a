"""A recorded run of the embedded feature head, the real trace assignment 7 measures.

    python -m specnb.course.head_run            # run the head again and rewrite the record

Assignment 7 counts the head's acceptance by draft position. Its kernel, while graded, has no
batched cache (that is the first exercise's answer, withheld), so it cannot run the head; it
reads this record instead: one greedy run of the default pair (target + head) at γ = 5 on a
held-out prompt, every draft with its status, and the loop's own counters (vLLM's included).
`load()` rebuilds it as the `GenerationResult` the run returned. The record names the machine,
versions, date and command that made it (greedy decoding can differ in a late token from one
CPU to another; the counts are this run's, not a property of the head).
"""

import argparse
import datetime
import json
import sys

from ..models.data import DATA_DIR

PATH = DATA_DIR / "head" / "run-gamma5.json"
PROMPT_ID, GAMMA, MAX_NEW_TOKENS = "summary-repair-cafe", 5, 48
STATS = ("new_tokens", "iterations", "target_forwards", "draft_forwards", "drafted", "accepted",
         "drafting_steps", "accepted_per_position")
DRAFTED = ("token", "q", "p", "accept_prob", "overlap", "status")


def record(path=PATH) -> dict:
    """Run the head once (greedy, γ = GAMMA, on PROMPT_ID) and write the record; return it."""
    import torch
    from transformers.utils import logging as transformers_logging

    import specnb
    from ..models.machine import machine_line

    transformers_logging.disable_progress_bar()
    target, head, tokenizer = specnb.load_pair(device="cpu")
    prompt = next(p for p in specnb.load_prompts("eval") if p["id"] == PROMPT_ID)["prompt"]
    with torch.inference_mode():
        result = specnb.speculative(target, head, specnb.chat_ids(tokenizer, prompt), gamma=GAMMA,
                                    max_new_tokens=MAX_NEW_TOKENS, trace=True)
    data = {"command": "python -m specnb.course.head_run", "machine": machine_line(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "prompt_id": PROMPT_ID, "gamma": GAMMA, "max_new_tokens": MAX_NEW_TOKENS,
            "tokens": result.tokens[0],
            "stats": {name: getattr(result.stats, name) for name in STATS},
            "trace": [[[getattr(d, name) for name in DRAFTED] for d in it.drafted]
                      for it in result.trace]}
    # One key per line, one step of the trace per line: a readable diff when it is recorded again.
    lines = [f" {json.dumps(key)}: {json.dumps(value)}" for key, value in data.items()
             if key != "trace"]
    steps = ",\n".join(f"  {json.dumps(step)}" for step in data["trace"])
    path.write_text("{\n" + ",\n".join(lines) + f',\n "trace": [\n{steps}\n ]\n}}\n')
    return data


def load(path=PATH):
    """The recorded run as a `GenerationResult` with its trace (drafts only: the emitted tokens
    are the result's `tokens`)."""
    from ..methods.results import DraftedToken, GenerationResult, Iteration, Stats

    data = json.loads(path.read_text())
    trace = [Iteration(drafted=[DraftedToken(*values) for values in drafted], step=step + 1,
                       gamma=data["gamma"]) for step, drafted in enumerate(data["trace"])]
    return GenerationResult("speculative", [data["tokens"]], Stats(**data["stats"]), trace)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specnb.course.head_run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    data = record()
    print(f"wrote {PATH}: {len(data['trace'])} steps, {data['stats']['accepted']} of "
          f"{data['stats']['drafted']} drafts accepted ({data['machine']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
