"""Train the feature-reading draft head for the embedded target: `python -m specnb.training.train_head`.

Recipe (measured choices are recorded in data/README.md):
1. Data written by the target (`specnb.training.head_data`): its answers to the training prompts
   (the 320 human ones, then `--self-prompts` it wrote), greedy then sampled at T = 0.7, 1.0,
   0.85, ... (one round each), with the residual stream at `FEATURE_LAYERS` and the top-16
   next-token log-probabilities captured by the very forwards that generate them. Cached in
   shards, resumable: `--data-tokens N` takes the plan's first shards up to N answer tokens
   (making the missing ones); by default every shard `head_data` already made, in plan order.
2. Draft vocabulary: the `--draft-vocab` most frequent tokens of those answers, always with the
   special tokens; the head's LM head starts as the target's embedding rows of those tokens.
3. Loss: cross-entropy against the target's distribution (renormalized on the draft vocabulary)
   at every answer position, plus a regression of the head's normed output onto the target's
   final normed state (EAGLE-1), with the head unrolled `--steps` times on its own outputs
   (training-time test); step k weighs `--step-decay`^(k-1). The final norm and LM head are
   the target's own and stay frozen, so only the projection and the layer learn.
4. Every epoch ends with held-out acceptance on the target's greedy answers to the eval prompts:
   per step, the fraction of positions whose whole chain of k head predictions equals the
   target's; their sum is the expected number of accepted drafts per iteration at γ = steps
   under greedy decoding. The best epoch by that figure is saved, not the last or the lowest loss.
   Training is resumable: its state goes to `~/.cache/specnb/head-data/head-train/` every 10
   minutes and after each epoch, and the same command started again continues from there.
   `--init HEAD` continues a saved head (its weights, its draft vocabulary) on the data at
   hand: when the data grows, an epoch of it costs a third of three epochs from scratch; the
   start's own held-out figure is epoch 0, so the result is never worse than the start. With
   `--layout engines` a start in specnb's layout is first moved to the engines' one
   (`transfer_to_engines`).
5. Then measure the new head's acceptance by rank (`python -m specnb.training.head_ranks`):
   `data/head/ranks.json` chooses the tree shape drafted without γ, and a test refuses a record
   of another head.
"""

import argparse
import hashlib
import json
import math
import sys
import time
from pathlib import Path

import torch
from torch.nn import functional as F
from tqdm.auto import tqdm

from ..core.args import check_out_folder
from ..drafters.feature import FeatureDrafter
from ..drafters.head import FeatureHead, HeadConfig
from ..models.data import DATA_DIR, load_prompts
from ..models.loading import chat_ids, load_model
from .common import (add_device_arguments, check_device_arguments, warmup_cosine,
                     write_record)
from .head_data import (FEATURE_LAYERS, add_data_arguments, build, cached_shards,
                        check_data_arguments,
                        generate_with_features, prompt_pool, shard_dir)

DEFAULT_OUT = DATA_DIR / "head"
FINAL_STATE = 30  # hidden_states index of SmolLM2's final normed state (what its LM head reads)
# The head's layout: specnb's default (the data's four layers, each RMS-normed before fc) or the
# serving engines' EAGLE-3 (their default three layers, raw; `python -m specnb.export`). The
# engines' layers are the first three the data holds, so one data set trains both.
LAYOUTS = {"specnb": (FEATURE_LAYERS, True), "engines": ((2, 15, 27), False)}


def draft_vocabulary(examples: list, size: int, always: list, vocab: int) -> torch.Tensor:
    """The `size` most frequent answer tokens, plus `always` (special tokens), sorted ids."""
    counts = torch.zeros(vocab, dtype=torch.long)
    for e in examples:
        counts += torch.bincount(torch.tensor(e["ids"][e["answer_start"]:]), minlength=vocab)
    counts[torch.tensor(always)] = counts.max() + 1
    return counts.topk(size).indices.sort().values


def to_entries(example: dict, target_to_draft: torch.Tensor) -> dict:
    """Entry t = (F_t, x_{t+1}); its label after step k is the target's law after t + k."""
    ids = torch.tensor(example["ids"])
    n = len(ids)
    top_ids = example["top_ids"].long()  # [n-1, k]: after position p
    draft_ids = torch.where(top_ids >= 0, target_to_draft[top_ids.clamp_min(0)], -1)
    probs = example["top_logp"].float().exp() * (draft_ids >= 0)
    mass = probs.sum(-1, keepdim=True)
    # Answer positions only (and the last prompt position, which predicts the first answer
    # token): the head drafts answers, not user text.
    in_answer = torch.arange(n - 1) >= example["answer_start"] - 1
    labelled = (top_ids[:, 0] >= 0) & (mass[:, 0] > 0) & in_answer
    return {"tokens": ids[1:n], "features": example["features"],
            "label_ids": draft_ids.clamp_min(0), "label_probs": probs / mass.clamp_min(1e-9),
            "labelled": labelled}


def collate(entries: list, device=None) -> dict:
    """Pad entries into one batch (on the CPU, then moved to `device` when given)."""
    width = max(len(e["tokens"]) for e in entries)
    batch = {}
    for key, fill in (("tokens", 0), ("features", 0.0), ("label_ids", 0), ("label_probs", 0.0),
                      ("labelled", False)):
        first = entries[0][key]
        out = torch.full((len(entries), width, *first.shape[1:]), fill, dtype=first.dtype)
        for row, e in enumerate(entries):
            out[row, :len(e[key])] = e[key]
        batch[key] = out
    batch["valid"] = torch.arange(width) < torch.tensor([len(e["tokens"]) for e in entries])[:, None]
    if device is not None and torch.device(device).type != "cpu":
        batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
    return batch


def unrolled_loss(head, batch, steps: int, step_decay: float, regression_weight: float = 0.0,
                  top_index: int | None = None) -> tuple:
    """Weighted soft cross-entropy over the k unrolled steps, plus (EAGLE-1's signal) a
    smooth-L1 regression of the head's normed output onto the target's final normed state at
    the same position (feature `top_index`), a 576-number target per token; also per-step hits."""
    features = batch["features"].to(head.fc.weight.dtype)
    labelled_anywhere = batch["labelled"].any(0).nonzero()
    offset = max(0, int(labelled_anywhere.min()) - 1) if len(labelled_anywhere) else 0
    outputs = head.unrolled(batch["tokens"], features, batch["valid"], steps, offset)
    total, weights, hits = 0.0, 0.0, []
    width = batch["tokens"].shape[1]
    for k, output in enumerate(outputs):  # step k + 1: anchor t predicts the law after t + k + 1
        start = offset + k + 1
        labelled = batch["labelled"][:, start:]
        label_ids, label_probs = batch["label_ids"][:, start:], batch["label_probs"][:, start:]
        chosen = output[:, :width - start][labelled]  # [N, H]
        logp = head.logits(chosen).float().log_softmax(-1)
        loss = -(label_probs[labelled] * logp.gather(-1, label_ids[labelled])).sum(-1).mean()
        if regression_weight and top_index is not None:
            truth = batch["features"][:, start:][labelled][:, top_index].to(chosen.dtype)
            loss = loss + regression_weight * F.smooth_l1_loss(head.final_norm(chosen), truth)
        total = total + step_decay ** k * loss
        weights += step_decay ** k
        hits.append((logp.argmax(-1) == label_ids[labelled][:, 0]).float().mean().item())
    return total / weights, hits


@torch.no_grad()
def heldout_acceptance(head, entries: list, steps: int) -> list:
    """Per step k: the fraction of labelled anchors whose k chained argmaxes all equal the
    target's (greedy answers, so the chain's input tokens are what greedy decoding accepts).
    Their sum is the expected number of accepted drafts per iteration at γ = steps."""
    chained, counted = [0.0] * steps, 0
    for entry in entries:
        batch = collate([entry], head.fc.weight.device)
        outputs = head.unrolled(batch["tokens"], batch["features"].to(head.fc.weight.dtype),
                                batch["valid"], steps)
        n = batch["tokens"].shape[1]
        anchors = batch["labelled"][0, 1:n - steps + 1]  # anchors with every step labelled
        all_right = anchors.clone()
        for k, output in enumerate(outputs):
            shift = k + 1
            guess = head.logits(output[0, :n - steps]).argmax(-1)
            truth = batch["label_ids"][0, shift:n - steps + shift, 0]
            labelled = batch["labelled"][0, shift:n - steps + shift]
            all_right &= (guess == truth) & labelled
            chained[k] += float(all_right[anchors].sum())
        counted += int(anchors.sum())
    return [c / max(counted, 1) for c in chained]


def train(head, entries, heldout, *, epochs, batch_size, lr, steps, step_decay, generator,
          log, regression_weight=0.0, checkpoint: Path | None = None,
          checkpoint_seconds: float = 600.0, bf16: bool = False,
          measure_start: bool = False, max_seconds: float | None = None,
          final_index: int | None = None, progress: bool = True) -> tuple:
    """AdamW, warm-up and cosine decay; held-out acceptance after each epoch; best state.

    With `checkpoint` (a file), the whole state (weights, optimizer, schedule, the epoch's
    shuffle, history, best so far) is written there every `checkpoint_seconds` and after each
    epoch, and a run that finds it resumes where it stopped: same batches, same result as an
    uninterrupted run. The caller keys the file by everything that decides the run.
    `bf16`: the forward and backward passes autocast to bfloat16 (weights, optimizer and the
    loss's log-softmax stay float32); held-out acceptance is measured in float32.
    `measure_start` (a continued head): its held-out acceptance before training is epoch 0 of
    the history and the best so far, so more training never returns a worse head.
    `max_seconds`: a time limit (a lent GPU's minutes): the epoch in progress when it passes
    stops there, is measured like a finished one (its history entry says how many batches it
    ran) and training ends; the learning rate has then not decayed to 0.
    `final_index`: where the target's final normed state sits among the entries' feature layers
    (the regression's truth); by default, where it sits among the head's own layers, if it
    reads it. `progress`: show a progress bar (a notebook that prints the history turns it off)."""
    parameters = [p for p in head.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=lr, weight_decay=0.01)
    order = sorted(range(len(entries)), key=lambda i: len(entries[i]["tokens"]))
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    total = epochs * len(batches)
    schedule = warmup_cosine(optimizer, total)
    best, history, first_epoch, done = None, [], 0, 0
    epoch_rng = generator.get_state()
    if checkpoint is not None and checkpoint.exists():
        saved = torch.load(checkpoint, weights_only=False)
        head.load_state_dict(saved["head"])
        optimizer.load_state_dict(saved["optimizer"])
        schedule.load_state_dict(saved["schedule"])
        best, history = saved["best"], saved["history"]
        first_epoch, done, epoch_rng = saved["epoch"], saved["done"], saved["epoch_rng"]
        print(f"resuming training from {checkpoint}: epoch {first_epoch + 1}, batch {done} of "
              f"{len(batches)}", file=sys.stderr)
    elif measure_start:
        head.eval()
        acceptance = heldout_acceptance(head, heldout, steps)
        history.append({"epoch": 0, "heldout_chained_acceptance": [round(a, 4) for a in acceptance],
                        "expected_accepted_per_iteration": round(sum(acceptance), 4)})
        log(history[-1])
        best = (sum(acceptance), {k: v.detach().clone() for k, v in head.state_dict().items()}, 0)

    def save(epoch: int, done: int) -> None:
        partial = checkpoint.with_suffix(".partial")
        torch.save({"head": head.state_dict(), "optimizer": optimizer.state_dict(),
                    "schedule": schedule.state_dict(), "best": best, "history": history,
                    "epoch": epoch, "done": done, "epoch_rng": epoch_rng}, partial)
        partial.rename(checkpoint)

    layers = list(head.config.feature_layers)
    top_index = final_index if final_index is not None else \
        layers.index(FINAL_STATE) if FINAL_STATE in layers else None
    saved_at = time.monotonic()
    stop_at = math.inf if max_seconds is None else saved_at + max_seconds
    with tqdm(total=total, initial=first_epoch * len(batches) + done,
              desc="training head", disable=not progress) as bar:
        for epoch in range(first_epoch, epochs):
            if time.monotonic() >= stop_at:  # the limit passed as the last epoch ended
                break
            head.train()
            generator.set_state(epoch_rng)  # the epoch's shuffle, again on resume
            shuffled = [batches[i] for i in torch.randperm(len(batches), generator=generator)]
            for indices in shuffled[done:]:
                with torch.autocast(head.fc.weight.device.type, torch.bfloat16, enabled=bf16):
                    loss, hits = unrolled_loss(head, collate([entries[i] for i in indices],
                                                             head.fc.weight.device),
                                               steps, step_decay, regression_weight, top_index)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(parameters, 1.0)
                optimizer.step()
                schedule.step()
                done += 1
                bar.set_postfix(loss=f"{loss.item():.3f}", step1=f"{hits[0]:.2f}")
                bar.update()
                if (checkpoint is not None and done < len(batches)  # the epoch's end saves
                        and time.monotonic() - saved_at >= checkpoint_seconds):
                    save(epoch, done)
                    saved_at = time.monotonic()
                if time.monotonic() >= stop_at:
                    break
            stopped = done < len(batches)
            head.eval()
            acceptance = heldout_acceptance(head, heldout, steps)
            history.append({"epoch": epoch + 1, "loss": round(loss.item(), 4),
                            "heldout_chained_acceptance": [round(a, 4) for a in acceptance],
                            "expected_accepted_per_iteration": round(sum(acceptance), 4),
                            **({"stopped_at_time_limit": f"{done} of {len(batches)} batches"}
                               if stopped else {})})
            log(history[-1])
            if best is None or sum(acceptance) > best[0]:
                best = (sum(acceptance), {k: v.detach().clone()
                                          for k, v in head.state_dict().items()}, epoch + 1)
            if stopped:  # the checkpoint keeps the interrupted epoch: a rerun resumes it
                if checkpoint is not None:
                    save(epoch, done)
                break
            epoch_rng, done = generator.get_state(), 0
            if checkpoint is not None:
                save(epoch + 1, 0)
                saved_at = time.monotonic()
    head.load_state_dict(best[1])
    return history, best[2]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m specnb.training.train_head",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    add_data_arguments(parser)
    parser.add_argument("--data-tokens", type=int, default=None,
                        help="answer tokens to train on: the plan's first shards up to N, made "
                             "if missing (default: every shard already made; 140 000 tokens "
                             "if none is)")
    parser.add_argument("--draft-vocab", type=int, default=8192)
    parser.add_argument("--steps", type=int, default=3, help="unrolled draft steps in training")
    parser.add_argument("--step-decay", type=float, default=0.8)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--regression-weight", type=float, default=1.0,
                        help="weight of the feature regression loss (0: cross-entropy only)")
    parser.add_argument("--bf16", action="store_true",
                        help="autocast training's matrix products to bfloat16: faster on GPUs "
                             "and on CPUs with bfloat16 matrix units, possibly slower on CPUs "
                             "without them (weights and losses stay float32)")
    parser.add_argument("--train-lm-head", action="store_true",
                        help="train the LM head too (default: frozen target embedding rows)")
    parser.add_argument("--init", type=Path, metavar="HEAD", default=None,
                        help="continue from a saved head (its weights and its draft vocabulary; "
                             "--draft-vocab is then ignored): more data for a head already "
                             "trained, at a fraction of training from scratch")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N prompts")
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="end within this many minutes of the command's start, loading "
                             "included (a lent GPU's time): training stops there, the epoch in "
                             "progress is measured and may still be the best, the record says "
                             "where it stopped, and the same command resumes it")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layout", choices=sorted(LAYOUTS), default="specnb",
                        help="specnb: the default head (layers %s, each normed before fc); "
                             "engines: the EAGLE-3 layout vLLM and SGLang run (layers %s, raw), "
                             "which python -m specnb.export writes (default: %%(default)s)"
                             % (list(LAYOUTS["specnb"][0]), list(LAYOUTS["engines"][0])))
    parser.add_argument("--evaluate", type=Path, metavar="HEAD",
                        help="only measure a saved head: α̂ in the decoding loop on the open-ended "
                             "eval prompts, greedy and at T = 0.7, beside the distilled draft")
    parser.add_argument("--split", choices=("eval", "test"), default=None,
                        help="with --evaluate: the prompts it measures on, eval (the default: "
                             "the held-out prompts training reports on) or test (held out from "
                             "everything, for a figure no choice was tuned on)")
    add_device_arguments(parser)
    args = parser.parse_args(argv)
    if args.layout != "specnb" and args.out == DEFAULT_OUT and args.evaluate is None:
        parser.error(f"--layout {args.layout}: give --out (data/head holds the default head)")
    if args.split is not None and args.evaluate is None:
        parser.error("--split chooses the prompts of --evaluate; give --evaluate HEAD too")
    check_data_arguments(parser, args)
    if args.data_tokens is not None and args.data_tokens < 1:
        parser.error(f"--data-tokens must be >= 1, got {args.data_tokens}")
    for name in ("draft_vocab", "steps", "epochs", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be >= 1, got {args.limit}")
    if args.max_minutes is not None and not 0 < args.max_minutes < math.inf:
        parser.error(f"--max-minutes must be a finite number > 0, got {args.max_minutes}")
    if not (0 < args.lr < math.inf and 0 < args.step_decay <= 1):
        parser.error(f"--lr must be a finite number > 0 and --step-decay in (0, 1], got "
                     f"{args.lr} and {args.step_decay}")
    if not 0 <= args.regression_weight < math.inf:
        parser.error(f"--regression-weight must be a finite number >= 0, got "
                     f"{args.regression_weight}")
    check_out_folder(parser, "--out", args.out)
    check_device_arguments(parser, args)

    for flag, path in (("--evaluate", args.evaluate), ("--init", args.init)):
        if path is not None and not (path / "config.json").exists():
            parser.error(f"{flag} {path}: no saved head there (config.json missing)")
    started = time.perf_counter()
    generator = torch.Generator().manual_seed(args.seed)
    torch.manual_seed(args.seed)
    target, tokenizer = load_model(device=args.device, dtype=args.dtype)
    if args.evaluate is not None:
        evaluate(target, tokenizer, FeatureDrafter.from_pretrained(args.evaluate, target),
                 args.steps, args.seed, split=args.split or "eval")
        return
    for p in target.parameters():
        p.requires_grad_(False)
    prompt_ids = prompt_pool(target, tokenizer, args.self_prompts, seed=args.seed,
                             rows=args.data_batch_size)[:args.limit]
    build_args = dict(num_rounds=args.rounds, max_new_tokens=args.max_new_tokens,
                      eos_id=tokenizer.eos_token_id, seed=args.seed, rows=args.data_batch_size)
    paths = cached_shards(prompt_ids, args.rounds, args.max_new_tokens, args.seed) \
        if args.data_tokens is None else []
    if not paths:
        paths, _ = build(target, prompt_ids, tokens=args.data_tokens or 140_000, **build_args)
    examples = [e for path in tqdm(paths, desc="loading data") for e in torch.load(path)]

    # Held-out: the target's greedy answers to the eval prompts (cached like the rest).
    heldout_ids = [chat_ids(tokenizer, p["prompt"])[0].tolist() for p in load_prompts("eval")]
    key = hashlib.sha256(json.dumps([heldout_ids, 128, list(FEATURE_LAYERS)]).encode())
    heldout_path = shard_dir().parent / f"heldout-greedy-{key.hexdigest()[:12]}.pt"
    if not heldout_path.exists():
        heldout_path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(generate_with_features(target, heldout_ids, max_new_tokens=128,
                                          temperature=0.0, generator=generator,
                                          eos_id=tokenizer.eos_token_id), heldout_path)
    heldout_examples = torch.load(heldout_path)

    vocab = target.get_input_embeddings().weight.shape[0]
    special = sorted({tokenizer.eos_token_id, tokenizer.bos_token_id or 0,
                      *tokenizer.all_special_ids})
    start = None
    if args.init is not None:
        start = FeatureDrafter.from_pretrained(args.init, target).head.float()
        if args.layout == "engines" and start.config.feature_norms:
            # specnb's layout continued in the engines': the norms folded into fc (below)
            start = transfer_to_engines(start, [e["features"] for e in examples[:64]],
                                        len(LAYOUTS["engines"][0]))
        if tuple(start.config.feature_layers) != tuple(LAYOUTS[args.layout][0]):
            parser.error(f"--init {args.init}: the head reads layers "
                         f"{list(start.config.feature_layers)}, --layout {args.layout} reads "
                         f"{list(LAYOUTS[args.layout][0])}")
        draft_to_target = start.draft_to_target.cpu()
    else:
        draft_to_target = draft_vocabulary(examples, args.draft_vocab, special, vocab)
    target_to_draft = torch.full((vocab,), -1, dtype=torch.long)
    target_to_draft[draft_to_target] = torch.arange(len(draft_to_target))
    entries = [to_entries(e, target_to_draft) for e in examples]
    heldout = [to_entries(e, target_to_draft) for e in heldout_examples]
    # How many of the target's held-out answer tokens the draft vocabulary can draft at all.
    answers = torch.cat([torch.tensor(e["ids"][e["answer_start"]:]) for e in heldout_examples])
    coverage = float((target_to_draft[answers] >= 0).float().mean())
    answer_tokens = sum(len(e["ids"]) - e["answer_start"] for e in examples)
    print(f"{len(examples)} answers, {answer_tokens} answer tokens; draft vocabulary covers "
          f"{coverage:.3f} of held-out labels", file=sys.stderr)

    config = head_config(target, len(draft_to_target), args.layout)
    if start is None:
        head = init_head(config, target, draft_to_target, generator,
                         train_lm_head=args.train_lm_head)
    else:
        if start.config != config:
            parser.error(f"--init {args.init}: the head's config {start.config} is not the one "
                         f"this target and data call for ({config})")
        head = start.train()
        head.lm_head.weight.requires_grad_(args.train_lm_head)
    checkpoint = checkpoint_path(args, paths)
    history, best_epoch = train(head, entries, heldout, epochs=args.epochs,
                                batch_size=args.batch_size, lr=args.lr, steps=args.steps,
                                step_decay=args.step_decay, generator=generator,
                                regression_weight=args.regression_weight,
                                log=lambda h: print(json.dumps(h), file=sys.stderr),
                                checkpoint=checkpoint, bf16=args.bf16,
                                measure_start=start is not None,
                                max_seconds=None if args.max_minutes is None else max(
                                    0.0, 60 * args.max_minutes - (time.perf_counter() - started)),
                                final_index=FEATURE_LAYERS.index(FINAL_STATE))
    head.eval()
    FeatureDrafter(head).save_pretrained(args.out)
    if history[-1]["epoch"] == args.epochs and "stopped_at_time_limit" not in history[-1]:
        checkpoint.unlink(missing_ok=True)  # finished: nothing to resume
    write_record(
        args.out, "specnb.training.train_head", args, argv, started, target.device,
        seed=args.seed, prompts=len(prompt_ids), rounds=args.rounds, shards=len(paths),
        answers=len(examples), answer_tokens=answer_tokens,
        positions=sum(len(e["tokens"]) for e in entries),
        trainable_parameters=sum(p.numel() for p in head.parameters() if p.requires_grad),
        parameters=sum(p.numel() for p in head.parameters()),
        draft_vocab=len(draft_to_target), heldout_label_coverage=round(coverage, 4),
        init=None if args.init is None else _init_record(args.init),
        heldout=f"{len(heldout)} eval prompts, the target's greedy answers, 128 tokens",
        history=history, best_epoch=best_epoch,
    )


def checkpoint_path(args, paths: list) -> Path:
    """Where a training run keeps its state: keyed by the shards and every option that changes
    the result, so that only the same run resumes from it (`--out` does not count)."""
    keyed = {k: str(v) for k, v in vars(args).items()
             if k not in ("out", "evaluate", "init", "split", "max_minutes")}
    if getattr(args, "init", None) is not None:  # the head's weights, not where they lie
        keyed["init"] = hashlib.sha256((args.init / "model.safetensors").read_bytes()).hexdigest()
    key = hashlib.sha256(json.dumps([keyed, [Path(p).name for p in paths]],
                                    sort_keys=True).encode()).hexdigest()[:16]
    folder = shard_dir().parent / "head-train"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"checkpoint-{key}.pt"


def _init_record(path: Path) -> dict:
    """Where a continued head started: the digest of its weights and its own training record."""
    record = {"weights_sha256": hashlib.sha256((path / "model.safetensors").read_bytes())
              .hexdigest()}
    if (path / "training.json").exists():
        before = json.loads((path / "training.json").read_text())
        record.update({k: before.get(k) for k in ("command", "answer_tokens", "positions",
                                                  "best_epoch", "seconds")})
        record["history"] = before.get("history")
    return record


def evaluate(target, tokenizer, head, gamma: int, seed: int, max_new_tokens: int = 128,
             split: str = "eval") -> None:
    """α̂ (mean Σ min(p, q) over checked drafts), draft yield and tokens per forward of the head
    and of the distilled draft, greedy and at T = 0.7, all open-ended prompts of `split` as one
    batch."""
    from ..methods import speculative
    from ..models.pairs import load_embedded_draft
    from ..theory import estimate_alpha

    prompts = [chat_ids(tokenizer, p["prompt"])[0].tolist()
               for p in load_prompts(split, "open-ended")]
    draft = load_embedded_draft(target.device, target.dtype)
    print(f"{len(prompts)} open-ended {split} prompts, {max_new_tokens} new tokens, γ = {gamma}")
    for temperature in (0.0, 0.7):
        for name, drafter in (("feature head", head), ("distilled draft", draft)):
            result = speculative(target, drafter, prompts, gamma=gamma, temperature=temperature,
                                 max_new_tokens=max_new_tokens, trace=True,
                                 generator=torch.Generator(device=target.device).manual_seed(seed))
            print(f"T = {temperature:<4g} {name:<16} α̂ {estimate_alpha(result):.3f}  draft yield "
                  f"{result.stats.draft_yield:.3f}  tokens per row and iteration "
                  f"{result.stats.new_tokens / len(result.trace):.2f}")


def head_config(target, draft_vocab_size: int, layout: str = "specnb") -> HeadConfig:
    """The head's shape for `target`: its decoder layer's widths, the layout's target layers."""
    c = target.config
    layers, norms = LAYOUTS[layout]
    return HeadConfig(hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
                      num_attention_heads=c.num_attention_heads,
                      num_key_value_heads=c.num_key_value_heads,
                      head_dim=getattr(c, "head_dim", c.hidden_size // c.num_attention_heads),
                      rope_theta=float(c.rope_parameters["rope_theta"]),
                      rms_norm_eps=c.rms_norm_eps, feature_layers=layers, feature_norms=norms,
                      draft_vocab_size=draft_vocab_size,
                      max_position_embeddings=c.max_position_embeddings,
                      target_vocab_size=target.get_input_embeddings().weight.shape[0])


def transfer_to_engines(head: FeatureHead, features: list, num_layers: int = 3) -> FeatureHead:
    """A head in the engines' layout (its first `num_layers` layers, raw) that starts where
    `head` (specnb's layout, each layer RMS-normed before fc) is: every other weight is copied,
    and each kept layer's norm is folded into its block of fc's columns as weight / r, r the
    layer's median RMS over `features` (a list of `[n, L, H]` from the data). A position whose
    RMS is near the median then projects as before; the outliers of the residual stream do
    not, and the dropped layers' part is gone: a start for training, not a replacement."""
    from dataclasses import replace

    c = head.config
    if not c.feature_norms:
        raise ValueError("the head is in the engines' layout already: nothing to transfer")
    config = replace(c, feature_layers=tuple(c.feature_layers[:num_layers]), feature_norms=False)
    new = FeatureHead(config, head.embed[0], head.draft_to_target)
    rms = torch.cat([f[:, :num_layers].float() for f in features]).pow(2).mean(-1).sqrt()
    scale = rms.median(0).values  # [num_layers]
    state, width = head.state_dict(), c.hidden_size
    kept = {k: v for k, v in state.items() if k in new.state_dict() and k != "fc.weight"}
    kept["fc.weight"] = torch.cat([
        state["fc.weight"][:, i * width:(i + 1) * width]
        * (state[f"feature_norms.{i}.weight"] / scale[i])[None, :] for i in range(num_layers)], 1)
    new.load_state_dict(kept)
    return new.to(head.fc.weight.device)


def init_head(config: HeadConfig, target, draft_to_target, generator,
              train_lm_head: bool = False) -> FeatureHead:
    """Small random weights; the final norm and the LM head are the target's own (its final
    norm, its output rows of the draft vocabulary), so the head's output lives where the
    target's last hidden state does (EAGLE-1). The LM head stays frozen unless asked."""
    head = FeatureHead(config, target.get_input_embeddings(), draft_to_target)
    with torch.no_grad():
        for name, param in head.named_parameters():
            if "norm" not in name:
                param.normal_(0.0, 0.02, generator=generator)
        head.lm_head.weight.copy_(target.get_output_embeddings().weight[draft_to_target])
        head.final_norm.weight.copy_(target.model.norm.weight)
    head.lm_head.weight.requires_grad_(train_lm_head)
    return head.to(next(target.parameters()).device)


if __name__ == "__main__":
    main()
