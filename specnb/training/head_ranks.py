"""Measure the feature head's acceptance by rank and depth on held-out prompts.

    python -m specnb.training.head_ranks        # writes data/head/ranks.json

The head drafts a wide tree (`MEASURED_SHAPE`: its top 4 guesses, then the top 2 after the best
one, twice more), greedily, on every eval prompt (never trained on). Siblings are tried in rank
order, so the accepted sibling's place is the target token's rank (`theory.rank_counts`); the
record gives, per depth d and rank r, P(the target's token is among the head's top r | depth d
reached through best guesses). `specnb.models.tree_shape` turns it, with this machine's
checking cost, into the shape `speculative(target, head, ids)` drafts without γ.

EAGLE-2's dynamic trees (`DYNAMIC`: (nodes, depth, branch)) grow where the head is confident,
so what they accept is not a function of the rank table: the record also holds, per dynamic
tree, the drafts it accepted per iteration on the same prompts, and the advisor weighs those
against the static shapes. Where int8 drafting applies (`specnb.models.int8_draft`), the head's
int8 copy is measured too ("int8": its own acceptance by rank, static shapes only), so the
advisor can weigh its lower cost against its agreement. Re-run it after retraining the head
(minutes on a CPU).
"""

import argparse
import hashlib
import json
from datetime import datetime, timezone

from tqdm.auto import tqdm

from ..core.args import check_out_file
from ..drafters import FeatureDrafter
from ..methods import speculative
from ..models.data import load_prompts
from ..models.fast_path import cpu_identity
from ..models.int8_draft import int8_copy, why_not_int8
from ..models.loading import chat_ids
from ..models.pairs import EMBEDDED_HEAD, load_pair
from ..models.tree_shape import RANKS_FILE
from ..theory import acceptance_by_rank, check_tree_shape, rank_counts

MEASURED_SHAPE = (4, 2, 2)
# Dynamic trees worth weighing: 2-3 nodes where checking 3-4 tokens is nearly free (a CPU whose
# curve is flat there: data/results/latency-cpu-*.json), 4-8 where a wide forward is (a GPU).
DYNAMIC = ((2, 2, 2), (3, 3, 2), (4, 3, 2), (8, 4, 3))


def measure_ranks(target, head, prompt_ids: list, *, shape=MEASURED_SHAPE,
                  max_new_tokens: int = 64, progress: bool = False) -> dict:
    """{"shape_measured", "acceptance" [[P(top r) for r <= w] per depth], "reached" (positions
    per depth), "hits" ({rank: count} per depth), "max_new_tokens", "prompts"} from greedy runs
    of `head` (a FeatureDrafter) drafting the tree `shape` on each prompt of `prompt_ids`."""
    shape = check_tree_shape(shape)
    if not prompt_ids:
        raise ValueError("prompt_ids must hold at least one prompt")
    wide = FeatureDrafter(head.head, tree=shape)
    results = [speculative(target, wide, ids, gamma=len(shape), max_new_tokens=max_new_tokens,
                           trace=True)
               for ids in tqdm(prompt_ids, desc="ranks", disable=not progress)]
    hits, reached = rank_counts(results, len(shape))
    return {"shape_measured": list(shape), "acceptance": acceptance_by_rank(results, shape),
            "reached": reached, "hits": [{str(r): n for r, n in sorted(h.items())} for h in hits],
            "max_new_tokens": max_new_tokens, "prompts": len(prompt_ids)}


def measure_dynamic(target, head, prompt_ids: list, *, dynamic=DYNAMIC,
                    max_new_tokens: int = 64, progress: bool = False) -> list:
    """[{"dynamic": [nodes, depth, branch], "accepted_per_iteration", "iterations"}]: greedy
    runs of the head's dynamic tree on each prompt; an iteration counts when it drafted."""
    if not prompt_ids:
        raise ValueError("prompt_ids must hold at least one prompt")
    rows = []
    for shape in dynamic:
        drafter = FeatureDrafter(head.head, dynamic=shape)
        runs = [speculative(target, drafter, ids, gamma=drafter.dynamic.depth,
                            max_new_tokens=max_new_tokens, trace=True)
                for ids in tqdm(prompt_ids, desc=f"dynamic {tuple(shape)}",
                                disable=not progress)]
        drafting = [it for run in runs for it in run.trace if it.drafted]
        accepted = sum(d.status == "accepted" for it in drafting for d in it.drafted)
        rows.append({"dynamic": list(shape), "iterations": len(drafting),
                     "accepted_per_iteration": accepted / max(len(drafting), 1)})
    return rows


def head_digest(folder=EMBEDDED_HEAD) -> str:
    """Which head the record measured: the first 16 hex digits of its weights' SHA-256."""
    return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()[:16]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m specnb.training.head_ranks",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--out", default=str(RANKS_FILE))
    args = parser.parse_args(argv)
    if args.max_new_tokens < 1:
        parser.error(f"--max-new-tokens must be >= 1, got {args.max_new_tokens}")
    check_out_file(parser, "--out", args.out)
    target, head, tokenizer = load_pair()
    prompts = load_prompts("eval")
    prompt_ids = [chat_ids(tokenizer, p["prompt"]) for p in prompts]
    record = measure_ranks(target, head, prompt_ids, max_new_tokens=args.max_new_tokens,
                           progress=True)
    record["dynamic"] = measure_dynamic(target, head, prompt_ids,
                                        max_new_tokens=args.max_new_tokens, progress=True)
    if why_not_int8(head.head) is None:  # the int8 copy's own ranks (static shapes only)
        int8 = FeatureDrafter(int8_copy(head.head))
        record["int8"] = {k: v for k, v in measure_ranks(
            target, int8, prompt_ids, max_new_tokens=args.max_new_tokens, progress=True).items()
            if k in ("shape_measured", "acceptance", "reached", "hits")}
    cpu = cpu_identity()
    record.update(head=head_digest(), prompt_set="eval (held out from the head's training)",
                  greedy=True,
                  cpu=f"{cpu['name']} [{cpu['isa']}]",
                  date=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    for d, row in enumerate(record["acceptance"]):
        print(f"depth {d + 1} ({record['reached'][d]} positions): " +
              ", ".join(f"top {r + 1} {a:.3f}" for r, a in enumerate(row)))
    for d, row in enumerate(record.get("int8", {}).get("acceptance", [])):
        print(f"int8 head, depth {d + 1} ({record['int8']['reached'][d]} positions): " +
              ", ".join(f"top {r + 1} {a:.3f}" for r, a in enumerate(row)))
    for row in record["dynamic"]:
        print(f"dynamic {tuple(row['dynamic'])}: {row['accepted_per_iteration']:.3f} accepted "
              f"per iteration ({row['iterations']} iterations)")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
