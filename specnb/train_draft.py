"""Distill a small draft model for the embedded target: `python -m specnb.train_draft`.

Recipe (measured choices are recorded in data/README.md):
1. The target answers every prompt of `data/prompts/train.jsonl` greedily; for each answer
   token we keep the target's top-k log-probabilities (generation gives them for free).
2. The draft is a narrow, shallow Llama with the target's tokenizer and vocabulary. Its token
   embedding (tied to its LM head) starts as the target's embedding projected onto its top
   principal components, so it knows which tokens are alike before training starts.
3. Training minimizes, on answer tokens only, cross-entropy against the target's greedy token
   plus cross-entropy against its renormalized top-k distribution (logit distillation).

Seeded end to end; runs on CPU (about half an hour on 2 cores) or GPU. It does not tune
hyper-parameters for you: the defaults are the ones that produced the shipped draft.
"""

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm
from transformers import LlamaConfig, LlamaForCausalLM

from .data import DATA_DIR, load_prompts
from .models import cache_dir, chat_ids, load_model

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
def generate_examples(target, prompt_ids: list, *, pad_id: int, eos_id: int, max_new_tokens: int,
                      top_k: int, batch_size: int, temperature: float = 0.0) -> list:
    """Answers of the target to `[L]` prompts (greedy, or sampled at `temperature`), with its
    top-k log-probs (at temperature 1) at every answer position."""
    sampling = {"do_sample": True, "temperature": temperature, "top_k": None, "top_p": None} \
        if temperature > 0 else {"do_sample": False}
    examples = []
    for start in tqdm(range(0, len(prompt_ids), batch_size), desc="target answers"):
        batch = prompt_ids[start:start + batch_size]
        width = max(len(ids) for ids in batch)
        input_ids = torch.stack([F.pad(ids, (width - len(ids), 0), value=pad_id) for ids in batch])
        mask = torch.stack([F.pad(torch.ones_like(ids), (width - len(ids), 0)) for ids in batch])
        out = target.generate(input_ids.to(target.device), attention_mask=mask.to(target.device),
                              max_new_tokens=max_new_tokens, **sampling, output_logits=True,
                              return_dict_in_generate=True, pad_token_id=pad_id,
                              eos_token_id=eos_id)
        logprobs = torch.stack(out.logits, dim=1).float().log_softmax(-1)  # [b, T, V]
        top_logp, top_ids = logprobs.topk(top_k, dim=-1)
        for row, ids in enumerate(batch):
            answer = out.sequences[row, width:].tolist()
            if eos_id in answer:
                answer = answer[:answer.index(eos_id) + 1]
            n = len(answer)
            examples.append({"ids": ids.tolist() + answer, "answer_start": len(ids),
                             "top_ids": top_ids[row, :n].cpu().int(),
                             "top_logp": top_logp[row, :n].cpu().half()})
    return examples


def distillation_loss(draft, batch, kd_weight: float) -> torch.Tensor:
    """CE on the target's argmax token + CE against its renormalized top-k distribution."""
    hidden = draft.model(input_ids=batch["input_ids"], attention_mask=batch["mask"])
    # Position t predicts token t+1: score only positions whose next token is an answer token
    # (the LM head over 49k tokens is most of the cost, so skip the prompt positions).
    targets = batch["answer_mask"][:, 1:]
    logp = draft.lm_head(hidden.last_hidden_state[:, :-1][targets]).float().log_softmax(-1)
    # The argmax is what greedy decoding emits; in sampled answers it differs from the text.
    hard = F.nll_loss(logp, batch["top_ids"][:, 0].long())  # logp: [N answer tokens, V]
    teacher = batch["top_logp"].float().softmax(-1)  # [N, k], renormalized over the top-k
    soft = -(teacher * logp.gather(-1, batch["top_ids"].long())).sum(-1).mean()
    return hard + kd_weight * soft


def collate(examples, pad_id: int, device) -> dict:
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
          pad_id: int, generator: torch.Generator) -> list:
    """AdamW with warm-up and cosine decay; returns the loss of every step."""
    device = next(draft.parameters()).device
    steps = epochs * math.ceil(len(examples) / batch_size)
    optimizer = torch.optim.AdamW(draft.parameters(), lr=lr, weight_decay=0.01)
    warmup = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(
        (s + 1) / warmup, 0.5 * (1 + math.cos(math.pi * min(1.0, s / steps)))))
    losses = []
    draft.train()
    with tqdm(total=steps, desc="training draft") as bar:
        for _ in range(epochs):
            order = torch.randperm(len(examples), generator=generator).tolist()
            for start in range(0, len(order), batch_size):
                batch = collate([examples[i] for i in order[start:start + batch_size]], pad_id,
                                device)
                loss = distillation_loss(draft, batch, kd_weight)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
                optimizer.step()
                schedule.step()
                losses.append(loss.item())
                bar.set_postfix(loss=f"{losses[-1]:.3f}")
                bar.update()
    return losses


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--hidden", type=int, default=160)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--kd-weight", type=float, default=1.0)
    parser.add_argument("--max-new-tokens", type=int, default=192)
    parser.add_argument("--top-k", type=int, default=32)
    parser.add_argument("--limit", type=int, default=None, help="use only the first N prompts")
    parser.add_argument("--sampled-passes", type=int, default=2,
                        help="extra answers per prompt, sampled at --sample-temperature")
    parser.add_argument("--sample-temperature", type=float, default=0.8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--generate-only", action="store_true",
                        help="only generate (and cache) the target's answers")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    generator = torch.Generator().manual_seed(args.seed)
    torch.manual_seed(args.seed)  # dropout-free model; this only pins library-internal draws
    target, tokenizer = load_model()
    prompts = load_prompts("train")[:args.limit]
    prompt_ids = [chat_ids(tokenizer, p["prompt"])[0] for p in prompts]
    examples = []
    for answer_pass in range(1 + args.sampled_passes):  # pass 0 greedy, then sampled
        temperature = 0.0 if answer_pass == 0 else args.sample_temperature
        data_path = cache_dir() / (f"distill-{len(prompts)}-{args.max_new_tokens}-{args.top_k}"
                                   f"{'' if answer_pass == 0 else f'-T{temperature}-s{answer_pass}'}.pt")
        if not data_path.exists():
            torch.manual_seed(args.seed + answer_pass)  # transformers samples from the global RNG
            torch.save(generate_examples(target, prompt_ids, pad_id=tokenizer.pad_token_id,
                                         eos_id=tokenizer.eos_token_id, top_k=args.top_k,
                                         max_new_tokens=args.max_new_tokens, batch_size=16,
                                         temperature=temperature), data_path)
        examples += torch.load(data_path)
    if args.generate_only:
        print(f"{len(examples)} answers cached in {cache_dir()}")
        return
    config = draft_config(target.config, hidden=args.hidden, layers=args.layers, heads=args.heads)
    draft = init_draft(target, config, generator).to(target.device)
    losses = train(draft, examples, epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                   kd_weight=args.kd_weight, pad_id=tokenizer.pad_token_id, generator=generator)
    draft.eval().to(torch.bfloat16).save_pretrained(args.out)
    record = {
        "command": "python -m specnb.train_draft " + " ".join(sys.argv[1:] if argv is None else argv),
        "seed": args.seed, "prompts": len(prompts),
        "answer_tokens": sum(len(e["ids"]) - e["answer_start"] for e in examples),
        "parameters": sum(p.numel() for p in draft.parameters()),
        "first_loss": losses[0], "last_loss": sum(losses[-20:]) / len(losses[-20:]),
        "seconds": round(time.perf_counter() - started, 1),
        "hardware": f"{platform.processor() or platform.machine()}, "
                    f"{torch.get_num_threads()} threads, device {target.device}",
        "torch": torch.__version__, "args": {k: str(v) for k, v in vars(args).items()},
    }
    (args.out / "training.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
