"""Distill a small draft model for the embedded target: `python -m specnb.training.train_draft`.

Recipe (measured choices are recorded in data/README.md):
1. The target answers every prompt of `data/prompts/train.jsonl` greedily, then `--samples`
   more times by sampling at `--temperature` (seeded): the same prompts, more varied answers.
   One teacher forward per batch labels every answer token with the target's top-k
   log-probabilities. Held-out agreement grows with this data, not with more epochs.
2. The draft is a narrow, shallow Llama with the target's tokenizer and vocabulary. Its token
   embedding (tied to its LM head) starts as the target's embedding projected onto its top
   principal components, so it knows which tokens are alike before training starts.
3. Training minimizes, on answer tokens only, cross-entropy against the target's argmax token
   plus cross-entropy against its renormalized top-k distribution (logit distillation).
4. The end of the run measures the draft's top-1 agreement with the target on the held-out
   eval prompts (`--evaluate DRAFT ...` measures saved drafts) and records it in training.json.

Seeded end to end; runs on CPU or GPU. Generation and labels are cached in ~/.cache/specnb, one
file per round, so a second run with other training settings starts training at once. The
defaults are the ones that produced the shipped draft."""

import argparse
import math
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from ..core.args import check_out_folder
from ..methods import autoregressive
from ..models.data import DATA_DIR, load_prompts
from ..models.loading import cache_dir, chat_ids, load_model
from .common import warmup_cosine, write_record

DEFAULT_OUT = DATA_DIR / "draft"


def draft_config(target_config, *, hidden: int, layers: int, heads: int) -> LlamaConfig:
    """A narrow Llama sharing the target's vocabulary, special tokens and context length."""
    return LlamaConfig(
        vocab_size=target_config.vocab_size, hidden_size=hidden, intermediate_size=3 * hidden,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
        max_position_embeddings=target_config.max_position_embeddings,
        rope_parameters=dict(target_config.rope_parameters), rms_norm_eps=1e-5,
        bos_token_id=target_config.bos_token_id, eos_token_id=target_config.eos_token_id,
        pad_token_id=target_config.pad_token_id, tie_word_embeddings=True)


def init_draft(target, config: LlamaConfig, generator: torch.Generator) -> LlamaForCausalLM:
    """Random layers; embedding = target embedding on its top principal directions."""
    draft = LlamaForCausalLM(config)
    with torch.no_grad():
        for name, param in draft.named_parameters():
            if "norm" not in name:
                param.normal_(0.0, 0.02, generator=generator)
        embedding = target.get_input_embeddings().weight.float().cpu()
        centered = embedding - embedding.mean(0)
        _, _, directions = torch.linalg.svd(centered, full_matrices=False)
        projected = centered @ directions[:config.hidden_size].T  # [V, hidden]
        draft.get_input_embeddings().weight.copy_(projected / projected.std() * 0.05)
    draft.tie_weights()
    return draft


@torch.no_grad()
def generate_answers(target, prompt_ids: list, *, eos_id: int, max_new_tokens: int,
                     batch_size: int, temperature: float = 0.0,
                     generator: torch.Generator | None = None) -> list:
    """The target's answers to `[L]` prompts: [{"ids": prompt + answer, "answer_start"}].

    Greedy by default; with a temperature, sampled answers (exactly the target's law, through
    specnb's batched decoding and the explicit generator) give more varied contexts per prompt.
    """
    examples = []
    desc = "target answers" + (f" (T={temperature})" if temperature else "")
    for start in tqdm(range(0, len(prompt_ids), batch_size), desc=desc):
        batch = [ids.tolist() for ids in prompt_ids[start:start + batch_size]]
        out = autoregressive(target, batch, max_new_tokens=max_new_tokens, eos_token_id=eos_id,
                             temperature=temperature, generator=generator)
        examples += [{"ids": ids + answer, "answer_start": len(ids)}
                     for ids, answer in zip(batch, out.tokens)]
    return examples


@torch.no_grad()
def label_with_target(target, examples: list, *, top_k: int, batch_size: int) -> list:
    """Add the target's top-k log-probs for every next token (positions 1..n-1) of each example.

    One teacher forward per batch labels prompt and answer tokens alike, which is far cheaper
    than generating: the prompt positions are extra training signal almost for free.
    """
    labelled = []
    for start in tqdm(range(0, len(examples), batch_size), desc="target labels"):
        batch = examples[start:start + batch_size]
        width = max(len(e["ids"]) for e in batch)
        input_ids = torch.zeros(len(batch), width, dtype=torch.long)
        mask = torch.zeros(len(batch), width, dtype=torch.long)
        for row, e in enumerate(batch):
            input_ids[row, :len(e["ids"])], mask[row, :len(e["ids"])] = torch.tensor(e["ids"]), 1
        logits = target(input_ids.to(target.device), attention_mask=mask.to(target.device)).logits
        top_logp, top_ids = logits.float().log_softmax(-1).topk(top_k, dim=-1)  # [b, T, k]
        for row, e in enumerate(batch):
            n = len(e["ids"])
            labelled.append({**e, "top_ids": top_ids[row, :n - 1].cpu().int(),
                             "top_logp": top_logp[row, :n - 1].cpu().half()})
    return labelled


def distillation_loss(draft, batch, kd_weight: float, prompt_weight: float) -> torch.Tensor:
    """CE on the target's argmax token + CE against its renormalized top-k distribution,
    per next-token position; prompt positions count `prompt_weight`, answer positions 1."""
    hidden = draft.model(input_ids=batch["input_ids"], attention_mask=batch["mask"])
    predicts = batch["mask"][:, 1:].bool()  # position t predicts token t+1: [b, T-1]
    answers = batch["answer_mask"][:, 1:][predicts]  # [N] over all labelled positions
    # The LM head over 49k tokens dominates the cost: score only positions that carry weight.
    scored = answers if prompt_weight == 0 else torch.ones_like(answers)
    logp = draft.lm_head(hidden.last_hidden_state[:, :-1][predicts][scored]).float().log_softmax(-1)
    top_ids, top_logp = batch["top_ids"][scored].long(), batch["top_logp"][scored].float()
    hard = -logp.gather(-1, top_ids[:, :1]).squeeze(-1)  # [N]: the target's argmax
    teacher = top_logp.softmax(-1)  # [N, k], renormalized over the top-k
    soft = -(teacher * logp.gather(-1, top_ids)).sum(-1)  # [N]
    weights = torch.where(answers[scored], 1.0, prompt_weight)
    return ((hard + kd_weight * soft) * weights).sum() / weights.sum()


def collate(examples, pad_id: int, device) -> dict:
    """Right-pad a batch; stack the target's labels in the order of the next-token positions."""
    width = max(len(e["ids"]) for e in examples)
    input_ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    mask = torch.zeros(len(examples), width, dtype=torch.long)
    answer_mask = torch.zeros(len(examples), width, dtype=torch.bool)
    for row, e in enumerate(examples):
        input_ids[row, :len(e["ids"])] = torch.tensor(e["ids"])
        mask[row, :len(e["ids"])] = 1
        answer_mask[row, e["answer_start"]:len(e["ids"])] = True
    return {"input_ids": input_ids.to(device), "mask": mask.to(device),
            "answer_mask": answer_mask.to(device),
            "top_ids": torch.cat([e["top_ids"] for e in examples]).to(device),
            "top_logp": torch.cat([e["top_logp"] for e in examples]).to(device)}


def train(draft, examples, *, epochs: int, batch_size: int, lr: float, kd_weight: float,
          prompt_weight: float, pad_id: int, generator: torch.Generator) -> list:
    """AdamW with warm-up and cosine decay; returns the loss of every step."""
    device = next(draft.parameters()).device
    steps = epochs * math.ceil(len(examples) / batch_size)
    optimizer = torch.optim.AdamW(draft.parameters(), lr=lr, weight_decay=0.01)
    schedule = warmup_cosine(optimizer, steps)
    losses = []
    draft.train()
    with tqdm(total=steps, desc="training draft") as bar:
        for _ in range(epochs):
            order = torch.randperm(len(examples), generator=generator).tolist()
            for start in range(0, len(order), batch_size):
                batch = collate([examples[i] for i in order[start:start + batch_size]], pad_id,
                                device)
                loss = distillation_loss(draft, batch, kd_weight, prompt_weight)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
                optimizer.step()
                schedule.step()
                losses.append(loss.item())
                bar.set_postfix(loss=f"{losses[-1]:.3f}")
                bar.update()
    return losses


@torch.no_grad()
def heldout_agreement(target, drafts: list, prompt_ids: list, *, eos_id: int,
                      max_new_tokens: int = 64) -> list:
    """Teacher-forced top-1 agreement of each draft with the target on the target's greedy
    answers to held-out prompts: the fraction of answer positions where the draft's argmax is
    the target's next token. It predicts acceptance far faster than a timed benchmark."""
    answers = autoregressive(target, [ids.tolist() for ids in prompt_ids], eos_token_id=eos_id,
                             max_new_tokens=max_new_tokens).tokens
    scores = []
    for draft in drafts:
        hits = total = 0
        for ids, answer in zip(prompt_ids, answers):
            sequence = torch.tensor([ids.tolist() + answer], device=draft.device)
            guesses = draft(sequence).logits[0, len(ids) - 1:-1].argmax(-1).cpu()
            hits += int((guesses == torch.tensor(answer)).sum())
            total += len(answer)
        scores.append(hits / total)
    return scores


def check_args(parser, args) -> None:
    """Refuse bad flags and output paths with an argparse message (exit 2) before any model is
    loaded: a zero would otherwise end hours later in a ZeroDivisionError."""
    for name in ("hidden", "layers", "heads", "epochs", "batch_size", "max_new_tokens", "top_k"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.hidden % args.heads or (args.hidden // args.heads) % 2:
        parser.error(f"--hidden ({args.hidden}) must be --heads ({args.heads}) times an even "
                     f"head size (rotary embeddings rotate pairs)")
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be >= 1, got {args.limit}")
    if args.samples < 0:
        parser.error(f"--samples must be >= 0, got {args.samples}")
    if not 0 < args.lr < math.inf:
        parser.error(f"--lr must be a finite number > 0, got {args.lr}")
    for name in ("kd_weight", "prompt_weight"):
        if not 0 <= getattr(args, name) < math.inf:
            parser.error(f"--{name.replace('_', '-')} must be a finite number >= 0, got "
                         f"{getattr(args, name)}")
    if args.samples and not 0 < args.temperature < math.inf:
        parser.error(f"--temperature must be a finite number > 0 for sampled answers, got "
                     f"{args.temperature}")
    for path in args.evaluate or []:
        if not (path / "config.json").exists():
            parser.error(f"--evaluate {path}: no saved draft there (config.json missing)")
    check_out_folder(parser, "--out", args.out)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m specnb.training.train_draft",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--hidden", type=int, default=160)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--kd-weight", type=float, default=1.0)
    parser.add_argument("--max-new-tokens", type=int, default=192)
    parser.add_argument("--top-k", type=int, default=32)
    parser.add_argument("--limit", type=int, default=None, help="use only the first N prompts")
    parser.add_argument("--prompt-weight", type=float, default=0.0,
                        help="loss weight of prompt positions (answer positions weigh 1)")
    parser.add_argument("--samples", type=int, default=5,
                        help="sampled answers per prompt, on top of the greedy one")
    parser.add_argument("--temperature", type=float, default=0.8,
                        help="temperature of the sampled answers")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--generate-only", action="store_true",
                        help="only generate (and cache) the target's answers")
    parser.add_argument("--evaluate", type=Path, nargs="+", metavar="DRAFT",
                        help="only print the held-out agreement of these saved drafts")
    args = parser.parse_args(argv)
    check_args(parser, args)

    started = time.perf_counter()
    generator = torch.Generator().manual_seed(args.seed)
    torch.manual_seed(args.seed)  # dropout-free model; this only pins library-internal draws
    target, tokenizer = load_model()
    if args.top_k > target.config.vocab_size:  # known once the target is here; no work done yet
        parser.error(f"--top-k must be <= the vocabulary ({target.config.vocab_size}), got "
                     f"{args.top_k}")
    heldout = [chat_ids(tokenizer, p["prompt"])[0] for p in load_prompts("eval")]
    if args.evaluate:
        drafts = [AutoModelForCausalLM.from_pretrained(path, dtype=target.dtype).to(target.device)
                  .eval() for path in args.evaluate]
        for path, score in zip(args.evaluate, heldout_agreement(
                target, drafts, heldout, eos_id=tokenizer.eos_token_id)):
            print(f"{path}: held-out top-1 agreement {score:.3f}")
        return
    prompts = load_prompts("train")[:args.limit]
    prompt_ids = [chat_ids(tokenizer, p["prompt"])[0] for p in prompts]
    # Round 0: greedy answers; rounds 1..samples: sampled ones. Each round and its labels are
    # cached on their own, so an interrupted run resumes where it stopped.
    examples = []
    for round_ in range(args.samples + 1):
        temperature = 0.0 if round_ == 0 else args.temperature
        stem = f"answers-{len(prompts)}-{args.max_new_tokens}"
        if round_:
            stem += f"-T{temperature:g}-seed{args.seed}-{round_}"
        answers_path = cache_dir() / f"{stem}.pt"
        if not answers_path.exists():
            round_generator = torch.Generator().manual_seed(args.seed * 1000 + round_)
            torch.save(generate_answers(target, prompt_ids, eos_id=tokenizer.eos_token_id,
                                        max_new_tokens=args.max_new_tokens, batch_size=48,
                                        temperature=temperature, generator=round_generator),
                       answers_path)
        if args.generate_only:
            print(f"{len(prompts)} answers cached in {answers_path}")
            continue
        labels_path = answers_path.with_name(f"{stem}-top{args.top_k}.pt")
        if not labels_path.exists():
            torch.save(label_with_target(target, torch.load(answers_path), top_k=args.top_k,
                                         batch_size=4), labels_path)
        examples += torch.load(labels_path)
    if args.generate_only:
        return
    config = draft_config(target.config, hidden=args.hidden, layers=args.layers, heads=args.heads)
    draft = init_draft(target, config, generator).to(target.device)
    losses = train(draft, examples, epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                   kd_weight=args.kd_weight, prompt_weight=args.prompt_weight,
                   pad_id=tokenizer.pad_token_id, generator=generator)
    draft.eval()
    agreement = heldout_agreement(target, [draft], heldout, eos_id=tokenizer.eos_token_id)[0]
    draft.to(torch.bfloat16).save_pretrained(args.out)
    write_record(
        args.out, "specnb.training.train_draft", args, argv, started, target.device,
        seed=args.seed, prompts=len(prompts),
        answer_tokens=sum(len(e["ids"]) - e["answer_start"] for e in examples),
        labelled_tokens=sum(len(e["ids"]) - 1 for e in examples),
        parameters=sum(p.numel() for p in draft.parameters()),
        heldout_agreement=round(agreement, 4),
        heldout=f"{len(heldout)} eval prompts, the target's greedy answers, 64 tokens",
        first_loss=losses[0], last_loss=sum(losses[-20:]) / len(losses[-20:]),
    )


if __name__ == "__main__":
    main()
