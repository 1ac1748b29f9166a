"""Write the feature head's training data with the target, in resumable shards.

    python -m specnb.training.head_data --tokens 1000000

The target answers training prompts (round 0 greedily, then by sampling at T = 0.7, 1.0, 0.85,
...), and the *same* forwards that write an answer record what the head learns from: the
residual stream at `FEATURE_LAYERS` for every position, and the target's top-k next-token
log-probabilities after each answer position. No second, teacher-forced pass. Generation runs
through `slots.generate_stream` (continuous batching: a finished row takes the next prompt).

The prompts: the human-written `data/prompts/train.jsonl`, then prompts the target wrote
(`specnb.training.prompts`). The data comes in *shards*: one per (round, block of SHARD_SIZE
consecutive prompts), named by a hash of what decides its content (the block's prompt ids, the
round's temperature and seed, max_new_tokens, layers, top_k) and nothing else, so adding
prompts or rounds keeps every shard already made. A shard is written as `.partial` and renamed,
with a small `.json` beside it (its counts); stopping loses at most the shards in flight.

The cache does not outlive a machine, so the repository keeps what decides it
(`specnb.training.head_records`): each shard's token record, written as soon as the shard is
saved, in `data/head-data/answers/`, and the target's raw replies behind the self-written
prompts in `data/head-data/self-prompts/`. A shard missing from the cache whose record exists is
rebuilt from it (one teacher-forced forward per example, no decoding) instead of generated; so
on a new machine the same command resumes where the last one stopped. `--export` writes the
records of shards made before (or by another checkout) and the replies into the repository.

It does not train anything (`specnb.training.train_head` does).
"""

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..models.data import load_prompts
from ..models.loading import cache_dir, load_model
from .common import add_device_arguments, check_device_arguments
from .head_records import (answer_tokens, export, rebuild_shards, records_dir,
                           records_to_rebuild, write_answers)
from .prompts import prompt_pool  # the plan's prompts (train_head imports it from here)
from .slots import generate_stream

# Residual stream entering layers 2, 15 and 27, and the final (normed) state:
# a low, a middle and a high layer as in EAGLE-3, plus the state the LM head reads.
FEATURE_LAYERS = (2, 15, 27, 30)
SHARD_SIZE = 64  # prompts per shard
TOP_K = 16


def round_settings(num_rounds: int) -> list:
    """Round 0 greedy, then sampled rounds cycling T = 0.7, 1.0, 0.85 (one seed per round)."""
    temperatures = (0.7, 1.0, 0.85)
    return [(0.0 if r == 0 else temperatures[(r - 1) % 3], r) for r in range(num_rounds)]


def shard_dir() -> Path:
    return cache_dir() / "head-data" / "shards"


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value).encode()).hexdigest()


def shard_path(block: list, temperature: float, round_: int, seed: int, max_new_tokens: int,
               layers=FEATURE_LAYERS, folder: Path | None = None) -> Path:
    """The file of one shard, named by what determines its content (not the whole prompt list).

    The key does not name the target: the cache is the embedded target's. Data for another
    target needs another cache folder (SPECNB_CACHE)."""
    key = _digest([[list(map(int, p)) for p in block], temperature, round_, seed,
                   max_new_tokens, list(layers), TOP_K])[:16]
    return (folder or shard_dir()) / f"r{round_}-T{temperature:g}-n{max_new_tokens}-{key}.pt"


def plan(prompt_ids: list, num_rounds: int) -> list:
    """[(round, temperature, block)]: every block of round 0, then of round 1, ..."""
    blocks = [prompt_ids[i:i + SHARD_SIZE] for i in range(0, len(prompt_ids), SHARD_SIZE)]
    return [(r, t, block) for t, r in round_settings(num_rounds) for block in blocks]


def plan_shards(prompt_ids: list, num_rounds: int, max_new_tokens: int, seed: int = 0,
                layers=FEATURE_LAYERS, folder: Path | None = None) -> list:
    """[(shard path, settings of its token record)] in plan order (`head_records.SETTINGS`)."""
    return [(shard_path(block, t, r, seed, max_new_tokens, layers, folder),
             {"round": r, "temperature": t, "seed": seed, "max_new_tokens": max_new_tokens,
              "layers": list(layers), "top_k": TOP_K})
            for r, t, block in plan(prompt_ids, num_rounds)]


def row_generator(prompt: list, round_: int, seed: int, device) -> torch.Generator:
    """A generator per (prompt, round, seed): a sampled answer does not depend on its batch."""
    return torch.Generator(device=device).manual_seed(
        int(_digest([list(map(int, prompt)), round_, seed])[:15], 16))


def cached_shards(prompt_ids: list, num_rounds: int, max_new_tokens: int, seed: int = 0,
                  layers=FEATURE_LAYERS, folder: Path | None = None) -> list:
    """The plan's shards that are already made, in plan order (nothing is generated)."""
    return [p for p, _ in plan_shards(prompt_ids, num_rounds, max_new_tokens, seed, layers,
                                      folder) if p.exists()]


def shard_info(path: Path) -> dict:
    """The counts beside a shard (rebuilt from the shard if the .json is missing)."""
    info_path = path.with_suffix(".json")
    if info_path.exists():
        return json.loads(info_path.read_text())
    examples = torch.load(path)
    info = {"examples": len(examples),
            "answer_tokens": sum(len(e["ids"]) - e["answer_start"] for e in examples),
            "positions": sum(len(e["features"]) for e in examples)}
    info_path.write_text(json.dumps(info))
    return info


def build(target, prompt_ids: list, *, tokens: int | None, num_rounds: int, max_new_tokens: int,
          eos_id: int, seed: int = 0, rows: int = 64, layers=FEATURE_LAYERS,
          folder: Path | None = None, records: Path | None = None, rebuild: bool = True,
          progress: bool = True) -> tuple:
    """Make the plan's shards, in order, until they hold >= `tokens` answer tokens (None: all);
    return (their paths, a record of the counts and the measured rate). Shards that exist are
    kept; missing ones with a token record in `records` (None: `records_dir()`) are rebuilt from
    it; the others are generated together, through one stream of `rows` slots, and each one's
    token record is written as soon as it is saved. `rebuild=False` leaves the recorded shards
    unbuilt (their tokens still count towards `tokens`): new data first, on a new machine whose
    cache is empty; training needs them built, by a run without it."""
    for name, value in (("num_rounds", num_rounds), ("max_new_tokens", max_new_tokens),
                        ("rows", rows)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if tokens is not None and tokens < 1:
        raise ValueError(f"tokens must be >= 1 or None (the whole plan), got {tokens!r}")
    if not prompt_ids:
        raise ValueError("prompt_ids must hold at least one prompt")
    folder, records = folder or shard_dir(), records or records_dir()
    if records.exists() and not records.is_dir():
        raise ValueError(f"records must be a folder (of token records), got the file {records}")
    folder.mkdir(parents=True, exist_ok=True)
    shards = plan_shards(prompt_ids, num_rounds, max_new_tokens, seed, layers, folder)
    settings = dict(shards)
    steps = [(r, t, block, path) for (r, t, block), (path, _) in
             zip(plan(prompt_ids, num_rounds), shards)]
    goal = float("inf") if tokens is None else tokens
    recorded = records_to_rebuild(shards, goal=goal,
                                  cached_tokens=lambda p: shard_info(p)["answer_tokens"],
                                  records=records)
    rebuilt = rebuild_shards(target, recorded, save=_save, progress=progress) if rebuild else 0
    unbuilt = {} if rebuild else {path: answer_tokens(record["examples"])
                                  for path, record in recorded}
    cached = sum(shard_info(p)["answer_tokens"] for p, _ in shards if p.exists()) + sum(
        unbuilt.values())
    made, rows_done, started, cpu_started = 0, 0, time.perf_counter(), time.process_time()
    waiting = {}  # path -> [example or None]: the shards in flight
    bar = tqdm(total=None if tokens is None else max(0, tokens - cached), unit="tok",
               desc="answer tokens", disable=not progress)

    def expected() -> float:
        """Answer tokens cached, made, and expected from the rows still to end."""
        per_row = made / rows_done if rows_done else 0.75 * max_new_tokens
        open_rows = sum(e is None for examples in waiting.values() for e in examples)
        return cached + made + open_rows * per_row

    def jobs():  # lazily: a new shard starts only while the goal is not reached
        for r, t, block, path in steps:
            if path.exists() or path in unbuilt:
                continue
            if expected() >= goal:
                return
            waiting[path] = [None] * len(block)
            for i, prompt in enumerate(block):
                generator = None if t == 0 else row_generator(prompt, r, seed, target.device)
                yield (path, i), list(map(int, prompt)), t, generator

    columns = max(len(p) for p in prompt_ids) + max_new_tokens
    try:
        for (path, i), example in generate_stream(
                target, jobs(), rows=rows, max_new_tokens=max_new_tokens, eos_id=eos_id,
                layers=layers, top_k=TOP_K, columns=columns):
            answer = len(example["ids"]) - example["answer_start"]
            made, rows_done = made + answer, rows_done + 1
            bar.update(answer)
            bar.set_postfix(tok_s=f"{made / (time.perf_counter() - started):.0f}")
            waiting[path][i] = example
            if all(e is not None for e in waiting[path]):
                examples = waiting.pop(path)
                _save(path, examples)
                write_answers(path, examples, settings[path], records)
    except KeyboardInterrupt:
        print("stopped: the shards in flight are lost, every finished one is kept",
              file=sys.stderr)
    finally:
        bar.close()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    paths, total = [], 0
    for *_, path in steps:  # the plan's shards in order, up to the goal
        if total >= goal:
            break
        if path.exists():
            paths.append(path)
            total += shard_info(path)["answer_tokens"]
    infos = [shard_info(p) for p in paths]
    record = {"answer_tokens_cached": sum(i["answer_tokens"] for i in infos),
              "positions_cached": sum(i["positions"] for i in infos),
              "shards": len(paths), "shards_in_plan": len(steps),
              "disk_bytes": sum(p.stat().st_size for p in paths),
              "answer_tokens_rebuilt": rebuilt, "answer_tokens_made": made,
              "answer_tokens_recorded_not_rebuilt": sum(unbuilt.values()),
              "seconds": round(seconds, 1),
              "tokens_per_second": round(made / seconds, 1) if seconds and made else None,
              "tokens_per_cpu_minute": round(60 * made / cpu) if cpu and made else None,
              "rows": rows, "max_new_tokens": max_new_tokens, "prompts": len(prompt_ids)}
    return paths, record


def _save(path: Path, examples: list) -> None:
    partial = path.with_suffix(".partial")
    torch.save(examples, partial)
    partial.rename(path)
    path.with_suffix(".json").unlink(missing_ok=True)
    shard_info(path)  # writes the counts beside it


def generate_with_features(target, prompts: list, *, max_new_tokens: int, temperature: float,
                           generator: torch.Generator | None, eos_id: int,
                           layers=FEATURE_LAYERS, top_k: int = TOP_K, rows: int = 64) -> list:
    """Answer prompts (lists of ids); return one example per prompt, in their order.

    An example: `ids` (prompt + answer), `answer_start`, `features [n-1, len(layers), H]`
    (fp16; position t of ids, the last token is never fed), and `top_ids`, `top_logp`
    `[n-1, top_k]`: the target's next-token distribution after each answer position and the
    last prompt position (earlier prompt positions hold -1: not scored). Sampled rows draw
    their own generators from `generator` (one seed each, in prompt order).
    """
    if temperature > 0 and not isinstance(generator, torch.Generator):
        raise ValueError("generator must be a torch.Generator when temperature > 0")
    seeds = (torch.randint(0, 2**62, (len(prompts),), generator=generator).tolist()
             if temperature > 0 else [None] * len(prompts))
    jobs = [(i, list(map(int, p)), temperature,
             None if s is None else torch.Generator(device=target.device).manual_seed(s))
            for i, (p, s) in enumerate(zip(prompts, seeds))]
    columns = max(len(p) for p in prompts) + max_new_tokens
    out = dict(generate_stream(target, jobs, rows=min(rows, len(prompts)),
                               max_new_tokens=max_new_tokens, eos_id=eos_id, layers=layers,
                               top_k=top_k, columns=columns))
    return [out[i] for i in range(len(prompts))]


def add_data_arguments(parser, batch_flags=("--data-batch-size",)) -> None:
    """The options that decide which shards hold the data (shared with train_head)."""
    parser.add_argument("--rounds", type=int, default=6,
                        help="rounds over the prompts at most: 1 greedy, then sampled (T cycles "
                             "0.7, 1.0, 0.85)")
    parser.add_argument("--max-new-tokens", type=int, default=192)
    parser.add_argument("--self-prompts", type=int, default=4000,
                        help="prompts written by the target, after the 320 human ones "
                             "(0: human prompts only)")
    parser.add_argument(*batch_flags, type=int, default=64, dest="data_batch_size", metavar="N",
                        help="rows generated together (slots of the continuous batch)")


def check_data_arguments(parser, args, batch_flag="--data-batch-size") -> None:
    for name, flag in (("rounds", "--rounds"), ("max_new_tokens", "--max-new-tokens"),
                       ("data_batch_size", batch_flag)):
        if getattr(args, name) < 1:
            parser.error(f"{flag} must be >= 1, got {getattr(args, name)}")
    if args.self_prompts < 0:
        parser.error(f"--self-prompts must be >= 0, got {args.self_prompts}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m specnb.training.head_data",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1_000_000,
                        help="answer tokens to have cached (shards already made count)")
    add_data_arguments(parser, ("--batch-size", "--data-batch-size"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-rebuild", action="store_true",
                        help="leave the shards that have a token record unbuilt and generate "
                             "only new ones (a new machine's cache is empty: new data first; "
                             "training needs a run without it, which rebuilds them)")
    parser.add_argument("--export", action="store_true",
                        help="generate nothing: write the token records of the plan's finished "
                             "cached shards and the target's cached replies (self-written "
                             "prompts) into data/head-data/ ($SPECNB_HEAD_RECORDS)")
    add_device_arguments(parser)
    args = parser.parse_args(argv)
    if args.tokens < 1:
        parser.error(f"--tokens must be >= 1, got {args.tokens}")
    check_data_arguments(parser, args, "--batch-size")
    check_device_arguments(parser, args)
    target, tokenizer = load_model(device=args.device, dtype=args.dtype)
    pool = prompt_pool(target, tokenizer, args.self_prompts, seed=args.seed,
                       rows=args.data_batch_size, generate=not args.export)
    if args.export:
        print(json.dumps(export(plan_shards(pool, args.rounds, args.max_new_tokens, args.seed)),
                         indent=1))
        written = len(pool) - len(load_prompts("train"))
        if written < args.self_prompts:  # no replies for the rest: their shards cannot exist
            print(f"{written} of {args.self_prompts} self-written prompts are in the replies "
                  f"kept: shards of later prompts were not looked for", file=sys.stderr)
        return
    paths, record = build(target, pool, tokens=args.tokens, num_rounds=args.rounds,
                          max_new_tokens=args.max_new_tokens, eos_id=tokenizer.eos_token_id,
                          seed=args.seed, rows=args.data_batch_size,
                          rebuild=not args.no_rebuild)
    record.update(command="python -m specnb.training.head_data " + " ".join(
        sys.argv[1:] if argv is None else argv), threads=torch.get_num_threads(),
        device=str(target.device), dtype=str(target.dtype).replace("torch.", ""),
        finished=time.strftime("%Y-%m-%d %H:%M:%S"))
    log = shard_dir().parent / "head-data-log.json"
    runs = json.loads(log.read_text()) if log.exists() else []
    log.write_text(json.dumps(runs + [record], indent=1) + "\n")
    print(json.dumps(record, indent=1))
    if record["answer_tokens_cached"] < args.tokens:
        print(f"the plan ({len(pool)} prompts × {args.rounds} rounds) holds fewer than "
              f"{args.tokens} answer tokens: raise --rounds or --self-prompts", file=sys.stderr)


if __name__ == "__main__":
    main()
