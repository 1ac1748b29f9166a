"""What the batched loops share: reading a batch of prompts, and the per-row output buffer.

A batch is a list of prompts of different lengths (each a list of ids or a `[L]` / `[1, L]`
tensor), or `input_ids [B, L]` with an `attention_mask [B, L]` (left or right padding).
`BatchOutput` appends each row's newly emitted tokens with tensor ops only: it keeps what is
within the row's budget and up to its first EOS, and flags rows that are done.
"""

import torch

from .common import Iteration

BATCH_HELP = ("pass a list of prompts (lists of ids or 1-D tensors), or input_ids [B, L] with "
              "attention_mask [B, L] (1 = token, 0 = padding)")


def is_batch(input_ids, attention_mask) -> bool:
    """A list of prompts, more than one row, or an attention mask means the batched path."""
    return (isinstance(input_ids, (list, tuple)) or attention_mask is not None
            or (isinstance(input_ids, torch.Tensor) and input_ids.dim() == 2
                and input_ids.shape[0] > 1))


def batch_prompts(model, input_ids, attention_mask, max_new_tokens: int, extra: int = 0) -> list:
    """Validate a batch and the length budget; return one list of ids per row.

    `extra` is how far past max_new_tokens a loop may look (drafts scored after the budget).
    Example: ids [[0, 5, 6], [7, 8, 9]] with mask [[0, 1, 1], [1, 1, 1]] -> [[5, 6], [7, 8, 9]].
    """
    if isinstance(input_ids, (list, tuple)):
        if attention_mask is not None:
            raise ValueError("attention_mask goes with an input_ids tensor, not a list of prompts")
        prompts = [_as_id_list(p, i) for i, p in enumerate(input_ids)]
    else:
        if not isinstance(input_ids, torch.Tensor) or input_ids.dtype != torch.long \
                or input_ids.dim() != 2:
            raise ValueError(f"input_ids must be a LongTensor [B, L]; {BATCH_HELP}")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if attention_mask.shape != input_ids.shape:
            raise ValueError(f"attention_mask must have the shape of input_ids "
                             f"{list(input_ids.shape)}, got {list(attention_mask.shape)}")
        if not ((attention_mask == 0) | (attention_mask == 1)).all():
            raise ValueError("attention_mask must hold only 0 (padding) and 1 (token)")
        prompts = [row[mask.bool()].tolist() for row, mask in zip(input_ids.cpu(),
                                                                  attention_mask.cpu())]
    if not prompts:
        raise ValueError(f"the batch is empty; {BATCH_HELP}")
    for i, prompt in enumerate(prompts):
        if not prompt:
            raise ValueError(f"prompt {i} is empty: every row needs at least one token")
    if int(max_new_tokens) != max_new_tokens or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an integer >= 1, got {max_new_tokens}")
    vocab = model.get_output_embeddings().weight.shape[0]
    for i, prompt in enumerate(prompts):
        if min(prompt) < 0 or max(prompt) >= vocab:
            raise ValueError(f"prompt {i} must hold ids in [0, {vocab}), the model's vocabulary")
    context = getattr(model.config, "max_position_embeddings", None)
    longest = max(len(p) for p in prompts)
    if context is not None and longest + max_new_tokens + extra > context:
        raise ValueError(f"the longest prompt ({longest} tokens) + max_new_tokens={max_new_tokens}"
                         f" + {extra} lookahead exceeds the model's context of {context} tokens; "
                         f"shorten the prompts or lower max_new_tokens")
    return prompts


def _as_id_list(prompt, index: int) -> list:
    if isinstance(prompt, torch.Tensor):
        if prompt.dtype != torch.long or prompt.dim() not in (1, 2) or \
                (prompt.dim() == 2 and prompt.shape[0] != 1):
            raise ValueError(f"prompt {index} must be a LongTensor [L] or [1, L], got "
                             f"{prompt.dtype} {list(prompt.shape)}")
        return prompt.reshape(-1).tolist()
    if not all(isinstance(t, int) for t in prompt):
        raise ValueError(f"prompt {index} must be a list of int ids; {BATCH_HELP}")
    return list(prompt)


def pad_token_id(model) -> int:
    """The id fed in padding slots (never attended to, so any valid id works)."""
    for config in (getattr(model, "generation_config", None), model.config):
        value = getattr(config, "pad_token_id", None)
        if isinstance(value, int) and value >= 0:
            return value
    return 0


class BatchOutput:
    """New tokens of B rows in one `[B, max_new_tokens + 1]` buffer, -1 where nothing was kept."""

    def __init__(self, batch: int, max_new_tokens: int, eos_ids: set, device):
        # One spare column past the budget receives every write that is not kept, so `extend`
        # needs no boolean indexing (which would wait for the device to count the kept tokens).
        self.buffer = torch.full((batch, max_new_tokens + 1), -1, dtype=torch.long, device=device)
        self.count = torch.zeros(batch, dtype=torch.long, device=device)  # tokens kept per row
        self.finished = torch.zeros(batch, dtype=torch.bool, device=device)
        self.max_new_tokens = max_new_tokens
        self.eos = torch.tensor(sorted(eos_ids), dtype=torch.long, device=device)

    def extend(self, rows: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Append `tokens [A, T]` (-1 padded on the right) to `rows [A]`; return kept counts [A].

        Example: budget 3, row holds [4], tokens [7, 2, 9] with EOS 2 -> keeps [7, 2], finished.
        """
        width = tokens.shape[1]
        slot = self.count[rows].unsqueeze(1) + torch.arange(width, device=tokens.device)  # [A, T]
        is_eos = torch.isin(tokens, self.eos)
        after_eos = (is_eos.long().cumsum(1) - is_eos.long()) > 0
        keep = (tokens >= 0) & (slot < self.max_new_tokens) & ~after_eos
        row_index = rows.unsqueeze(1).expand_as(slot)
        spare = torch.full_like(slot, self.max_new_tokens)
        self.buffer.index_put_((row_index, torch.where(keep, slot, spare)),
                               torch.where(keep, tokens, -1))
        kept = keep.sum(1)
        self.count[rows] += kept
        self.finished[rows] |= (self.count[rows] >= self.max_new_tokens) | (is_eos & keep).any(1)
        return kept

    def tokens(self) -> list:
        """One list of new ids per row."""
        return [row[:n].tolist() for row, n in zip(self.buffer.cpu(), self.count.cpu().tolist())]


def record(trace: list, rows: list, emitted: list, accepted=None, drafted=None, **seconds) -> None:
    """One `Iteration` for the whole batch: per-row emitted tokens (and drafts) in `info`."""
    info = {"rows": list(rows), "emitted": emitted}
    if accepted is not None:
        info["accepted"], info["drafted"] = accepted, drafted
    trace.append(Iteration(info=info, **seconds))
