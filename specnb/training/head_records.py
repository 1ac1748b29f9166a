"""The feature head's data kept in the repository, small enough for git, and the cache rebuilt
from it on a new machine.

A shard of `head_data` (features: about 5 kB per token) lives only in ~/.cache/specnb, which a
new machine does not have; what decides its content does fit in git. For each finished shard,
`data/head-data/answers/<shard stem>.json.gz` holds its settings (round, temperature, seed,
max_new_tokens, layers, top_k) and, per example, `ids` (prompt + answer) and `answer_start`:
about 1.4 bytes per token. The target's raw replies that `prompts.self_written` cleans are kept
as they are, `data/head-data/self-prompts/<key>/chunkN.json`.

A shard missing from the cache whose record exists is *rebuilt* by teacher forcing: each
example's text, but its last token, goes through the target in one forward, right-padded in
groups of similar length (`slots.forward_slots` with the prefill mask: the forward that writes
answers, without a KV cache). Features at every fed position, the top-k log-probabilities after
the last prompt position and after every answer position (-1 / 0 before): the layout of
`slots.generate_stream`, equal to it up to float rounding (`mismatches` compares two shards).
No sequential decoding, but still one forward per position: on a CPU, where generating with
continuous batching also runs one per position, it is only modestly faster (data/README.md
records both).

$SPECNB_HEAD_RECORDS redirects the folder (the tests do). It generates no answers and decides
no plan (`head_data` does).
"""

import gzip
import json
import os
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..core.files import write_atomic
from ..models.data import DATA_DIR
from ..models.loading import cache_dir
from .slots import forward_slots, prefill_groups, prefill_mask

SETTINGS = ("round", "temperature", "seed", "max_new_tokens", "layers", "top_k")
REBUILD_ROWS = 16  # sequences per teacher-forced forward


def records_dir() -> Path:
    """Where the records live: $SPECNB_HEAD_RECORDS, else data/head-data of the checkout."""
    folder = os.environ.get("SPECNB_HEAD_RECORDS")
    return Path(folder) if folder else DATA_DIR / "head-data"


def answers_path(shard: Path, records: Path | None = None) -> Path:
    """The token record of a shard: r1-T0.7-n192-ab12.pt -> answers/r1-T0.7-n192-ab12.json.gz."""
    return (records or records_dir()) / "answers" / f"{Path(shard).stem}.json.gz"


def check_tokens(examples: list) -> None:
    if not examples:
        raise ValueError("examples must hold at least one example")
    for i, e in enumerate(examples):
        if not 1 <= e["answer_start"] < len(e["ids"]):
            raise ValueError(f"examples[{i}]: answer_start must be in 1..len(ids) - 1 (a prompt "
                             f"and at least one answer token), got {e['answer_start']} of "
                             f"{len(e['ids'])} ids")


def write_answers(shard: Path, examples: list, settings: dict,
                  records: Path | None = None) -> Path | None:
    """Write the token record of `shard` unless it exists; return its path, None if skipped."""
    if sorted(settings) != sorted(SETTINGS):
        raise ValueError(f"settings must hold exactly {', '.join(SETTINGS)}; got "
                         f"{sorted(settings)}")
    check_tokens(examples)
    path = answers_path(shard, records)
    if path.exists():
        return None
    body = {"settings": settings, "examples": [
        {"answer_start": int(e["answer_start"]), "ids": [int(t) for t in e["ids"]]}
        for e in examples]}
    write_atomic(path, gzip.compress(json.dumps(body, separators=(",", ":")).encode(), mtime=0))
    return path


def read_answers(path: Path) -> dict:
    """{"settings", "examples": [{"answer_start", "ids"}]} of one token record."""
    try:
        body = json.loads(gzip.decompress(Path(path).read_bytes()))
        settings, examples = body["settings"], body["examples"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"path {path} is not a token record (gzipped JSON with settings and "
                         f"examples): {error}") from error
    check_tokens(examples)
    return {"settings": settings, "examples": examples}


def answer_tokens(examples: list) -> int:
    return sum(len(e["ids"]) - e["answer_start"] for e in examples)


@torch.inference_mode()
def rebuild_examples(target, examples: list, *, layers, top_k: int,
                     batch_size: int = REBUILD_ROWS, bar=None) -> list:
    """Full examples (features, top_logp, top_ids as `generate_stream` writes them) from token
    examples ({"ids", "answer_start"}), in their order, by teacher-forced forwards of up to
    `batch_size` texts of similar length (padding under 15 %, as `slots.prefill_groups`).
    Example: ids [a b c x y], answer_start 3 -> feed [a b c x]; features at 0..3, top-k after
    c and x (positions 2, 3), -1 at 0 and 1."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    if not isinstance(top_k, int) or not 1 <= top_k <= target.config.vocab_size:
        raise ValueError(f"top_k must be an int in 1..vocab size, got {top_k!r}")
    check_tokens(examples)
    device = target.device
    groups = prefill_groups(list(range(len(examples))), [len(e["ids"]) for e in examples])
    out = [None] * len(examples)
    for group in (g[i:i + batch_size] for g in groups for i in range(0, len(g), batch_size)):
        lengths = torch.tensor([len(examples[i]["ids"]) - 1 for i in group])  # fed tokens
        width = int(lengths.max())
        ids = torch.zeros(len(group), width, dtype=torch.long)  # right padding, masked
        for row, i in enumerate(group):
            ids[row, :lengths[row]] = torch.tensor(examples[i]["ids"][:-1])
        positions = torch.arange(width).expand(len(group), width)
        features, final = forward_slots(target, None, ids.to(device), positions.to(device),
                                        prefill_mask(lengths, width).to(device), layers)
        features = features.half().cpu()  # [B, W, L, H]
        starts = torch.tensor([examples[i]["answer_start"] - 1 for i in group])  # first scored
        column = torch.arange(width)
        scored = (column[None] >= starts[:, None]) & (column[None] < lengths[:, None])  # [B, W]
        tops = [target.lm_head(h).float().log_softmax(-1).topk(top_k, dim=-1)  # 256 rows of
                for h in final[scored.to(device)].split(256)]  # logits at a time, not all M
        top_logp = torch.cat([t.values for t in tops]).cpu()  # [M, k], row-major
        top_ids = torch.cat([t.indices for t in tops]).cpu()
        top_ids_buffer = torch.full((len(group), width, top_k), -1, dtype=torch.int32)
        top_logp_buffer = torch.zeros(len(group), width, top_k, dtype=torch.float16)
        top_ids_buffer[scored], top_logp_buffer[scored] = top_ids.int(), top_logp.half()
        for row, i in enumerate(group):
            fed = int(lengths[row])
            out[i] = {"ids": [int(t) for t in examples[i]["ids"]],
                      "answer_start": int(examples[i]["answer_start"]),
                      "features": features[row, :fed].clone(),
                      "top_logp": top_logp_buffer[row, :fed].clone(),
                      "top_ids": top_ids_buffer[row, :fed].clone()}
        if bar is not None:
            bar.update(int(lengths.sum()))
    return out


def records_to_rebuild(shards: list, *, goal: float, cached_tokens,
                       records: Path | None = None) -> list:
    """[(shard path, record)]: the missing shards of `shards` [(path, settings)] that `records`
    hold, in plan order, while the answer tokens before them (`cached_tokens(path)` of a cached
    shard, the record's of a recorded one) are fewer than `goal`."""
    found, tokens = [], 0
    for path, settings in shards:
        if path.exists():
            tokens += cached_tokens(path)
        elif tokens < goal and answers_path(path, records).exists():
            record = read_answers(answers_path(path, records))
            if record["settings"] != settings:
                raise ValueError(f"the token record of {path.name} says {record['settings']}, "
                                 f"the plan {settings}: remove the record or fix the plan")
            found.append((path, record))
            tokens += answer_tokens(record["examples"])
    return found


def rebuild_shards(target, shards: list, *, save, batch_size: int = REBUILD_ROWS,
                   progress: bool = True) -> int:
    """Rebuild each (shard path, record) and `save(path, examples)` it; one bar over the fed
    positions of them all. Returns the answer tokens rebuilt."""
    total = sum(len(e["ids"]) - 1 for _, record in shards for e in record["examples"])
    bar = tqdm(total=total, unit="pos", desc="rebuilding shards from token records",
               disable=not progress or not shards)
    made = 0
    for path, record in shards:
        settings = record["settings"]
        save(path, rebuild_examples(target, record["examples"], layers=tuple(settings["layers"]),
                                    top_k=settings["top_k"], batch_size=batch_size, bar=bar))
        made += answer_tokens(record["examples"])
    bar.close()
    return made


def export_chunks(records: Path | None = None) -> list:
    """Copy every finished self-prompt chunk of the cache that the records lack; the copies."""
    records = records or records_dir()
    written = []
    for chunk in sorted((cache_dir() / "self-prompts").glob("*/chunk*.json")):
        copy = records / "self-prompts" / chunk.parent.name / chunk.name
        if not copy.exists():
            write_atomic(copy, chunk.read_bytes())
            written.append(copy)
    return written


def export_shards(shards: list, records: Path | None = None) -> list:
    """Write the token record of each finished (shard path, settings) that has none (reads
    the shard); return the records written."""
    written = []
    for path, settings in shards:
        if path.exists() and not answers_path(path, records).exists():
            written.append(write_answers(path, torch.load(path), settings, records))
    return written


def export(shards: list, records: Path | None = None) -> dict:
    """Write into `records` what a new machine cannot make cheaply: the cache's self-prompt
    replies, and the token record of each finished shard of `shards` [(path, settings)] (the
    plan's); what exists is skipped. Returns what was written, and the totals."""
    records = records or records_dir()
    chunks, answers = export_chunks(records), export_shards(shards, records)
    planned = {path for path, _ in shards}
    outside = {p for folder in {p.parent for p in planned} for p in folder.glob("*.pt")} - planned
    return {"records": str(records),
            "chunks_written": [c.relative_to(records).as_posix() for c in chunks],
            "answers_written": [a.relative_to(records).as_posix() for a in answers],
            "answer_tokens_written": sum(answer_tokens(read_answers(a)["examples"])
                                         for a in answers),
            "answer_tokens_recorded": recorded_tokens(records),
            "finished_shards_in_plan": sum(p.exists() for p in planned),
            "cached_shards_outside_the_plan": len(outside)}


def recorded_tokens(records: Path | None = None) -> int:
    """Answer tokens in every token record of the folder."""
    return sum(answer_tokens(read_answers(p)["examples"])
               for p in ((records or records_dir()) / "answers").glob("*.json.gz"))


def mismatches(expected: list, actual: list, *, tolerance: float = 1e-3) -> list:
    """What differs between two shards' examples, as lines (none: equal up to float rounding).

    ids, answer_start and top_ids must be equal; features close within `tolerance` × the RMS of
    their layer (plus 2·tolerance relative: one fp16 rounding step), top_logp within
    `tolerance` (plus the same relative term)."""
    if len(expected) != len(actual):
        return [f"{len(expected)} examples against {len(actual)}"]
    found = []
    for i, (e, a) in enumerate(zip(expected, actual)):
        for key in ("ids", "answer_start"):
            if e[key] != a[key]:
                found.append(f"example {i}: {key} differ")
        for key in ("features", "top_logp", "top_ids"):
            if e[key].shape != a[key].shape or e[key].dtype != a[key].dtype:
                found.append(f"example {i}: {key} {tuple(e[key].shape)} {e[key].dtype} against "
                             f"{tuple(a[key].shape)} {a[key].dtype}")
        if found and found[-1].startswith(f"example {i}:"):
            continue
        if not torch.equal(e["top_ids"], a["top_ids"]):
            found.append(f"example {i}: top_ids differ at "
                         f"{int((e['top_ids'] != a['top_ids']).any(-1).sum())} positions")
        features, other = e["features"].float(), a["features"].float()  # [n-1, L, H]
        scale = features.pow(2).mean(dim=(0, 2), keepdim=True).sqrt()  # per layer
        far = (features - other).abs() > tolerance * scale + 2 * tolerance * features.abs()
        if far.any():
            found.append(f"example {i}: features differ at {int(far.sum())} of {far.numel()}")
        logp, other = e["top_logp"].float(), a["top_logp"].float()
        if ((logp - other).abs() > tolerance + 2 * tolerance * logp.abs()).any():
            found.append(f"example {i}: top_logp differ")
    return found
