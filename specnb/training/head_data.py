"""Training data for the feature-reading draft head, written by the target itself.

The target answers the training prompts (greedily, then by sampling at several temperatures),
and the *same* forwards that generate an answer also record what the head learns from: the
residual stream at a few layers for every position, and the target's top-k next-token
log-probabilities there. No second, teacher-forced pass is needed: on a 2-core CPU the target
does about 450 token-forwards per second whatever the batch, so every forward saved is data won.

Each batch of rows is cached on its own under `~/.cache/specnb/head-data/`, so an interrupted
run resumes where it stopped. It does not train anything (`specnb.training.train_head` does).
"""

import hashlib
import json

import torch
from tqdm.auto import tqdm
from transformers import DynamicCache

from ..core.sampler import logits_to_probs, sample
from ..models.loading import cache_dir

# Residual stream entering layers 2 and 15, leaving layer 27, and the final (normed) state:
# a low, a middle and a high layer as in EAGLE-3, plus the state the LM head reads.
FEATURE_LAYERS = (2, 15, 27, 30)


def round_settings(num_rounds: int) -> list:
    """Round 0 greedy, then sampled rounds cycling T = 0.7, 1.0, 0.85 (one seed per round)."""
    temperatures = (0.7, 1.0, 0.85)
    return [(0.0 if r == 0 else temperatures[(r - 1) % 3], r) for r in range(num_rounds)]


def data_dir(prompt_ids: list, max_new_tokens: int, layers=FEATURE_LAYERS):
    """The cache folder, named by what determines its content (prompts, length, layers)."""
    key = hashlib.sha256(json.dumps([[list(map(int, p)) for p in prompt_ids], max_new_tokens,
                                     list(layers)]).encode()).hexdigest()[:12]
    return cache_dir() / "head-data" / key


@torch.inference_mode()
def generate_with_features(target, prompts: list, *, max_new_tokens: int, temperature: float,
                           generator: torch.Generator, eos_id: int, layers=FEATURE_LAYERS,
                           top_k: int = 16) -> list:
    """Answer a batch of prompts (lists of ids); return one example per prompt.

    An example: `ids` (prompt + answer), `answer_start`, `features [n-1, len(layers), H]`
    (fp16; position t of ids, the last token is never fed), and `top_ids`, `top_logp`
    `[n-1, top_k]`: the target's next-token distribution after each answer position and the
    last prompt position (earlier prompt positions hold -1: not scored).
    """
    batch, width = len(prompts), max(len(p) for p in prompts)
    pad = eos_id
    ids = torch.full((batch, width), pad, dtype=torch.long)
    mask = torch.zeros(batch, width, dtype=torch.long)
    for row, prompt in enumerate(prompts):  # left padding: every row's last token at column -1
        ids[row, width - len(prompt):] = torch.tensor(prompt)
        mask[row, width - len(prompt):] = 1
    device = target.device
    ids, mask = ids.to(device), mask.to(device)
    cache = DynamicCache()
    per_step = []  # (features [B, T, L, H], top_logp, top_ids) for each forward
    answers = [[] for _ in range(batch)]
    finished = torch.zeros(batch, dtype=torch.bool)
    feed, positions = ids, (mask.cumsum(1) - 1).clamp_min(0)
    for step in range(max_new_tokens):
        # The prompts' forward scores only the last column: full-vocabulary labels for every
        # prompt position would cost gigabytes for long prompts; those positions get none (-1).
        out = target(input_ids=feed, attention_mask=mask, position_ids=positions,
                     past_key_values=cache, use_cache=True, output_hidden_states=True,
                     logits_to_keep=1)
        features = torch.stack([out.hidden_states[layer] for layer in layers], dim=2)
        top_logp, top_ids = out.logits.float().log_softmax(-1).topk(top_k, dim=-1)
        if step == 0 and feed.shape[1] > 1:
            none = feed.shape[1] - 1
            top_logp = torch.cat([top_logp.new_zeros(batch, none, top_k), top_logp], 1)
            top_ids = torch.cat([top_ids.new_full((batch, none, top_k), -1), top_ids], 1)
        per_step.append((features.half().cpu(), top_logp.half().cpu(), top_ids.int().cpu()))
        last = out.logits[:, -1]
        probs = logits_to_probs(last, temperature)
        token = probs.argmax(-1) if temperature == 0 else sample(probs, generator=generator)
        token = token.cpu()
        for row in range(batch):
            if not finished[row]:
                answers[row].append(int(token[row]))
        finished |= token == eos_id
        finished |= torch.tensor([len(a) >= max_new_tokens for a in answers])
        if bool(finished.all()):
            break
        feed = token.view(batch, 1).to(device)
        positions = positions[:, -1:] + 1
        mask = torch.cat([mask, torch.ones(batch, 1, dtype=mask.dtype, device=device)], 1)
    features = torch.cat([s[0] for s in per_step], 1)
    top_logp = torch.cat([s[1] for s in per_step], 1)
    top_ids = torch.cat([s[2] for s in per_step], 1)
    examples = []
    for row, (prompt, answer) in enumerate(zip(prompts, answers)):
        start = width - len(prompt)  # first real column
        fed = len(prompt) + len(answer) - 1  # the last answer token was never fed
        examples.append({"ids": list(prompt) + answer, "answer_start": len(prompt),
                         "features": features[row, start:start + fed].clone(),
                         "top_logp": top_logp[row, start:start + fed].clone(),
                         "top_ids": top_ids[row, start:start + fed].clone()})
    return examples


def build_rounds(target, prompt_ids: list, *, num_rounds: int, max_new_tokens: int, eos_id: int,
                 seed: int = 0, batch_size: int = 64, layers=FEATURE_LAYERS) -> list:
    """Generate (or load from the cache) every round; return the paths of the batch files."""
    folder = data_dir(prompt_ids, max_new_tokens, layers)
    folder.mkdir(parents=True, exist_ok=True)
    # Long prompts together: less padding per batch.
    order = sorted(range(len(prompt_ids)), key=lambda i: len(prompt_ids[i]))
    paths = []
    for temperature, round_ in round_settings(num_rounds):
        for start in tqdm(range(0, len(order), batch_size),
                          desc=f"round {round_} (T={temperature:g})"):
            path = folder / f"round{round_}-T{temperature:g}-seed{seed}-b{start}.pt"
            paths.append(path)
            if path.exists():
                continue
            generator = torch.Generator(device=target.device).manual_seed(
                seed * 100_003 + round_ * 1009 + start)
            rows = [list(map(int, prompt_ids[i])) for i in order[start:start + batch_size]]
            examples = generate_with_features(target, rows, max_new_tokens=max_new_tokens,
                                              temperature=temperature, generator=generator,
                                              eos_id=eos_id, layers=layers)
            partial = path.with_suffix(".partial")
            torch.save(examples, partial)
            partial.rename(path)
    return paths
