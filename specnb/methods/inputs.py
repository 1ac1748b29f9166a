"""The input checks every generation method shares: one place, one message style.

Prompts come in the shapes people have: a `[1, L]` or `[L]` tensor, a flat list of ids (what
`tokenizer.encode` returns), a list of prompts, or `input_ids [B, L]` with an `attention_mask`.
All become one list of ids per row. Integers may be Python, NumPy or 0-d tensor integers; bools
and floats are refused. Every failure is a `ValueError` that names the argument and the fix.
"""

import numbers
from collections.abc import Mapping

import numpy as np
import torch

from ..core.args import check_int

PROMPT_HELP = ("pass one prompt (a [1, L] LongTensor or a list of ids), a list of prompts, or "
               "input_ids [B, L] with attention_mask [B, L] (1 = token, 0 = padding)")


def vocab_size(model) -> int:
    """Rows of the model's output embedding; a clear error for anything that is not a causal LM."""
    if not callable(getattr(model, "get_output_embeddings", None)):
        raise ValueError(f"the model must be a transformers causal LM (e.g. from "
                         f"specnb.load_model), got {type(model).__name__}")
    return model.get_output_embeddings().weight.shape[0]


def eos_token_ids(model, eos_token_id=None) -> set:
    """EOS ids from the argument, else the generation config, else the model config.

    Accepts an integer (Python, NumPy, 0-d tensor) or a list of them, each inside the vocabulary.
    """
    given = eos_token_id is not None
    if eos_token_id is None:
        eos_token_id = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos_token_id is None:
        eos_token_id = getattr(model.config, "eos_token_id", None)
    if eos_token_id is None:
        return set()
    if isinstance(eos_token_id, torch.Tensor):
        eos_token_id = eos_token_id.tolist()
    items = eos_token_id if isinstance(eos_token_id, (list, tuple, set)) else [eos_token_id]
    vocab = vocab_size(model)
    ids = {check_int("eos_token_id", t, 0) for t in items}
    if given and any(t >= vocab for t in ids):
        raise ValueError(f"eos_token_id must hold ids in [0, {vocab}), got {sorted(ids)}")
    return ids


def check_same_vocab(target, draft) -> None:
    """The draft must score the same vocabulary as the target, row for row."""
    if vocab_size(target) != vocab_size(draft):
        raise ValueError(f"draft vocabulary ({vocab_size(draft)} rows) differs from the target's "
                         f"({vocab_size(target)}); speculative decoding needs one shared tokenizer")


def prompt_list(model, input_ids, attention_mask, max_new_tokens) -> tuple:
    """Validate prompts and the length budget; return (one list of ids per row, max_new_tokens).

    Example: ids [[0, 5, 6], [7, 8, 9]] with mask [[0, 1, 1], [1, 1, 1]] -> [[5, 6], [7, 8, 9]].
    """
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, 1)
    if isinstance(input_ids, np.ndarray) and input_ids.dtype.kind in "iu":
        input_ids = torch.from_numpy(input_ids)
    if isinstance(input_ids, Mapping) and "input_ids" in input_ids:  # a tokenizer's whole output
        raise ValueError("input_ids is a tokenizer's output; pass enc['input_ids'] (and "
                         "attention_mask=enc['attention_mask'] for a padded batch)")
    if isinstance(attention_mask, np.ndarray):
        attention_mask = torch.from_numpy(attention_mask)
    if isinstance(input_ids, (list, tuple)):
        if attention_mask is not None:
            raise ValueError("attention_mask goes with an input_ids tensor, not a list of prompts")
        if input_ids and all(isinstance(t, numbers.Integral) and not isinstance(t, bool)
                             for t in input_ids):
            prompts = [[int(t) for t in input_ids]]  # a flat list of ids is one prompt
        else:
            prompts = [_as_id_list(p, i) for i, p in enumerate(input_ids)]
    elif isinstance(input_ids, torch.Tensor):
        if input_ids.dim() in (1, 2) and _is_integer(input_ids):
            input_ids = input_ids.long()  # int32 ids (and NumPy's) are ids too
        if input_ids.dtype != torch.long or input_ids.dim() not in (1, 2):
            raise ValueError(f"input_ids must be a LongTensor [L] or [B, L], got {input_ids.dtype} "
                             f"{list(input_ids.shape)}; {PROMPT_HELP}")
        input_ids = input_ids.view(1, -1) if input_ids.dim() == 1 else input_ids
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if not isinstance(attention_mask, torch.Tensor) or attention_mask.shape != input_ids.shape:
            raise ValueError(f"attention_mask must be a tensor of the shape of input_ids "
                             f"{list(input_ids.shape)}")
        if not ((attention_mask == 0) | (attention_mask == 1)).all():
            raise ValueError("attention_mask must hold only 0 (padding) and 1 (token)")
        prompts = [row[mask.bool()].tolist() for row, mask in zip(input_ids.cpu(),
                                                                  attention_mask.cpu())]
    else:
        raise ValueError(f"input_ids must be a tensor or a list, got {type(input_ids).__name__}; "
                         f"{PROMPT_HELP}")
    if not prompts:
        raise ValueError(f"the batch is empty; {PROMPT_HELP}")
    vocab = vocab_size(model)
    for i, prompt in enumerate(prompts):
        if not prompt:
            raise ValueError(f"prompt {i} is empty: every row needs at least one token")
        if min(prompt) < 0 or max(prompt) >= vocab:
            raise ValueError(f"prompt {i} must hold ids in [0, {vocab}), the model's vocabulary")
    context = getattr(model.config, "max_position_embeddings", None)
    longest = max(len(p) for p in prompts)
    if context is not None and longest + max_new_tokens > context:
        raise ValueError(f"the longest prompt ({longest} tokens) + max_new_tokens={max_new_tokens}"
                         f" exceeds the model's context of {context} tokens; shorten the prompt "
                         f"or lower max_new_tokens")
    return prompts, max_new_tokens


def _as_id_list(prompt, index: int) -> list:
    if isinstance(prompt, torch.Tensor):
        if prompt.dtype != torch.long or prompt.dim() not in (1, 2) or \
                (prompt.dim() == 2 and prompt.shape[0] != 1):
            raise ValueError(f"prompt {index} must be a LongTensor [L] or [1, L], got "
                             f"{prompt.dtype} {list(prompt.shape)}")
        return prompt.reshape(-1).tolist()
    if not isinstance(prompt, (list, tuple)) or not all(
            isinstance(t, numbers.Integral) and not isinstance(t, bool) for t in prompt):
        raise ValueError(f"prompt {index} must be a list of int ids; {PROMPT_HELP}")
    return [int(t) for t in prompt]


def _is_integer(tensor: torch.Tensor) -> bool:
    return not tensor.is_floating_point() and not tensor.is_complex() and tensor.dtype != torch.bool
