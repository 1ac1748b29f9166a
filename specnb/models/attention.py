"""Grouped-query attention without copying the cache, for multi-token chunks on a CPU.

The embedded model has 9 query heads and 3 key/value heads. transformers' SDPA attention lets
torch's kernel share each key/value head among its query heads (`enable_gqa`) only when there
is no attention mask; with a mask and more than one query token (checking drafts: a chain
after a cached prefix, a token tree, padded rows) it first copies every layer's keys and values
3× (`repeat_kv`), a copy of the whole cache per forward. Sharing the heads in place skips
that copy, whose cost grows with the cached length; a one-token forward is unchanged, and the
logits agree to float rounding (the same CPU kernel reads the shared heads in place,
tests/test_attention.py). So checking drafts gets cheaper and nothing else changes. How much
cheaper depends on the CPU and the cached length: `python -m specnb.bench.cpu_path` times both
attentions ("attention_pass_ms" in data/results/latency-cpu-*.json).

`use_gqa_attention(model)` registers `gqa_sdpa_attention` under the name "specnb_sdpa" and
switches a model that uses "sdpa" to it. The function takes only that one case, on the CPU
(query, keys, values and mask handed to torch's kernel with `enable_gqa=True`, as transformers
itself does without a mask); every other call (one token, no mask, a GPU, a model without
grouped heads, extras such as a position bias) goes to transformers' own SDPA function
unchanged. The model stays a normal transformers model: `generate`, our loops, hooks.
"""

import torch.nn.functional as F
from transformers.integrations.sdpa_attention import sdpa_attention_forward

NAME = "specnb_sdpa"


def gqa_sdpa_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                       is_causal=None, **kwargs):
    """transformers' SDPA attention, but a masked multi-token chunk on the CPU shares the
    key/value heads instead of copying them. `query [B, H, Q, D]`, `key`/`value [B, Hkv, S, D]`."""
    groups = getattr(module, "num_key_value_groups", 1)
    ours = (query.device.type == "cpu" and groups > 1 and attention_mask is not None
            and query.shape[2] > 1 and key.shape[-1] == value.shape[-1]
            and not any(kwargs.get(extra) is not None for extra in ("softcap", "position_bias"))
            and not kwargs.get("output_attentions", False))
    if not ours:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, is_causal=is_causal, **kwargs)
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                            dropout_p=dropout, scale=scaling, is_causal=False,
                                            enable_gqa=True)
    return output.transpose(1, 2).contiguous(), None


def register() -> None:
    """Make "specnb_sdpa" a name transformers knows, with SDPA's own mask builder."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    AttentionInterface.register(NAME, gqa_sdpa_attention)
    AttentionMaskInterface.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])


def use_gqa_attention(model):
    """Switch `model` from "sdpa" to "specnb_sdpa" (in place; other attentions are left as
    they are); returns it. `model.specnb_attention` names the attention it now runs."""
    if getattr(model.config, "_attn_implementation", None) == "sdpa":
        register()
        model.set_attn_implementation(NAME)
    model.specnb_attention = model.config._attn_implementation
    return model
